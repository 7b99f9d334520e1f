package testdb

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
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
//
// Under Main the server is a copy of a cluster made once per test process
// (initdb, started and stopped once: pgcluster.StartCopy), so only the
// first private server of a process pays for initdb; without Main each
// one is made by initdb.
func PrivateServer(t testing.TB, dbname string) (dbURL, dir string) {
	t.Helper()
	base, err := serverBase("paymentd-private-")
	if err != nil {
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
	template, err := privateTemplate(ctx, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if template != "" {
		if _, err := pgcluster.StartCopy(ctx, template, dir, t.Logf); err != nil {
			t.Fatal(err)
		}
	}
	dbURL, err = pgcluster.Ensure(ctx, dir, dbname, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	return dbURL, dir
}

// StoppedPrivateCluster puts a stopped copy of the process's template of
// private servers (see PrivateServer) into dir, which must not exist yet,
// for a test of a command that starts the cluster in dir itself (paymentd
// dev) and is not about its first initdb. The test stops and removes dir.
// The package's TestMain must run the tests through Main.
func StoppedPrivateCluster(t testing.TB, dir string) {
	t.Helper()
	private.mu.Lock()
	managed := private.managed
	private.mu.Unlock()
	if !managed {
		t.Fatal("testdb.StoppedPrivateCluster needs the package's TestMain to run the tests through testdb.Main")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	template, err := privateTemplate(ctx, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := pgcluster.Copy(ctx, template, dir, t.Logf); err != nil {
		t.Fatal(err)
	}
}

// serverBase makes a base directory for a data directory. Not t.TempDir:
// its parent is 0700, and a server running as postgres (when the tests
// run as root) could not enter it.
func serverBase(pattern string) (string, error) {
	base, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", fmt.Errorf("testdb: %w", err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		_ = os.RemoveAll(base)
		return "", fmt.Errorf("testdb: %w", err)
	}
	return base, nil
}

// private is the process's template of private servers, made by the first
// PrivateServer under Main and removed when Main's run ends.
var private struct {
	mu      sync.Mutex
	managed bool   // Main is running the tests and removes the template after
	base    string // holds the template, in base/postgres; "" until made
	err     error  // why it could not be made; every later call fails with it
}

// privateTemplate is the data directory of a stopped cluster to copy, made
// (initdb, one start to check it serves, a clean stop) on first use; ""
// when the tests do not run under Main, which would not remove it.
func privateTemplate(ctx context.Context, logf func(string, ...any)) (string, error) {
	private.mu.Lock()
	defer private.mu.Unlock()
	switch {
	case !private.managed:
		return "", nil
	case private.base != "":
		return filepath.Join(private.base, "postgres"), nil
	case private.err != nil:
		return "", private.err
	}
	base, err := serverBase("paymentd-private-template-")
	if err == nil {
		dir := filepath.Join(base, "postgres")
		logf("testdb: making the template of this process's private servers in %s", dir)
		if _, err = pgcluster.Ensure(ctx, dir, "postgres", logf); err == nil {
			err = pgcluster.Stop(ctx, dir)
		}
		if err != nil {
			stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
			_ = pgcluster.Stop(stopCtx, dir)
			cancel()
			_ = os.RemoveAll(base)
			err = fmt.Errorf("testdb: the template of private servers: %w", err)
		}
	}
	if err != nil {
		private.err = err
		return "", err
	}
	private.base = base
	return filepath.Join(base, "postgres"), nil
}

// removePrivateTemplate ends Main's management of the template and removes
// it, if it was made.
func removePrivateTemplate() error {
	private.mu.Lock()
	defer private.mu.Unlock()
	private.managed = false
	if private.base == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := pgcluster.Stop(ctx, filepath.Join(private.base, "postgres"))
	if rerr := os.RemoveAll(private.base); err == nil && rerr != nil {
		err = fmt.Errorf("testdb: remove the template of private servers: %w", rerr)
	}
	private.base = ""
	return err
}
