package app_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/stripemock"
	"github.com/rustbill/paymentd/internal/identity"
	"github.com/rustbill/paymentd/internal/migrate"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
	"github.com/rustbill/paymentd/internal/testredis"
)

// TestMain runs the tests with testdb's shared database and one stripe-mock
// for the Stripe tests (stripemock.Shared), both stopped at the end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(stripemock.Main(testdb.Main(m)), testredis.IgnoreRedial)
}

// unreachableDatabaseURL is a database URL whose port nothing listens on
// (testkit.FreePort): every connection is refused, within 2 s.
func unreachableDatabaseURL(t *testing.T) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/x?sslmode=disable&connect_timeout=2", testkit.FreePort(t))
}

func testConfig(dbURL string) config.Config {
	c := config.Default()
	c.DB.URL = dbURL
	c.JWT.Secret = "test-secret-test-secret-test-secret!"
	c.Bootstrap.AdminPassword = "bootstrap-password"
	c.Server.ShutdownTimeout = 5 * time.Second
	// Every test client comes from 127.0.0.1; TestLoginIsRateLimitedPerIP
	// turns the limit back on.
	c.RateLimit.Enabled = false
	c.Secrets = config.Secrets{Current: testKeyID, Keys: map[string]string{testKeyID: testKey}}
	return c
}

// The key that encrypts gateway interface secrets in the tests' services.
const (
	testKeyID = "test1"
	testKey   = "dGVzdC1rZXktdGVzdC1rZXktdGVzdC1rZXktMzJieSE=" // "test-key-test-key-test-key-32by!"
)

