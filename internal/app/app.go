package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	adminui "github.com/rustbill/paymentd/admin-ui"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/cache"
	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/concurrency"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/export"
	"github.com/rustbill/paymentd/internal/gateway"
	"github.com/rustbill/paymentd/internal/idempotency"
	"github.com/rustbill/paymentd/internal/identity"
	"github.com/rustbill/paymentd/internal/identity/identityrpc"
	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/metrics"
	"github.com/rustbill/paymentd/internal/migrate"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/order/orderrpc"
	"github.com/rustbill/paymentd/internal/order/renewal"
	"github.com/rustbill/paymentd/internal/outbound"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/payment/paymentrpc"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/ratelimit"
	"github.com/rustbill/paymentd/internal/secretpass"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/server"
	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testsignal"
)

// App is a started paymentd: pool open, schema migrated and checked, admin
// bootstrapped.
type App struct {
	cfg  config.Config
	log  *slog.Logger
	opts options
	pool *pgxpool.Pool
	// db is pool for the request path: acquiring a connection waits at
	// most [db].acquire_timeout_secs (store.BoundedPool), then the request
	// answers Unavailable "database busy, retry" instead of waiting on.
	db    store.DB
	cache *cache.Cache
	ids   *identity.Service
	// counters are the rate counters (rateCounters).
	counters *ratelimit.Fallback
	// bg is the cluster side and the leader roles' services (events.go),
	// running while Serve runs.
	bg     *background
	server *server.Server
	// outbound is the process's one HTTP client; registry the plugin
	// scanner and the loaded plugins (plugins.go).
	outbound *outbound.Client
	registry *gateway.Registry
	// tel is metrics, tracing and the request observer (telemetry.go).
	tel telemetry
	// node is this process's cluster node id: the holder of its leases
	// (migration, billing, event_worker) and its heartbeat row.
	node string
	// secrets seals and opens plugin config secrets; nil without
	// [secrets] keys.
	secrets *secrets.Keyring
	// sealing is the orders' sealing pass begun at start (sealSecrets),
	// stopped by Close.
	sealing startstop.Loop
	// replica is [db].replica_url's pool and lag watcher; nil without one.
	replica *readReplica
}

// Option adjusts how New builds the App.
type Option func(*options)

type options struct {
	clock        func() time.Time
	sessionCache identity.SessionCache
	// spanExporter replaces the OTLP exporter when tracing is on (tests).
	spanExporter sdktrace.SpanExporter
	wrapPayments func(paymentpbconnect.PaymentServiceHandler) paymentpbconnect.PaymentServiceHandler
	// smtpTLS replaces the e-mail channel's TLS settings (tests).
	smtpTLS *tls.Config
	// pollOnlyWorker: the event worker is not woken by NOTIFY (benchmarks).
	pollOnlyWorker bool
	// signals: the background loops' test signals (tests).
	signals Signals
	// dbScrape: the database metrics' read bound and reuse (zero: the
	// metrics package's defaults, 2 s and 10 s).
	dbScrape metrics.QueueOptions
	// hashSlots, hashQueue, hashWait: identity.Options.HashSlots,
	// HashQueue and HashWait (tests; zero: the defaults).
	hashSlots, hashQueue int
	hashWait             time.Duration
	// rateClock: the rate counters' clock (tests); nil: time.Now, and
	// Redis's own clock while Redis counts.
	rateClock func() time.Time
	// pluginLimits: the plugin runtime's limits per call (tests); zero
	// fields take plugin.DefaultLimits.
	pluginLimits plugin.Limits
}

// WithClock makes every timeout (sessions, access tokens, API key use) run
// on clock instead of time.Now; tests use it to move time.
func WithClock(clock func() time.Time) Option {
	return func(o *options) { o.clock = clock }
}

// WithSpanExporter sends the spans to exp instead of [tracing]'s OTLP
// collector; [tracing].enabled still decides whether there are any. Tests
// use it to look at the spans.
func WithSpanExporter(exp sdktrace.SpanExporter) Option {
	return func(o *options) { o.spanExporter = exp }
}

