package app_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// A database server with autovacuum off gets one warning line at start,
// naming the setting; with it on, none. A private server, since the
// setting is the whole server's.
func TestStartWarnsWhenTheDatabaseServerRunsWithoutAutovacuum(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL, _ := testdb.PrivateServer(t, "paymentd")

	set := func(value string) {
		t.Helper()
		conn, err := pgx.Connect(ctx, dbURL)
		require.NoError(t, err)
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "ALTER SYSTEM SET autovacuum = "+value)
		require.NoError(t, err)
		_, err = conn.Exec(ctx, "SELECT pg_reload_conf()")
		require.NoError(t, err)
		// The postmaster reloads on its own time; a new session sees it.
		require.Eventually(t, func() bool {
			c, err := pgx.Connect(ctx, dbURL)
			if err != nil {
				return false
			}
			defer c.Close(ctx)
			var got string
			return c.QueryRow(ctx, "SHOW autovacuum").Scan(&got) == nil && got == value
		}, 10*time.Second, 20*time.Millisecond)
	}
	start := func() string {
		t.Helper()
		logs := &testkit.Logs{}
		a, err := app.New(ctx, testConfig(dbURL), slog.New(slog.NewTextHandler(logs, nil)))
		require.NoError(t, err)
		a.Close()
		return logs.String()
	}

	set("off")
	require.Contains(t, start(), `level=WARN msg="autovacuum is off on the database server: plans made while a table was small are not refreshed`)
	set("on")
	require.NotContains(t, start(), "autovacuum")
}

// A promoted standby that kept the old primary's synchronous_standby_names
// makes every commit wait for a standby that is not there. The metric shows
// it (over a connection of its own, so the hung pool does not blind it),
// and the commits complete once the setting is cleared. A private server,
// since the setting is the whole server's.
func TestCommitsWaitingForAMissingSyncStandbyAreCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL, _ := testdb.PrivateServer(t, "paymentd")
	// A read of the waiting commits gets 10 s and an answer is reused for
	// 100 ms: with the defaults (2 s, 10 s) a loaded machine's slow reads
	// failed for a whole minute, and each failure stood for 10 s.
	a, err := app.New(ctx, testConfig(dbURL), logger(t), app.WithDatabaseMetricsScrape(10*time.Second, 100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(a.Close)
	// No require in these: they run inside Eventually's goroutine.
	gauge := func(name string) (float64, bool) {
		families, err := a.Metrics().Registry().Gather()
		if err != nil {
			return 0, false
		}
		for _, f := range families {
			if f.GetName() == name && len(f.GetMetric()) == 1 {
				return f.GetMetric()[0].GetGauge().GetValue(), true
			}
		}
		return 0, false
	}
	// waiting is the count of waiting commits, -1 while it cannot be read
	// (a read that failed on this loaded machine is tried again 10 s on).
	waiting := func() float64 {
		if up, _ := gauge("paymentd_db_sync_replication_stats_up"); up != 1 {
			return -1
		}
		n, ok := gauge("paymentd_db_sync_replication_waiting")
		if !ok {
			return -1
		}
		return n
	}
	require.Eventually(t, func() bool { return waiting() == 0 }, 60*time.Second, 10*time.Millisecond,
		"no synchronous standby is configured: none waits")

	admin, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer admin.Close(ctx)
	setting := func(sql string) {
		t.Helper()
		_, err := admin.Exec(ctx, sql)
		require.NoError(t, err)
		_, err = admin.Exec(ctx, "SELECT pg_reload_conf()")
		require.NoError(t, err)
	}
	_, err = admin.Exec(ctx, "CREATE TABLE sync_probe (x int)")
	require.NoError(t, err)
	setting("ALTER SYSTEM SET synchronous_standby_names = 'gone'")
	// Whatever fails below, the setting is cleared before a.Close (cleanups
	// run last first): the pool's close waits for its connections, and a
	// commit waiting for the standby would hold one for ever, hanging the
	// package until its timeout.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Logf("clearing synchronous_standby_names: %v", err)
			return
		}
		defer c.Close(ctx)
		_, _ = c.Exec(ctx, "ALTER SYSTEM RESET synchronous_standby_names")
		_, _ = c.Exec(ctx, "SELECT pg_reload_conf()")
	})
	// The postmaster reloads on its own time; a new session sees it.
	require.Eventually(t, func() bool {
		var got string
		return admin.QueryRow(ctx, "SHOW synchronous_standby_names").Scan(&got) == nil && got == "gone"
	}, 10*time.Second, 20*time.Millisecond)
	// Each of the pool's connections that writes now hangs in its commit,
	// once the server applies the setting to commits: a session sees it at
	// once, but a commit waits for a standby only after the checkpointer
	// has read it too (PostgreSQL's sync_standbys_defined), which a
	// checkpoint behind schedule on a busy machine puts off. A commit
	// before that returns at once, so each writer commits again until its
	// commit hangs. (Three one-shot commits all returned in a loaded run,
	// and nothing waited for the whole minute.)
	var released atomic.Bool
	committed := make(chan error, 3)
	for range 3 {
		go func() {
			for {
				_, err := a.Pool().Exec(ctx, `INSERT INTO sync_probe VALUES (1)`)
				if err != nil || released.Load() {
					committed <- err
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	// At least three: the service's own writes meanwhile (its heartbeat,
	// its leases, the event worker's claims) wait as well, more of them the
	// slower the machine.
	require.Eventually(t, func() bool { return waiting() >= 3 }, 60*time.Second, 10*time.Millisecond,
		"the three commits wait for the standby")
	oldest, _ := gauge("paymentd_db_sync_replication_oldest_wait_seconds")
	require.Positive(t, oldest)
	select {
	case err := <-committed:
		t.Fatalf("a commit failed while it waited for the standby: %v", err)
	default:
	}

	released.Store(true)
	setting("ALTER SYSTEM RESET synchronous_standby_names")
	for range 3 {
		select {
		case err := <-committed:
			require.NoError(t, err, "the waiting commit completes once the setting is cleared")
		case <-time.After(30 * time.Second):
			t.Fatal("a commit still waits after the setting was cleared")
		}
	}
}
