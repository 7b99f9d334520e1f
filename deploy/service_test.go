package deploy_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// service is an in-process paymentd on 127.0.0.1 with its JSON log lines in
// a buffer.
type service struct {
	app     *app.App
	addr    string // host:port of its listener
	baseURL string
	logs    *testkit.Logs
}

// startService runs paymentd on a database of its own with the shipped epay
// plugin; mutate adjusts the configuration first.
func startService(t *testing.T, mutate func(*config.Config)) *service {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := config.Default()
	cfg.DB.URL = testdb.URL(t)
	cfg.JWT.Secret = "deploy-test-secret-deploy-test-secret"
	cfg.Bootstrap.AdminPassword = "bootstrap-password"
	cfg.Server.ShutdownTimeout = 5 * time.Second
	cfg.Server.PublicURL = "http://" + ln.Addr().String()
	cfg.Secrets = config.Secrets{Current: "k1", Keys: map[string]string{"k1": "dGVzdC1rZXktdGVzdC1rZXktdGVzdC1rZXktMzJieSE="}}
	cfg.Plugins.Dir = pluginDir(t)
	cfg.Log = config.Log{Level: "debug", Format: "json"}
	if mutate != nil {
		mutate(&cfg)
	}
	logs := &testkit.Logs{}
	a, err := app.New(context.Background(), cfg, logging.New(cfg.Log.Options(), logs))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		cancel()
		require.NoError(t, <-done)
		a.Close()
	})
	return &service{app: a, addr: ln.Addr().String(), baseURL: "http://" + ln.Addr().String(), logs: logs}
}

// pluginDir is a plugin directory with the shipped epay gateway plugin.
func pluginDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "gateway"), 0o755))
	src, err := os.ReadFile(filepath.Join("..", "plugins", "gateway", "epay.lua"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gateway", "epay.lua"), src, 0o644))
	return dir
}

// readRepoFile reads a file by its path in the repository.
func readRepoFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(path)))
	require.NoError(t, err)
	return string(b)
}