// WithSMTPTLSConfig makes the e-mail channel use c for STARTTLS and
// implicit TLS instead of the system's roots. Tests use it to trust their
// in-process SMTP server's private certificate; the service never sets it.
func WithSMTPTLSConfig(c *tls.Config) Option {
	return func(o *options) { o.smtpTLS = c }
}

// WithPollOnlyEventWorker makes the event worker ignore NOTIFY
// paymentd_events and find new events by polling alone, every
// [events].poll_interval — what an instance behind a pooler that breaks
// LISTEN would do. Benchmarks compare the two paths with it; the service
// never sets it.
func WithPollOnlyEventWorker() Option {
	return func(o *options) { o.pollOnlyWorker = true }
}

// WithSessionCache puts a shared read-through cache (Redis) in front of the
// sessions table; the database stays the system of record.
func WithSessionCache(c identity.SessionCache) Option {
	return func(o *options) { o.sessionCache = c }
}

// WithPaymentHandler wraps the PaymentService handler before it is mounted
// behind the server's middleware and interceptors. The benchmark harness uses
// it to serve an empty GetPayment on the exact server stack, the ceiling of
// what the transport costs; the service itself never sets it.
func WithPaymentHandler(wrap func(paymentpbconnect.PaymentServiceHandler) paymentpbconnect.PaymentServiceHandler) Option {
	return func(o *options) { o.wrapPayments = wrap }
}

// Signals are test signals (internal/testsignal) for the background loops
// New builds: a test waits on them for rounds that ran instead of sleeping.
// Nil fields are off; the service never sets any.
type Signals struct {
	// Reconciler and Renewals count the rounds of the reconciler and of the
	// billing run: each look at whether this instance leads `billing`, and
	// the work it then does, if any.
	Reconciler, Renewals *testsignal.Signal
	// Events counts the event worker's claim rounds
	// (event.WorkerOptions.Rounds): a handler's end starts one, and the
	// worker polls at [events].poll_interval besides. TimeoutScans counts
	// the payment timeout scans, run while this instance leads
	// `event_worker`.
	Events, TimeoutScans *testsignal.Signal
	// BeforeHash runs in every argon2id run on a caller's password while
	// it holds its hashing slot: a test blocks in it to keep the slots
	// full.
	BeforeHash func()
}

// WithPasswordHashing sets how many argon2id runs go at once, how many
// password calls may wait for one and for how long (tests hold the slots
// to fill the queue; the service uses identity's defaults).
func WithPasswordHashing(slots, queue int, wait time.Duration) Option {
	return func(o *options) { o.hashSlots, o.hashQueue, o.hashWait = slots, queue, wait }
}

// WithPluginLimits bounds each plugin call by l instead of
// plugin.DefaultLimits (zero fields keep the default): a test of a runaway
// plugin gives it a call timeout of a second rather than waiting out the
// service's 10 s. The service never sets it.
func WithPluginLimits(l plugin.Limits) Option {
	return func(o *options) { o.pluginLimits = l }
}

// WithRateLimitClock makes the rate counters (the per-address limit and
// the password budgets) run on clock, so a test can hold time still
// while it spends a budget.
func WithRateLimitClock(clock func() time.Time) Option {
	return func(o *options) { o.rateClock = clock }
}

// WithSignals hands the background loops the test signals in s.
func WithSignals(s Signals) Option {
	return func(o *options) { o.signals = s }
}

// WithDatabaseMetricsScrape bounds each read of the database's metrics (the
// queues, the commits waiting for a synchronous standby) by timeout and
// reuses an answer for maxAge (default 2 s and 10 s): a test on a loaded
// machine gives a read more time and takes a fresh one sooner.
func WithDatabaseMetricsScrape(timeout, maxAge time.Duration) Option {
	return func(o *options) { o.dbScrape.Timeout, o.dbScrape.MaxAge = timeout, maxAge }
}

