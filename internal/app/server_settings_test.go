package app_test

import (
	"context"
	"log/slog"
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
