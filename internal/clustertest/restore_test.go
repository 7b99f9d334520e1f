package clustertest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/clustertest"
	"github.com/rustbill/paymentd/internal/pgcluster"
)

// A `pg_dump -Fc` taken while two instances serve a load (orders paid by
// gateway and balance, duplicate and hostile callbacks, refunds) and
// restored with pg_restore into a new database is one consistent moment:
// `paymentd verify` finds its money adding up, and a paymentd started on it
// passes the schema check and serves, as docs/operations.md, "Backups",
// tells an operator to check.
func TestADumpOfABusyDatabaseRestoresVerifiesAndServes(t *testing.T) {
	t.Parallel()
	dbURL, _ := privatePostgres(t)
	b := setup(t, 2, dbURL)
	ctx := context.Background()
	bin, err := pgcluster.FindBinaries()
	require.NoError(t, err)

	loadCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.w.Run(loadCtx, clustertest.LoadOptions{Workers: 4, Duplicates: 0.2, Hostile: 0.1, Refunds: 0.2, Balance: 0.2})
	}()
	t.Cleanup(func() { stop(); <-done })
	require.Eventually(t, func() bool {
		var n int
		return b.c.Pool.QueryRow(ctx, "SELECT count(*) FROM payments WHERE status IN ('success', 'refunded')").Scan(&n) == nil && n >= 20
	}, time.Minute, 50*time.Millisecond, "the load pays orders")

	// The dump, in the middle of the load.
	dump := filepath.Join(t.TempDir(), "paymentd.dump")
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "pg_dump"), "-Fc", "-f", dump, "-d", dbURL).CombinedOutput()
	require.NoError(t, err, "pg_dump: %s", out)
	stop()
	<-done

	restoredURL := strings.Replace(dbURL, "/paymentd?", "/restored?", 1)
	_, err = b.c.Pool.Exec(ctx, "CREATE DATABASE restored")
	require.NoError(t, err)
	out, err = exec.CommandContext(ctx, filepath.Join(bin, "pg_restore"), "--exit-on-error", "-d", restoredURL, dump).CombinedOutput()
	require.NoError(t, err, "pg_restore: %s", out)

	conn, err := pgx.Connect(ctx, restoredURL)
	require.NoError(t, err)
	var payments, settled int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*), count(*) FILTER (WHERE status IN ('success', 'refunded')) FROM payments").Scan(&payments, &settled))
	require.NoError(t, conn.Close(ctx))
	require.GreaterOrEqual(t, settled, 20, "the dump holds the load's payments")

	// paymentd verify on the restore, needing nothing but [db].url.
	paymentd, err := clustertest.Build(ctx)
	require.NoError(t, err)
	verify := exec.CommandContext(ctx, paymentd, "verify")
	verify.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "PAYMENTD_DB__URL=" + restoredURL}
	out, err = verify.CombinedOutput()
	require.NoError(t, err, "paymentd verify on the restore: %s", out)
	t.Logf("restored %d payments (%d settled); verify: %s", payments, settled, strings.TrimSpace(string(out)))

	// A service started on it serves.
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	restored, err := clustertest.Start(startCtx, clustertest.Options{
		Binary: paymentd, Nodes: 1, DatabaseURL: restoredURL, Dir: t.TempDir(), Logf: t.Logf,
	})
	require.NoError(t, err, "a paymentd on the restored database")
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(restored.Tails(40))
		}
		require.NoError(t, restored.Close())
	})
	require.NoError(t, restored.Nodes[0].WaitReady(ctx))
}
