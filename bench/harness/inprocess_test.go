package harness

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/testdb"
)

// StartFresh, the one start of the tools that measure a path in process,
// serves a migrated service on a database of its own named after the tool,
// with the bootstrap admin's password it reports; Close drops the
// database.
func TestStartFreshServesOnADatabaseOfItsOwnThatCloseDrops(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	server, err := testdb.BaseURL(ctx)
	require.NoError(t, err)
	cfg := config.Default()
	cfg.RateLimit.Enabled = false
	cfg.Server.ShutdownTimeout = 2 * time.Second
	svc, err := StartFresh(ctx, cfg, FreshOptions{Tool: "harness-test", DB: server})
	require.NoError(t, err)
	closed := false
	defer func() {
		if !closed {
			svc.Close()
		}
	}()
	u, err := url.Parse(svc.Config.DB.URL)
	require.NoError(t, err)
	name := strings.TrimPrefix(u.Path, "/")
	require.True(t, strings.HasPrefix(name, "paymentd_harness_test_"), name)

	res, err := http.Get(svc.BaseURL + "/ready")
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode)
	_, err = AdminCookie(ctx, svc.BaseURL, svc.Config.Bootstrap.AdminPassword)
	require.NoError(t, err, "the bootstrap admin logs in with the password StartFresh set")

	svc.Close()
	closed = true
	conn, err := pgx.Connect(ctx, server)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists))
	require.False(t, exists, "Close drops the database")
}