// logger writes the app's lines to the test's output; a benchmark's are
// discarded (its output is printed whatever -v says).
func logger(t testing.TB) *slog.Logger {
	if _, bench := t.(*testing.B); bench {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

type running struct {
	app     *app.App
	baseURL string
}

func start(t *testing.T, cfg config.Config, opts ...app.Option) *running {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return serve(t, cfg, ln, logger(t), opts...)
}

// serve builds the app with log and serves it on ln until the test ends.
func serve(t testing.TB, cfg config.Config, ln net.Listener, log *slog.Logger, opts ...app.Option) *running {
	t.Helper()
	a, err := app.New(context.Background(), cfg, log, opts...)
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
	return &running{app: a, baseURL: "http://" + ln.Addr().String()}
}

func status(t *testing.T, u string) int {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestStartMigratesBootstrapsAndServes(t *testing.T) {
	t.Parallel()
	r := start(t, testConfig(testdb.EmptyURL(t)))
	ctx := context.Background()

	var migrations int
	require.NoError(t, r.app.Pool().QueryRow(ctx, `SELECT count(*) FROM goose_db_version WHERE version_id > 0`).Scan(&migrations))
	require.EqualValues(t, migrate.KnownVersion(), migrations, "every migration of this build, numbered 1 to the last")

	var username, hash string
	require.NoError(t, r.app.Pool().QueryRow(ctx, `SELECT username, password_hash FROM admin_users`).Scan(&username, &hash))
	require.Equal(t, "admin", username)
	require.NoError(t, identity.VerifyPassword(hash, "bootstrap-password"), "stored hashed, verifiable")
	require.NotContains(t, hash, "bootstrap-password")

	require.Equal(t, http.StatusOK, status(t, r.baseURL+"/health"))
	require.Equal(t, http.StatusOK, status(t, r.baseURL+"/ready"))

	client := paymentpbconnect.NewPaymentServiceClient(http.DefaultClient, r.baseURL)
	_, err := client.GetPayment(ctx, connect.NewRequest(&paymentpb.GetPaymentRequest{Id: "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"}))
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "%v", err)
}

func TestRefusesToStartWithoutBootstrapPasswordOnADatabaseWithoutAdmins(t *testing.T) {
	t.Parallel()
	cfg := testConfig(testdb.EmptyURL(t))
	cfg.Bootstrap.AdminPassword = ""
	_, err := app.New(context.Background(), cfg, logger(t))
	require.ErrorIs(t, err, identity.ErrBootstrapPasswordRequired)
	require.ErrorIs(t, err, config.ErrInvalid, "a bad configuration: the commands exit 2")
	require.ErrorContains(t, err, "[bootstrap].admin_password")

	// Refused before migrating: the empty database is left empty.
	conn, err := pgx.Connect(context.Background(), cfg.DB.URL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var tables int
	require.NoError(t, conn.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables))
	require.Zero(t, tables, "nothing migrated")
}

func TestAMissingDatabaseOrRoleIsRefusedSayingWhatToRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base, err := testdb.BaseURL(ctx)
	require.NoError(t, err)
	u, err := url.Parse(base)
	require.NoError(t, err)
	host, port := u.Hostname(), u.Port()

	u.Path = "/paymentd_no_such_database"
	cfg := testConfig(u.String())
	_, err = app.New(ctx, cfg, logger(t))
	require.EqualError(t, err, `[db].url names database "paymentd_no_such_database", which does not exist on `+host+`:`+port+
		`: create it as a PostgreSQL superuser: createdb -h `+host+` -p `+port+` -U postgres -O `+u.User.Username()+` paymentd_no_such_database`+
		` (and the role first if it is missing too: psql -h `+host+` -p `+port+` -U postgres -c "CREATE ROLE `+u.User.Username()+` LOGIN PASSWORD '…'")`)

	u.User = url.User("paymentd_no_such_role")
	_, err = app.New(ctx, testConfig(u.String()), logger(t))
	if err != nil && strings.Contains(err.Error(), "password authentication failed") {
		t.Fatalf("the test server asks unknown roles for a password, hiding that the role is missing: %v", err)
	}
	require.ErrorContains(t, err, `[db].url names role "paymentd_no_such_role", which does not exist on `+host+`:`+port+
		`: create it and its database as a PostgreSQL superuser: psql -h `+host+` -p `+port+` -U postgres -c "CREATE ROLE paymentd_no_such_role LOGIN PASSWORD '…'", then createdb`)
	require.NotContains(t, err.Error(), "\n")
}

func TestBootstrapPasswordIsNotNeededOnceAnAdminExists(t *testing.T) {
	t.Parallel()
	url := testdb.EmptyURL(t)
	first, err := app.New(context.Background(), testConfig(url), logger(t))
	require.NoError(t, err)
	first.Close()

	cfg := testConfig(url)
	cfg.Bootstrap.AdminPassword = ""
	second, err := app.New(context.Background(), cfg, logger(t))
	require.NoError(t, err)
	second.Close()

	// A changed bootstrap password never overwrites the existing admin.
	cfg.Bootstrap.AdminPassword = "another-password"
	third, err := app.New(context.Background(), cfg, logger(t))
	require.NoError(t, err)
	defer third.Close()
	var hash string
	require.NoError(t, third.Pool().QueryRow(context.Background(), `SELECT password_hash FROM admin_users`).Scan(&hash))
	require.NoError(t, identity.VerifyPassword(hash, "bootstrap-password"))
}

func TestConcurrentFirstStartsCreateOneAdmin(t *testing.T) {
	t.Parallel()
	url := testdb.EmptyURL(t)
	var wg sync.WaitGroup
	apps := make([]*app.App, 3)
	errs := make([]error, 3)
	for i := range apps {
		wg.Go(func() { apps[i], errs[i] = app.New(context.Background(), testConfig(url), logger(t)) })
	}
	wg.Wait()
	for i := range apps {
		require.NoError(t, errs[i])
		defer apps[i].Close()
	}
	var admins int
	require.NoError(t, apps[0].Pool().QueryRow(context.Background(), `SELECT count(*) FROM admin_users`).Scan(&admins))
	require.Equal(t, 1, admins)
}

func TestReadyAnswers503OnceTheDatabaseIsDroppedWhileHealthStays200(t *testing.T) {
	t.Parallel()
	dbURL := testdb.EmptyURL(t)
	r := start(t, testConfig(dbURL))
	require.Equal(t, http.StatusOK, status(t, r.baseURL+"/ready"))

	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	name := strings.TrimPrefix(u.Path, "/")
	ctx := context.Background()
	base, err := testdb.BaseURL(ctx)
	require.NoError(t, err)
	admin, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	require.NoError(t, err)

	deadline := time.Now().Add(5 * time.Second)
	for status(t, r.baseURL+"/ready") != http.StatusServiceUnavailable {
		require.True(t, time.Now().Before(deadline), "/ready still 200 five seconds after the database was dropped")
		time.Sleep(100 * time.Millisecond)
	}
	require.Equal(t, http.StatusOK, status(t, r.baseURL+"/health"))
}

func TestUnreachableDatabaseFailsStartNamingTheKey(t *testing.T) {
	t.Parallel()
	cfg := testConfig(unreachableDatabaseURL(t))
	cfg.DB.AcquireTimeoutSecs = 2
	_, err := app.New(context.Background(), cfg, logger(t))
	require.ErrorContains(t, err, "[db].url")

	cfg.DB.URL = ""
	_, err = app.New(context.Background(), cfg, logger(t))
	require.ErrorIs(t, err, app.ErrNoDatabaseURL)
}
