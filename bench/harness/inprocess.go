package harness

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
)

// InProcess is a paymentd started inside the tool's own process, serving
// on a loopback port, for the tools that measure one path of the service
// (the export, the slow bodies) rather than a built binary.
type InProcess struct {
	App *app.App
	// Addr is host:port; BaseURL is http://Addr.
	Addr, BaseURL string
	stop          func()
}

// StartInProcess starts cfg's service (migrating its database) and serves
// it on 127.0.0.1 until Close.
//
// Without PAYMENTD_PLUGINS__DIR the plugins are the checkout's: a tool run
// from the repository (go run, task) has no configuration file, and the
// default directory would be the one next to the built tool.
func StartInProcess(ctx context.Context, cfg config.Config, log *slog.Logger) (*InProcess, error) {
	if os.Getenv("PAYMENTD_PLUGINS__DIR") == "" {
		if root, err := repoRoot(); err == nil {
			cfg.Plugins.Dir = filepath.Join(root, "plugins")
		}
	}
	a, err := app.New(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		a.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- a.Serve(sctx, ln) }()
	addr := ln.Addr().String()
	return &InProcess{App: a, Addr: addr, BaseURL: "http://" + addr, stop: func() {
		cancel()
		<-served
		a.Close()
	}}, nil
}

// Close stops serving and closes the service.
func (p *InProcess) Close() { p.stop() }

// DatabaseFlag defines a tool's --db: the PostgreSQL server StartFresh
// makes its database on, by default PAYMENTD_BENCH_DATABASE_URL, then
// PAYMENTD_TEST_DATABASE_URL, then the local server.
func DatabaseFlag(fs *flag.FlagSet) *string {
	return fs.String("db", FirstSet(os.Getenv("PAYMENTD_BENCH_DATABASE_URL"), os.Getenv("PAYMENTD_TEST_DATABASE_URL"), "postgres://postgres@127.0.0.1:5432/postgres"),
		"a PostgreSQL URL whose server gets a fresh database for the run")
}

// FreshOptions say where StartFresh makes the database and what the
// service logs to.
type FreshOptions struct {
	// Tool names the database (paymentd_<tool>_<random hex>, a "-" as
	// "_") and the secrets.
	Tool string
	// DB is the URL of the PostgreSQL server the database is made on.
	DB string
	// Keep keeps the database after Close.
	Keep bool
	// Log is the service's logger; nil discards.
	Log *slog.Logger
}

// Fresh is a paymentd started in this process on a database of its own.
type Fresh struct {
	*InProcess
	// Config is what the service runs with: the caller's, with the fresh
	// database's URL, a JWT secret and the bootstrap admin's password
	// (Config.Bootstrap.AdminPassword, for AdminCookie).
	Config config.Config
	drop   func()
}

// StartFresh makes a fresh database on the server of o.DB and starts
// paymentd on it in this process (StartInProcess), on 127.0.0.1: the one
// start of the tools that measure one path of the service. cfg is the
// tool's configuration (config.Default(), or config.Load's where the
// PAYMENTD_… variables may change it) with its own settings (the rate
// limit, timeouts); StartFresh fills in what every tool sets alike.
func StartFresh(ctx context.Context, cfg config.Config, o FreshOptions) (*Fresh, error) {
	dbURL, drop, err := FreshDatabase(ctx, o.DB, "paymentd_"+strings.ReplaceAll(o.Tool, "-", "_")+"_")
	if err != nil {
		return nil, err
	}
	if o.Keep {
		drop = func() {}
	}
	cfg.DB.URL = dbURL
	cfg.JWT.Secret = "paymentd-" + o.Tool + "-jwt-secret-for-this-run-only"
	cfg.Bootstrap.AdminPassword = o.Tool + "-admin-password"
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	svc, err := StartInProcess(ctx, cfg, log)
	if err != nil {
		drop()
		return nil, err
	}
	return &Fresh{InProcess: svc, Config: cfg, drop: drop}, nil
}

// Close stops the service and drops its database (unless kept).
func (f *Fresh) Close() {
	f.InProcess.Close()
	f.drop()
}

// AdminCookie logs in as the bootstrap admin "admin" and returns the
// session cookie ("name=value").
func AdminCookie(ctx context.Context, baseURL, password string) (string, error) {
	body := fmt.Sprintf(`{"username":"admin","password":%q}`, password)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/billing.identity.IdentityService/AdminLogin", bytes.NewBufferString(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	c := res.Header.Get("Set-Cookie")
	if res.StatusCode != http.StatusOK || c == "" {
		return "", fmt.Errorf("AdminLogin answered %d without a cookie", res.StatusCode)
	}
	return strings.SplitN(c, ";", 2)[0], nil
}

// SeedExportPayments inserts n balance payments of one customer (label
// names both) a second apart, ending now, every tenth failed with the
// reason reasonPrefix || g || reasonSuffix (g the row's number), and
// returns the created_at range [from, to) that holds them all.
func SeedExportPayments(ctx context.Context, pool *pgxpool.Pool, n int, label, reasonPrefix, reasonSuffix string) (from, to time.Time, err error) {
	var customer, order string
	err = pool.QueryRow(ctx, `INSERT INTO customers (email, password_hash, name, currency)
		VALUES ($1 || '@example.com', 'not-a-hash', $1, 'CNY') RETURNING id`, label).Scan(&customer)
	if err != nil {
		return from, to, err
	}
	err = pool.QueryRow(ctx, `INSERT INTO orders (customer_id, status, total_amount, currency, description, paid_at)
		VALUES ($1, 'paid', 12.30, 'CNY', $2, now()) RETURNING id`, customer, label).Scan(&order)
	if err != nil {
		return from, to, err
	}
	err = pool.QueryRow(ctx, `SELECT now() - make_interval(secs => $1::int + 1), now()`, n).Scan(&from, &to)
	if err != nil {
		return from, to, err
	}
	_, err = pool.Exec(ctx, `INSERT INTO payments (order_id, customer_id, method, amount, currency, status,
			paid_at, failed_at, failure_reason, created_at, updated_at)
		SELECT $1, $2, 'balance', (g % 100000 + 1) / 100.0, 'CNY',
			CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'success' END,
			CASE WHEN g % 10 = 0 THEN NULL ELSE t END,
			CASE WHEN g % 10 = 0 THEN t END,
			CASE WHEN g % 10 = 0 THEN $5::text || g || $6::text ELSE '' END,
			t, t
		FROM generate_series(1, $3::int) AS g, LATERAL (SELECT $4::timestamptz + make_interval(secs => g)) AS s(t)`,
		order, customer, n, from, reasonPrefix, reasonSuffix)
	if err != nil {
		return from, to, err
	}
	_, err = pool.Exec(ctx, `ANALYZE payments`)
	return from, to, err
}
