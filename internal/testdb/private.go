package testdb

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rustbill/paymentd/internal/pgcluster"
)

// PrivateServer starts a PostgreSQL server of the test's own, for a test
// that changes the whole server (its settings, a standby of it, a kill or
// a restart): it answers the URL of the server's empty database dbname and
// the cluster's directory. A second server (a standby) goes beside it, in
// filepath.Dir(dir); the test stops that one itself, in a cleanup
// registered after this call so that it runs first. This server is
// stopped, and the base directory removed, when the test ends.
func PrivateServer(t testing.TB, dbname string) (dbURL, dir string) {
	t.Helper()
	// Not t.TempDir: its parent is 0700, and a server running as postgres
	// (when the tests run as root) could not enter it.
	base, err := os.MkdirTemp("", "paymentd-private-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(base, "postgres")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := pgcluster.Stop(ctx, dir); err != nil {
			t.Errorf("testdb: stop the private server: %v", err)
		}
		_ = os.RemoveAll(base)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dbURL, err = pgcluster.Ensure(ctx, dir, dbname, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return dbURL, dir
}