// rateCounters is the one set of rate counters the per-address limit and
// the password budgets share: Redis while it answers, else this
// instance's memory.
func (a *App) rateCounters() *ratelimit.Fallback {
	if a.counters == nil {
		var opts []ratelimit.Option
		if a.opts.rateClock != nil {
			opts = append(opts, ratelimit.WithClock(a.opts.rateClock))
		}
		a.counters = ratelimit.NewFallback(a.cache, opts...)
	}
	return a.counters
}

// ErrNoDatabaseURL is returned when [db].url is empty.
var ErrNoDatabaseURL = errors.New("[db].url is required (the run command starts a local database when it is empty)")

// OpenPool opens the PostgreSQL pool with the [db] settings and checks that it
// answers.
func OpenPool(ctx context.Context, c config.DB) (*pgxpool.Pool, error) {
	if c.URL == "" {
		return nil, ErrNoDatabaseURL
	}
	pc, err := poolConfig("[db].url", c.URL, c)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open database pool: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, time.Duration(c.AcquireTimeoutSecs)*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		if hint := setUpHint(err, pc.ConnConfig); hint != "" {
			return nil, errors.New(hint)
		}
		return nil, fmt.Errorf("connect to database ([db].url): %w", err)
	}
	return pool, nil
}

// poolConfig is the pool of rawURL ([db] key) with the [db] settings.
func poolConfig(key, rawURL string, c config.DB) (*pgxpool.Config, error) {
	pc, err := pgxpool.ParseConfig(rawURL)
	if err != nil {
		// The parser's message may quote the URL, password included.
		return nil, errors.New(key + ": cannot parse the connection URL")
	}
	pc.MaxConns = int32(c.MaxConnections)
	pc.MinConns = int32(c.MinConnections)
	pc.MaxConnIdleTime = time.Duration(c.IdleTimeoutSecs) * time.Second
	pc.MaxConnLifetime = time.Duration(c.MaxLifetimeSecs) * time.Second
	pc.MaxConnLifetimeJitter = pc.MaxConnLifetime / 10
	pc.ConnConfig.ConnectTimeout = time.Duration(c.AcquireTimeoutSecs) * time.Second
	pc.AfterConnect = store.RegisterTypes
	if c.TestBeforeAcquire {
		// A connection idle for over a second is pinged before use; one in
		// continuous use has just proven itself, and pinging it would add a
		// round trip to every query.
		pc.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool { return p.IdleDuration > time.Second }
	} else {
		pc.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	}
	return pc, nil
}

// setUpHint is the one line that says what to run when [db].url names a
// database or a role that does not exist (a first installation); "" for
// any other failure. docs/operations.md's set-up steps run the same.
func setUpHint(err error, cc *pgx.ConnConfig) string {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return ""
	}
	where := fmt.Sprintf("-h %s -p %d", cc.Host, cc.Port)
	role := fmt.Sprintf(`psql %s -U postgres -c "CREATE ROLE %s LOGIN PASSWORD '…'"`, where, cc.User)
	db := fmt.Sprintf("createdb %s -U postgres -O %s %s", where, cc.User, cc.Database)
	switch {
	case pgErr.Code == "3D000": // invalid_catalog_name
		return fmt.Sprintf("[db].url names database %q, which does not exist on %s:%d: create it as a PostgreSQL superuser: %s (and the role first if it is missing too: %s)",
			cc.Database, cc.Host, cc.Port, db, role)
	case pgErr.Code == "28000" && strings.Contains(pgErr.Message, "does not exist"): // role "x" does not exist
		return fmt.Sprintf("[db].url names role %q, which does not exist on %s:%d: create it and its database as a PostgreSQL superuser: %s, then %s",
			cc.User, cc.Host, cc.Port, role, db)
	}
	return ""
}

