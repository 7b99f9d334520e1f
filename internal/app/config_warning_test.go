package app_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/testkit"
)

// The start logs what config check warns of, before anything else can
// fail (here the database, which nothing listens for).
func TestStartLogsTheWarningOfAnHTTPSPublicURLWithInsecureCookies(t *testing.T) {
	t.Parallel()
	cfg := testConfig(unreachableDatabaseURL(t))
	cfg.DB.AcquireTimeoutSecs = 2
	cfg.Server.PublicURL = "https://pay.example.com"
	cfg.Session.CookieSecure = false
	logs := &testkit.Logs{}
	_, err := app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	require.ErrorContains(t, err, "[db].url")
	require.Contains(t, logs.String(), "level=WARN")
	require.Contains(t, logs.String(), "[server].public_url is https://pay.example.com but [session].cookie_secure = false")
}

// A public URL on this host whose port is not the listener's is warned of
// at start, and the start says where gateways will post callbacks.
func TestStartWarnsOfALoopbackPublicURLOnAnotherPortAndLogsTheCallbackBase(t *testing.T) {
	t.Parallel()
	cfg := testConfig(unreachableDatabaseURL(t))
	cfg.DB.AcquireTimeoutSecs = 2
	cfg.Server.Port = 6000
	cfg.Server.PublicURL = "http://127.0.0.1:50051"
	logs := &testkit.Logs{}
	_, err := app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	require.ErrorContains(t, err, "[db].url")
	require.Contains(t, logs.String(), "level=WARN")
	require.Contains(t, logs.String(), "[server].public_url http://127.0.0.1:50051 is this host on port 50051 but [server].port is 6000")
	require.Contains(t, logs.String(), "callback_base=http://127.0.0.1:50051/callbacks/<gateway_interface_id>")
}