// New opens the pool, applies migrations (waiting for another instance's run
// up to [cluster].migration_wait), checks that the schema is the one this
// build expects, creates the bootstrap admin when the database has none,
// and builds the server.
func New(ctx context.Context, cfg config.Config, log *slog.Logger, opts ...Option) (*App, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.clock == nil {
		o.clock = time.Now
	}
	for _, w := range cfg.Warnings() {
		log.Warn("configuration: " + w)
	}
	// Where gateways are told to post: the one figure to compare with the
	// gateway's merchant settings and the proxy in front.
	log.Info("gateway callbacks go to [server].public_url", "callback_base",
		strings.TrimRight(cfg.Server.PublicURL, "/")+payment.CallbackPath+"<gateway_interface_id>", "listen", cfg.Server.Addr())
	pool, err := OpenPool(ctx, cfg.DB)
	if err != nil {
		return nil, err
	}
	// Request-scoped lines carry the request id, procedure, principal and
	// trace id whatever logger the caller built.
	log = logging.Contextual(log)
	a := &App{cfg: cfg, log: log, opts: o, pool: pool, node: cluster.NewNodeID(),
		db: store.NewBoundedPool(pool, time.Duration(cfg.DB.AcquireTimeoutSecs)*time.Second)}
	if err := a.openReplica(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	if err := a.init(ctx); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// checkSchema compares the database's schema with this build's once the
// migrations ran: a difference that refuses the start is returned (one
// line, migrate.ErrSchemaDrift: the command exits 2), and what is left
// alone — an operator's index, a newer release's table — is one warning.
func (a *App) checkSchema(ctx context.Context) error {
	start := time.Now()
	r, err := migrate.CheckSchema(ctx, a.pool)
	if err != nil {
		return err
	}
	if err := r.Err(); err != nil {
		return err
	}
	if left := r.LeftAlone(); len(left) > 0 {
		a.log.Warn("schema check: the database holds what this build does not know (or a newer release changed); left alone",
			"count", len(left), "objects", r.LeftAloneSummary(), "recorded_migration", r.Recorded, "known_migration", r.Known)
	}
	a.log.Info("schema checked", "objects", r.Objects, "took", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// migrate brings the schema to this build's: the bootstrap check first,
// then the migrations under the migration role, then the schema check.
func (a *App) migrate(ctx context.Context) error {
	// Before migrating: a start that must stop for want of a bootstrap
	// password leaves an empty database empty, and exits as a bad
	// configuration does (2), which systemd does not restart.
	if err := identity.CheckBootstrap(ctx, a.pool, a.cfg.Bootstrap.Options()); err != nil {
		if errors.Is(err, identity.ErrBootstrapPasswordRequired) {
			return config.Invalid(err)
		}
		return err
	}
	start := time.Now()
	db := stdlib.OpenDBFromPool(a.pool)
	applied := 0
	err := migrate.UpWith(ctx, db, migrate.Options{
		Logger: a.log, Wait: a.cfg.Cluster.MigrationWait,
		Holder: a.node, LeaseTTL: a.cfg.Cluster.LeaseTTL, LeaseRenew: a.cfg.Cluster.LeaseRenew,
		Applied: &applied,
	})
	_ = db.Close()
	if err != nil {
		return err
	}
	// Say what happened: a start that applied nothing did not migrate.
	took := time.Since(start).Round(time.Millisecond).String()
	if applied > 0 {
		a.log.Info("schema migrated", "applied", applied, "took", took)
	} else {
		a.log.Info("no migration pending", "took", took)
	}
	return a.checkSchema(ctx)
}

// init migrates, then wires the parts: the domain services, the
// background (events.go) and the server with its handlers and layers. The
// parts' own logic lives in their packages.
func (a *App) init(ctx context.Context) error {
	if err := a.migrate(ctx); err != nil {
		return err
	}
	a.warnServerSettings(ctx)

	if err := identity.EnsureBootstrapAdmin(ctx, a.pool, a.cfg.Bootstrap.Options(), a.log); err != nil {
		return err
	}
	if err := a.sealSecrets(ctx); err != nil {
		return err
	}

	var err error
	if a.cache, err = cache.New(a.cfg.Redis.Options(), a.log); err != nil {
		return err
	}
	if a.opts.sessionCache == nil {
		a.opts.sessionCache = identity.NewRedisSessionCache(a.cache, a.opts.clock)
	}

	// Before the identity domain, which counts second-factor refusals.
	if err := a.startTelemetry(ctx); err != nil {
		return err
	}
	ids, err := identity.NewService(identity.Options{
		DB:         a.db,
		JWT:        a.cfg.JWT.Options(),
		Session:    a.cfg.Session.Options(),
		Currencies: a.cfg.Billing.Currencies,
		Clock:      a.opts.clock,
		Cache:      a.opts.sessionCache,
		// Customers' token generations and disabled flags, shared so that
		// ending a customer's tokens on one instance is seen on the
		// others within a second.
		AccessCache:            identity.NewRedisAccessCache(a.cache),
		Log:                    a.log,
		AdminAPIKeyMaxLifetime: time.Duration(a.cfg.Admin.APIKeyMaxLifetimeDays) * 24 * time.Hour,
		Require2FA:             a.cfg.Admin.Require2FA,
		Secrets:                a.secrets,
		SecondFactorMetrics:    a.tel.metrics,
		// Password attempts across every address and per account, counted
		// where the per-address limit counts (Redis, else memory).
		Passwords: ratelimit.NewPasswordBudget(a.rateCounters(), a.cfg.RateLimit.Limits(), a.log),
		// A password call waiting for argon2id gives back its slot of
		// [server].max_concurrency (issue 35).
		ReleaseSlot: concurrency.Release,
		BeforeHash:  a.opts.signals.BeforeHash,
		HashSlots:   a.opts.hashSlots,
		HashQueue:   a.opts.hashQueue,
		HashWait:    a.opts.hashWait,
	})
	if err != nil {
		return err
	}
	a.ids = ids

	if err := a.startPlugins(ctx); err != nil {
		return err
	}

	policy, err := Policy()
	if err != nil {
		return err
	}
	interceptors, err := a.interceptors()
	if err != nil {
		return err
	}
	keys := idempotency.New(a.db, idempotency.Options{Procedures: IdempotentProcedures, Clock: a.opts.clock, Logger: a.log})
	srv := a.cfg.Server.Options()
	// A handler's panic is answered Internal, logged and counted
	// (paymentd_panics_total), in the Connect handlers and the plain routes.
	srv.Panicked = a.tel.metrics.Panic
	opts, err := server.HandlerOptionsAround(srv, a.log,
		append(interceptors, auth.NewInterceptor(policy, AdminKeyScopes, identityrpc.EnrolmentProcedures...)), []connect.Interceptor{keys})
	if err != nil {
		return err
	}
	// The billing test clock ([billing].test_clock; nil when off) comes
	// before the services that date periods by it: the settlement of a
	// renewal invoice's payment, the order domain, the activation of an
	// order (the fulfilment) and the billing run (docs/decisions.md, "The
	// test clock is the one clock of billing").
	var testClock *billingTestClock
	if a.cfg.Billing.TestClock {
		testClock = &billingTestClock{base: a.opts.clock}
	}
	paySvc := payment.NewService(a.db, a.log,
		payment.WithGateways(a.Gateways()),
		payment.WithPublicURL(a.cfg.Server.PublicURL),
		payment.WithReconcileAfter(a.cfg.Billing.ReconcileAfter),
		payment.WithLateCapture(a.cfg.Payments.LateCapture()),
		payment.WithClock(a.opts.clock),
		payment.WithBillingClock(testClock.clock()),
		payment.WithMetrics(a.tel.metrics),
		payment.WithReads(a.reads()),
		payment.WithDisputeSuspend(a.cfg.Disputes.Suspend))
	a.bg, err = a.buildBackground(paySvc, testClock)
	if err != nil {
		return err
	}
	if a.bg.notifier != nil {
		paySvc.SetAdminNotices(a.bg.notifier)
	}
	callbacks := paymentrpc.NewCallbackHandler(paySvc, a.log)
	eopts := a.cfg.Export.Options()
	eopts.Reads = a.reads()
	exports := export.NewHandler(a.db, a.log, eopts)
	var payHandler paymentpbconnect.PaymentServiceHandler = paymentrpc.NewHandler(paySvc)
	if a.opts.wrapPayments != nil {
		payHandler = a.opts.wrapPayments(payHandler)
	}
	paymentPath, paymentHandler := paymentpbconnect.NewPaymentServiceHandler(payHandler, opts...)
	paymentAdminPath, paymentAdminHandler := paymentpbconnect.NewPaymentAdminServiceHandler(paymentAdminHandler(paySvc, a.bg.renewals, a.bg.billingClock), opts...)
	identityPath, identityHandler := identitypbconnect.NewIdentityServiceHandler(identityrpc.NewHandler(ids), opts...)
	customerAdminPath, customerAdminHandler := identitypbconnect.NewCustomerAdminServiceHandler(identityrpc.NewAdminHandler(ids), opts...)
	orderSvc := order.NewService(a.db, a.cfg.Billing.Currencies, a.secrets, a.opts.clock, a.log).WithBillingClock(testClock.clock()).
		WithEndNowCredit(order.EndCredit(a.cfg.Billing.EndNowCredit)).WithBalanceRefunder(paySvc).
		WithPlanChanges(a.cfg.Billing.PlanChangeDays, order.EndCredit(a.cfg.Billing.DowngradeCredit))
	orderSvc.SetLocation(a.cfg.Billing.RenewalOptions("").Location)
	orders := orderHandler(orderSvc, a.bg.renewals, a.bg.billingClock).WithRefunder(paySvc)
	orderPath, orderHandler := orderpbconnect.NewOrderServiceHandler(orders, opts...)
	orderAdminPath, orderAdminHandler := orderpbconnect.NewOrderAdminServiceHandler(orderrpc.NewAdminHandler(orders), opts...)
	limiter := concurrency.New(a.cfg.Server.MaxConcurrency,
		concurrency.WithQueueTimeout(time.Duration(a.cfg.Server.QueueTimeoutMS)*time.Millisecond))
	if err := errors.Join(a.registerCollectors(limiter), a.registerReplica()); err != nil {
		return err
	}
	srv.DB, srv.Logger = a.pool, a.log
	srv.Services = append([]server.Service{
		{Name: paymentpbconnect.PaymentServiceName, Path: paymentPath, Handler: paymentHandler},
		{Name: paymentpbconnect.PaymentAdminServiceName, Path: paymentAdminPath, Handler: paymentAdminHandler},
		{Name: identitypbconnect.IdentityServiceName, Path: identityPath, Handler: identityHandler},
		{Name: identitypbconnect.CustomerAdminServiceName, Path: customerAdminPath, Handler: customerAdminHandler},
		{Name: orderpbconnect.OrderServiceName, Path: orderPath, Handler: orderHandler},
		{Name: orderpbconnect.OrderAdminServiceName, Path: orderAdminPath, Handler: orderAdminHandler},
		a.bg.eventService(opts, a),
	}, a.gatewayServices(opts, paySvc)...)
	// The API contract's order (docs/api.md, "Limits" and "Credential
	// layers"): the concurrency limit first (FIFO, nothing rejected), then
	// the per-IP rate limit, then session, JWT and API key. Each credential
	// layer handles only its own kind; the first that finds one decides, and
	// an invalid credential never falls through to a later layer.
	srv.Limits = []server.Middleware{
		limiter.Middleware(),
		ratelimit.Middleware(a.rateCounters(), ratelimit.Rules(a.cfg.RateLimit.Limits()), ratelimit.ClientIP(a.cfg.Server.TrustedProxyPrefixes()), a.log),
	}
	// GET/POST /callbacks/{gateway_interface_id}: gateways' plain HTTP
	// notifications, behind the limits and before the credential
	// layers (a gateway has none; the signature is the protection).
	// GET /export/payments.csv and /export/refunds.csv: the
	// accountant's CSV files, behind the credential layers (an admin's
	// session or a read key; the handler checks it).
	srv.Routes = []server.Route{
		{Pattern: payment.CallbackPath, Handler: callbacks},
		{Pattern: "GET " + export.PaymentsPath, Handler: exports.Payments(), Authenticated: true},
		{Pattern: "GET " + export.RefundsPath, Handler: exports.Refunds(), Authenticated: true},
		{Pattern: "GET " + export.InvoicesPath, Handler: exports.Invoices(), Authenticated: true},
	}
	srv.Credentials = []server.Middleware{
		auth.Layer(ids.SessionAuthenticator(), a.log),
		auth.Layer(ids.JWTAuthenticator(), a.log),
		auth.Layer(ids.APIKeyAuthenticator(), a.log),
	}
	srv.AdminUI = adminui.Dist()
	// Outermost, before /health and the console: request id, span,
	// access line.
	srv.Observe = a.tel.observer.Middleware
	a.server = server.New(srv)
	// The counters an alert watches for any increase hold every label set
	// known now at zero, so that the first event after a start is an
	// increase (docs/decisions.md, "alerts on the first event").
	a.tel.metrics.PanicRoutes(a.server.PanicRoutes())
	known := payment.KnownMetricLabels(a.registry.GatewayPlugins(), a.cfg.Billing.Currencies)
	a.tel.metrics.PaymentSeries(known.Transitions, known.Captured, known.Callbacks, known.Refunds)
	return a.tel.metrics.RegisterRequestBodies(a.server)
}

// sealSecrets builds the keyring of [secrets] and encrypts the plugin
// secrets still stored in clear — gateway interfaces' and products'
// provider settings before the start goes on, orders' copies of them in
// the background (secretpass.AtStart: every instance does it at start;
// under the rows' locks only the first finds anything to do). Without a
// key, a database whose interfaces or products hold secrets stops the
// start: the service could neither read them nor store new ones.
func (a *App) sealSecrets(ctx context.Context) error {
	keys, err := a.cfg.Secrets.Keyring()
	if err != nil {
		return err
	}
	a.secrets = keys
	rep, orders, err := secretpass.AtStart(ctx, a.pool, keys, audit.System(a.node), a.opts.clock())
	if err != nil {
		return err
	}
	a.logSealed(rep, "gateway_interfaces", rep.Of[secretpass.GatewayInterfaces.Kind].Owners, "products", rep.Of[secretpass.Products.Kind].Owners)
	// A key under the right id with the wrong bytes opens nothing: started,
	// the service would answer ready while every interface failed.
	if err := rep.WrongKeyError(); err != nil {
		return err
	}
	for id, n := range rep.Missing {
		// An old key dropped before every value was rotated off it: only
		// what holds those values is unusable, so the start goes on.
		a.log.Error("stored secrets are sealed under a key id that [secrets].keys does not hold: the gateway interfaces and products holding them are unusable until the key is configured again or their secrets are sent again",
			"key_id", id, "secrets", n)
	}
	if orders == nil {
		return nil
	}
	// The orders' copies go in the background: the pass reads every
	// order ever placed, and the start must not wait for it.
	return a.sealing.Start(context.WithoutCancel(ctx), func(ctx context.Context, _ <-chan struct{}) {
		began := time.Now()
		rep, err := orders(ctx)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			a.log.Error("cannot encrypt the orders' copies of provider secrets (the next start tries again)", "err", err)
		default:
			a.logSealed(rep, "orders", rep.Of[secretpass.Orders.Kind].Owners, "took", time.Since(began).Round(time.Millisecond).String())
		}
	})
}

// logSealed logs what a sealing pass at start found and did.
func (a *App) logSealed(rep secretpass.Report, what ...any) {
	if rep.Sealed > 0 {
		a.log.Info("plugin secrets stored in clear are now encrypted", append([]any{"sealed", rep.Sealed, "key_id", a.secrets.Current()}, what...)...)
	}
	for _, u := range rep.Unreadable {
		a.log.Error("a stored plugin secret does not decrypt with the keys of [secrets]: what holds it is unusable until the key is configured or the secret is sent again", "problem", u)
	}
	if a.secrets != nil {
		a.log.Info("secrets at rest", append([]any{"current_key_id", a.secrets.Current(), "key_ids", a.secrets.IDs(), "stored_secrets", rep.Total()}, what...)...)
	}
}

// MergePolicies joins the permission tables of the mounted services into the
// one table the policy interceptor checks. A procedure listed twice is an
// error, so no table silently overrides another's decision.
func MergePolicies(policies ...auth.Policy) (auth.Policy, error) {
	merged := auth.Policy{}
	for _, p := range policies {
		for proc, access := range p {
			if _, dup := merged[proc]; dup {
				return nil, fmt.Errorf("permission table: %s is listed twice", proc)
			}
			merged[proc] = access
		}
	}
	return merged, nil
}

// Pool is the database pool.
func (a *App) Pool() *pgxpool.Pool { return a.pool }

// PasswordChecksWaiting is the number of password calls waiting for a
// hashing slot now (tests wait for the queue to fill).
func (a *App) PasswordChecksWaiting() int { return a.ids.HashesWaiting() }

// Server is the HTTP server.
func (a *App) Server() *server.Server { return a.server }

// Run listens on the configured address, and on the metrics address when
// [metrics].enabled, and serves until ctx is cancelled.
func (a *App) Run(ctx context.Context) error {
	ln, err := a.server.Listen()
	if err != nil {
		return err
	}
	mln, err := a.ListenMetrics()
	if err != nil {
		_ = ln.Close()
		return err
	}
	return a.ServeWithMetrics(ctx, ln, mln)
}

// Serve serves on ln until ctx is cancelled, with the background services
// (the leader roles' work, the notification sender) running meanwhile.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	// The background services outlive a cancelled ctx only as long as their
	// graceful stop takes: they are stopped (leases resigned) on the way out.
	bgCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	if err := a.bg.start(bgCtx); err != nil {
		return err
	}
	defer a.bg.stop()
	stopReplica, err := a.startReplica(bgCtx)
	if err != nil {
		return err
	}
	defer stopReplica()
	// The start's garbage (migrations, plugin compilation, the validator's
	// CEL environment: half the heap the process ever had) goes back to
	// the OS now, in one collection while the server starts answering,
	// rather than as the background scavenger gets to it: idle RSS −3 MiB
	// (docs/performance.md, "Idle RSS").
	go debug.FreeOSMemory()
	return a.server.Serve(ctx, ln)
}

// Close stops the plugin scanner and releases the pool and the cache.
func (a *App) Close() {
	a.sealing.Stop()
	a.stopPlugins()
	a.closeTelemetry()
	if a.cache != nil {
		_ = a.cache.Close()
	}
	a.closeReplica()
	a.pool.Close()
}

// lateCapture is [payments].late_capture_days for reconcile.Options, where
// zero means the default and a negative window none.
func lateCapture(p config.Payments) time.Duration {
	if p.LateCaptureDays == 0 {
		return -1
	}
	return p.LateCapture()
}

// paymentAdminHandler is the PaymentAdminService handler, with the billing
// run's clock (the test clock when it is on) and rules for the recurring
// revenue's renewals, suspensions and terminations ahead.
func paymentAdminHandler(svc *payment.Service, run *renewal.Run, clock *billingTestClock) *paymentrpc.AdminHandler {
	rules := paymentrpc.BillingRules{SuspendAfter: run.SuspendAfter(), TerminateAfter: run.TerminateAfter(), Clock: run.Now}
	if clock != nil {
		rules.Clock = clock.Now
	}
	return paymentrpc.NewAdminHandler(svc).WithBillingRules(rules)
}

// orderHandler is the OrderService handler, with the billing run's
// settings for the renewal overview and the billing test clock when it is
// on (clock nil: off).
func orderHandler(svc *order.Service, run *renewal.Run, clock *billingTestClock) *orderrpc.Handler {
	h := orderrpc.NewHandler(svc).WithRenewalPolicy(orderrpc.RenewalPolicy{SuspendAfter: run.SuspendAfter(), TerminateAfter: run.TerminateAfter()})
	if clock != nil {
		h.WithBillingClock(clock)
	}
	return h
}
