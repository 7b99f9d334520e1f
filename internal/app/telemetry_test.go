package app_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/notify/notifytest"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// observed is a running paymentd with its metrics listener, its JSON log
// lines in a buffer, an epay interface on a fake gateway and a product.
type observed struct {
	*payBundle
	metricsURL string
	logs       *testkit.Logs
}

func startObserved(t *testing.T, opts []app.Option, mutate ...func(*config.Config)) *observed {
	t.Helper()
	fake := epay.New(epay.Options{NotifyScale: 0.0001})
	require.NoError(t, fake.Start())
	t.Cleanup(fake.Close)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := testConfig(testdb.URL(t))
	cfg.Plugins.Dir = pluginDir(t)
	cfg.Server.PublicURL = "http://" + ln.Addr().String()
	cfg.Log = config.Log{Level: "debug", Format: "json"}
	for _, m := range mutate {
		m(&cfg)
	}
	logs := &testkit.Logs{}
	a, err := app.New(context.Background(), cfg, logging.New(cfg.Log.Options(), logs), opts...)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.ServeWithMetrics(ctx, ln, mln) }()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		cancel()
		require.NoError(t, <-done)
		a.Close()
	})
	r := &running{app: a, baseURL: "http://" + ln.Addr().String()}
	e := &payBundle{
		r: r, c: login(t, r), fake: fake, pluginDir: cfg.Plugins.Dir,
		payments: paymentpbconnect.NewPaymentServiceClient(http.DefaultClient, r.baseURL),
		orders:   orderpbconnect.NewOrderServiceClient(http.DefaultClient, r.baseURL),
		admin:    gatewaypbconnect.NewGatewayAdminServiceClient(http.DefaultClient, r.baseURL),
	}
	e.epayGW = e.addGateway(t, "epay", "Alipay", e.epayConfig())
	prod, err := e.orders.CreateProduct(context.Background(), with(&orderpb.CreateProductRequest{Name: "VPS", Price: "12.30", Currency: "CNY"}, e.c.admin))
	require.NoError(t, err)
	e.product = prod.Msg.GetProduct().GetId()
	return &observed{payBundle: e, metricsURL: "http://" + mln.Addr().String(), logs: logs}
}

// scrape reads /metrics and returns every sample by its series name
// (`family{label="v",…}` as written); t may be an EventuallyWithT
// condition's collector.
func (o *observed) scrape(t testkit.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get(o.metricsURL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		out[line[:i]] = v
	}
	require.NoError(t, sc.Err())
	return out
}

// callbackGET delivers an epay notification to /callbacks/{id} as the
// gateway does, and returns the status and body.
func (o *observed) callbackGET(t *testing.T, query string) (int, string) {
	t.Helper()
	resp, err := http.Get(o.r.baseURL + "/callbacks/" + o.epayGW + "?" + query)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestOneCallbackMovesTheCallbackCountersAndAReplayCountsAsDuplicate(t *testing.T) {
	t.Parallel()
	o := startObserved(t, nil)
	p := o.createPayment(t, o.order(t)).GetPayment()
	series := func(name, labels string) string { return "paymentd_" + name + "{" + labels + "}" }
	accepted := series("callbacks_total", `gateway="epay",outcome="accepted"`)
	duplicate := series("callbacks_total", `gateway="epay",outcome="duplicate"`)
	badSig := series("callbacks_total", `gateway="epay",outcome="bad_signature"`)
	pending := series("payment_transitions_total", `gateway="epay",status="pending"`)
	success := series("payment_transitions_total", `gateway="epay",status="success"`)
	settled := series("payment_settled_cents_total", `currency="CNY",gateway="epay"`)
	callbacksRoute := series("http_requests_total", `code="200",route="/callbacks/{gateway_interface_id}"`)

	m := o.scrape(t)
	require.Equal(t, 1.0, m[pending], "CreatePayment made one pending payment")
	require.Zero(t, m[accepted])
	require.Zero(t, m[success])

	notify := signedNotify(p.GetId(), "T-1001", "12.30")
	code, body := o.callbackGET(t, notify)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "success", body)
	m = o.scrape(t)
	require.Equal(t, 1.0, m[accepted])
	require.Zero(t, m[duplicate])
	require.Equal(t, 1.0, m[success])
	require.Equal(t, 1230.0, m[settled], "12.30 CNY in cents")
	require.Equal(t, 1.0, m[callbacksRoute])

	// The gateway repeats it: acknowledged again, counted as a duplicate,
	// nothing settled twice.
	code, body = o.callbackGET(t, notify)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "success", body)
	m = o.scrape(t)
	require.Equal(t, 1.0, m[accepted])
	require.Equal(t, 1.0, m[duplicate])
	require.Equal(t, 1.0, m[success])
	require.Equal(t, 1230.0, m[settled])
	require.Equal(t, 2.0, m[callbacksRoute])

	// A forged one: a bad signature, 400.
	code, _ = o.callbackGET(t, strings.Replace(notify, "money=12.30", "money=1.00", 1))
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, 1.0, o.scrape(t)[badSig])

	// The gRPC HandleCallback feeds the same counters.
	require.Equal(t, connect.CodeAlreadyExists, connect.CodeOf(o.callback(notify)))
	require.Equal(t, 2.0, o.scrape(t)[duplicate])
}

// Every family docs/operations.md lists is on /metrics after a little
// traffic.
func TestMetricsListenerShowsEveryDocumentedFamily(t *testing.T) {
	t.Parallel()
	o := startObserved(t, nil)
	orderID := o.order(t)
	p := o.createPayment(t, orderID).GetPayment()
	require.NoError(t, o.fake.Pay(p.GetId()))
	o.waitSettled(t, p.GetId())
	o.waitOrderStatus(t, orderID, "active")
	_, err := o.payments.RefundPayment(context.Background(), with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId(), Amount: "1.00"}, o.c.admin))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status(t, o.r.baseURL+"/ready"))
	// A refund an admin must still record, reserved an hour ago.
	_, err = o.r.app.Pool().Exec(context.Background(), `INSERT INTO refunds (payment_id, amount, status, created_at, updated_at)
		VALUES ($1, 2.00, 'pending', now() - interval '1 hour', now() - interval '1 hour')`, p.GetId())
	require.NoError(t, err)

	m := o.scrape(t)
	families := map[string]bool{}
	for s := range m {
		name, _, _ := strings.Cut(s, "{")
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			name = strings.TrimSuffix(name, suffix)
		}
		families[name] = true
	}
	for _, f := range documentedFamilies(t) {
		if f == "paymentd_plugin_call_errors_total" {
			continue // appears with the first failed plugin call
		}
		if strings.HasPrefix(f, "paymentd_db_replica_") {
			continue // only with [db].replica_url: TestHeavyReadsGoToAReplicaWithinTheMaximumLag
		}
		require.True(t, families[f], "family %s is documented but not exposed", f)
	}
	for f := range families {
		if strings.HasPrefix(f, "paymentd_") {
			require.Contains(t, documentedFamilies(t), f, "family %s is exposed but not documented in docs/operations.md", f)
		}
	}
	require.Equal(t, 1.0, m[`paymentd_refunds_total{gateway="epay",outcome="succeeded"}`])
	require.Equal(t, 100.0, m[`paymentd_refunded_cents_total{currency="CNY",gateway="epay"}`])
	require.Equal(t, 1.0, m[`paymentd_rpc_requests_total{code="ok",procedure="/billing.payment.PaymentService/RefundPayment"}`])
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m := o.scrape(c)
		assert.Equal(c, 1.0, m[`paymentd_leader{role="billing"}`])
		assert.Equal(c, 1.0, m[`paymentd_leader{role="event_worker"}`])
	}, 10*time.Second, 50*time.Millisecond, "the only instance leads both roles")
	require.Equal(t, 1.0, m[`paymentd_queue_stats_up`])
	require.Contains(t, m, `paymentd_event_queue_depth{status="pending",type="order_paid"}`)
	require.Equal(t, 1.0, m[`paymentd_refunds_pending`])
	require.GreaterOrEqual(t, m[`paymentd_refunds_pending_oldest_age_seconds`], 3600.0)
	require.Equal(t, 30.0, m[`paymentd_concurrency_limit`])
	require.Contains(t, m, `paymentd_outbound_breaker_state{host="`+strings.TrimPrefix(o.fake.URL(), "http://")+`",state="closed"}`)
	require.Positive(t, m[`paymentd_plugin_call_duration_seconds_count{function="create_payment",plugin="epay"}`])
	require.Contains(t, m, `paymentd_db_pool_connections{state="idle"}`)

	// Only /metrics: no API, no pprof unless asked for.
	require.Equal(t, http.StatusNotFound, status(t, o.metricsURL+"/debug/pprof/"))
	require.Equal(t, http.StatusNotFound, status(t, o.metricsURL+"/billing.payment.PaymentService/GetPayment"))
}

// documentedFamilies are the metric families docs/operations.md lists
// (rows of its metrics table starting with `paymentd_…`).
func documentedFamilies(t *testing.T) []string {
	t.Helper()
	raw, err := readRepoFile("docs/operations.md")
	require.NoError(t, err)
	var out []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(paymentd_[a-z_]+)`").FindAllStringSubmatch(raw, -1) {
		out = append(out, m[1])
	}
	require.NotEmpty(t, out)
	return out
}

func TestPprofIsServedOnTheMetricsListenerWhenAskedFor(t *testing.T) {
	t.Parallel()
	o := startObserved(t, nil, func(c *config.Config) { c.Metrics.Pprof = true })
	require.Equal(t, http.StatusOK, status(t, o.metricsURL+"/debug/pprof/"))
	require.Equal(t, http.StatusNotFound, status(t, o.r.baseURL+"/debug/pprof/"), "never on the public port")
	require.Equal(t, http.StatusNotFound, status(t, o.r.baseURL+"/metrics"), "never on the public port")
}

// No log line holds a password, a token, a session, an API key or a
// gateway's merchant key, whatever the request; and each request's lines
// carry its request id, procedure and principal.
func TestLogsCarryRequestContextAndNeverASecret(t *testing.T) {
	t.Parallel()
	o := startObserved(t, nil)
	ctx := context.Background()
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, o.r.baseURL)

	const password = "carol's secret passphrase"
	reg, err := ids.Register(ctx, connect.NewRequest(&identitypb.RegisterRequest{Email: "carol@example.com", Password: password, Name: "Carol"}))
	require.NoError(t, err)
	token := reg.Msg.GetAccessToken()
	login, err := ids.Login(ctx, connect.NewRequest(&identitypb.LoginRequest{Email: "carol@example.com", Password: password}))
	require.NoError(t, err)
	_, err = ids.Login(ctx, connect.NewRequest(&identitypb.LoginRequest{Email: "carol@example.com", Password: password + " wrong"}))
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err))
	admin, err := ids.AdminLogin(ctx, connect.NewRequest(&identitypb.AdminLoginRequest{Username: "admin", Password: "bootstrap-password"}))
	require.NoError(t, err)
	session := strings.SplitN(strings.SplitN(admin.Header().Get("Set-Cookie"), ";", 2)[0], "=", 2)[1]
	key, err := ids.CreateApiKey(ctx, with(&identitypb.CreateApiKeyRequest{Name: "ci"}, o.c.customer))
	require.NoError(t, err)
	_, err = ids.GetMe(ctx, with(&identitypb.GetMeRequest{}, apiKey(key.Msg.GetKey())))
	require.NoError(t, err)
	_, err = ids.GetMe(ctx, with(&identitypb.GetMeRequest{}, apiKey(key.Msg.GetKey()+"x")))
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err))

	p := o.createPayment(t, o.order(t)).GetPayment()
	code, _ := o.callbackGET(t, signedNotify(p.GetId(), "T-2002", "12.30"))
	require.Equal(t, http.StatusOK, code)
	code, _ = o.callbackGET(t, strings.Replace(signedNotify(p.GetId(), "T-2002", "12.30"), "money=12.30", "money=9.99", 1))
	require.Equal(t, http.StatusBadRequest, code)

	// A client's well-formed request id is kept and echoed; a malformed one
	// is replaced.
	req, _ := http.NewRequest(http.MethodGet, o.r.baseURL+"/ready", nil)
	req.Header.Set("X-Request-Id", "support-ticket-42")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, "support-ticket-42", resp.Header.Get("X-Request-Id"))
	req.Header.Set("X-Request-Id", "forged \"line\"")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Regexp(t, `^[0-9a-f]{32}$`, resp.Header.Get("X-Request-Id"))

	require.Eventually(t, func() bool { return strings.Contains(o.logs.String(), `"path":"/ready"`) }, 5*time.Second, 10*time.Millisecond)
	all := o.logs.String()
	secret := key.Msg.GetKey() // pk_<id>_<secret>, and base64url's alphabet holds '_' too
	for name, s := range map[string]string{
		"customer password": password, "bootstrap password": "bootstrap-password", "access token": token,
		"login token": login.Msg.GetAccessToken(), "admin session": session, "api key": secret,
		"api key secret": strings.SplitN(secret, "_", 3)[2], "epay merchant key": epay.DefaultKey,
		"alice's token": strings.TrimPrefix(headerOf(o.c.customer, "Authorization"), "Bearer "),
	} {
		require.NotEmpty(t, s, name)
		require.NotContains(t, all, s, "the logs hold the %s", name)
	}

	lines := o.logs.Lines(t)
	find := func(msg, procedure string) map[string]any {
		for _, l := range lines {
			if l["msg"] == msg && (procedure == "" || l["procedure"] == procedure) {
				return l
			}
		}
		t.Fatalf("no %q line for %s in:\n%s", msg, procedure, all)
		return nil
	}
	rpc := find("rpc", "/billing.identity.IdentityService/CreateApiKey")
	require.Equal(t, "ok", rpc["code"])
	require.Equal(t, "customer:"+o.c.customerID.String(), rpc["principal"])
	require.Regexp(t, `^[0-9a-f]{32}$`, rpc["request_id"])
	created := find("rpc", "/billing.payment.PaymentService/CreatePayment")
	require.Equal(t, p.GetId(), created["payment_id"], "the id of the payment created, from the answer")
	require.Equal(t, p.GetOrderId(), created["order_id"])
	// The domain's own line of that request carries the same request id.
	var domainLine map[string]any
	for _, l := range lines {
		if l["msg"] == "payment created" {
			domainLine = l
		}
	}
	require.NotNil(t, domainLine)
	require.Equal(t, created["request_id"], domainLine["request_id"])
	require.Equal(t, "/billing.payment.PaymentService/CreatePayment", domainLine["procedure"])

	cb := find("http", "")
	for _, l := range lines {
		if l["msg"] == "http" && l["route"] == "/callbacks/{gateway_interface_id}" && l["status"] == 200.0 {
			cb = l
		}
	}
	require.Equal(t, p.GetId(), cb["payment_id"])
	require.Equal(t, o.epayGW, cb["gateway_interface_id"])
	require.NotContains(t, cb["path"], "?", "no query string (signature, amounts) in the access line")
	ready := find("http", "")
	for _, l := range lines {
		if l["msg"] == "http" && l["path"] == "/ready" {
			ready = l
		}
	}
	require.NotEmpty(t, ready["request_id"])

	// An audit row leads back to the request.
	var auditRequestID string
	require.NoError(t, o.r.app.Pool().QueryRow(ctx,
		`SELECT request_id FROM audit_log WHERE action = 'payment.create' AND entity_id = $1`, p.GetId()).Scan(&auditRequestID))
	require.Equal(t, created["request_id"], auditRequestID)
}

func readRepoFile(rel string) (string, error) {
	b, err := os.ReadFile(filepath.Join("..", "..", rel))
	return string(b), err
}

func headerOf(c credential, name string) string {
	h := http.Header{}
	c(h)
	return h.Get(name)
}

// With tracing on: every log line of a request carries its trace id, a
// caller's traceparent is linked rather than continued, spans cover the
// request, the RPC and the plugin call, and the gateway receives a
// traceparent of the same trace.
func TestTracingPutsTheTraceIDInLogsAndPropagatesItToTheGateway(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	fake := epay.New(epay.Options{})
	require.NoError(t, fake.Start())
	t.Cleanup(fake.Close)
	var mu sync.Mutex
	var traceparents []string
	target, err := url.Parse(fake.URL())
	require.NoError(t, err)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparents = append(traceparents, r.Header.Get("Traceparent"))
		mu.Unlock()
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close)

	o := startObserved(t, []app.Option{app.WithSpanExporter(exp)}, func(c *config.Config) {
		c.Tracing.Enabled = true
		c.Tracing.SampleRatio = 1
	})
	ctx := context.Background()
	gw, err := o.admin.CreateGatewayInterface(ctx, with(&gatewaypb.CreateGatewayInterfaceRequest{
		PluginName: "epay", DisplayName: "Traced",
		Config: mustStruct(t, map[string]any{"api_url": proxy.URL + "/", "pid": epay.DefaultPID, "key": epay.DefaultKey}),
	}, o.c.admin))
	require.NoError(t, err)
	gwID := gw.Msg.GetGatewayInterface().GetId()
	_, err = o.admin.EnableGatewayInterface(ctx, with(&gatewaypb.EnableGatewayInterfaceRequest{Id: gwID}, o.c.admin))
	require.NoError(t, err)

	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	req := with(&paymentpb.CreatePaymentRequest{OrderId: o.order(t), GatewayInterfaceId: gwID, ReturnUrl: "https://shop.example/done"}, o.c.customer)
	req.Header().Set("Traceparent", "00-"+callerTrace+"-00f067aa0ba902b7-01")
	res, err := o.payments.CreatePayment(ctx, req)
	require.NoError(t, err)
	paymentID := res.Msg.GetPayment().GetId()

	var line map[string]any
	for _, l := range o.logs.Lines(t) {
		if l["msg"] == "payment created" && l["payment_id"] == paymentID {
			line = l
		}
	}
	require.NotNil(t, line)
	traceID, _ := line["trace_id"].(string)
	require.Regexp(t, `^[0-9a-f]{32}$`, traceID)
	require.NotEqual(t, callerTrace, traceID, "a caller's trace is linked, not continued")
	mu.Lock()
	require.NotEmpty(t, traceparents)
	require.Contains(t, traceparents[0], "00-"+traceID+"-", "the gateway call carries the request's trace")
	mu.Unlock()

	require.Eventually(t, func() bool {
		return len(spansOf(exp, traceID)) >= 4
	}, 10*time.Second, 20*time.Millisecond)
	names := spansOf(exp, traceID)
	require.Contains(t, names, "POST billing.payment.PaymentService/CreatePayment")
	require.Contains(t, names, "billing.payment.PaymentService/CreatePayment", "otelconnect's RPC span")
	require.Contains(t, names, "plugin epay.create_payment")
	require.Contains(t, names, "HTTP POST", "the outbound call")
	for _, s := range exp.GetSpans() {
		if s.Name == "POST billing.payment.PaymentService/CreatePayment" {
			require.Len(t, s.Links, 1)
			require.Equal(t, callerTrace, s.Links[0].SpanContext.TraceID().String())
		}
	}
}

// Tracing off (the default): no trace ids in the logs, neither a request's
// nor background work's (the plugin scan at start).
func TestTracingOffLeavesTraceIDsOutOfTheLogs(t *testing.T) {
	t.Parallel()
	o := startObserved(t, nil)
	req := with(&paymentpb.CreatePaymentRequest{OrderId: o.order(t), GatewayInterfaceId: o.epayGW, ReturnUrl: "https://shop.example/done"}, o.c.customer)
	req.Header().Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	_, err := o.payments.CreatePayment(context.Background(), req)
	require.NoError(t, err)
	require.Contains(t, o.logs.String(), `"msg":"plugin loaded"`, "background work logged too")
	require.NotContains(t, o.logs.String(), `"trace_id"`)
}

func spansOf(exp *tracetest.InMemoryExporter, traceID string) []string {
	var names []string
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID().String() == traceID {
			names = append(names, s.Name)
		}
	}
	return names
}

// With tracing on, background work has traces of its own, and its log lines
// carry them as a request's lines carry the request's: an event attempt of
// the worker (and what its handler logs), a notification delivery, a
// reconciliation round, a run of the payment timeout scan and a plugin scan
// each log with the trace and span id of a span that is exported.
func TestTracingPutsATraceIDInTheLogsOfBackgroundWork(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	hook := notifytest.StartWebhook(t, "webhook-secret-0123456789")
	// The business clock stands still until the test moves it: the
	// reconciliation and the payment timeout come when it says, not after
	// seconds of real time waited out.
	clock := testkit.NewClockAt(time.Now().UTC())
	o := startObserved(t, []app.Option{app.WithSpanExporter(exp), app.WithClock(clock.Now)}, func(c *config.Config) {
		c.Tracing.Enabled = true
		c.Tracing.SampleRatio = 1
		c.Events.PollInterval = 100 * time.Millisecond
		c.Events.TimeoutScanInterval = 200 * time.Millisecond
		c.Billing.PaymentTimeout = 5 * time.Second
		c.Billing.ReconcileAfter = 300 * time.Millisecond
		src, err := os.ReadFile(filepath.Join("..", "..", "plugins", "notifier", "webhook.lua"))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(c.Plugins.Dir, "notifier"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(c.Plugins.Dir, "notifier", "webhook.lua"), src, 0o644))
		c.Notify.Webhooks = []config.NotifyWebhook{{Name: "ops", URL: hook.URL, Secret: hook.Secret}}
		c.Notify.PollInterval = 100 * time.Millisecond
	})

	// A payment whose notification is lost: the reconciler settles it, the
	// event worker handles its order_paid, the webhook is notified. An order
	// nobody pays: the timeout scan cancels it.
	paidOrder := o.order(t)
	p := o.createPayment(t, paidOrder).GetPayment()
	o.fake.DropNotify(true)
	require.NoError(t, o.fake.Pay(p.GetId()))
	unpaidOrder := o.order(t)
	// The payment falls due for reconciliation (after 300 ms), both orders
	// still far from their 5 s timeout; once the paid one is active, the
	// other is past it.
	clock.Advance(time.Second)
	o.waitSettled(t, p.GetId())
	o.waitOrderStatus(t, paidOrder, "active")
	clock.Advance(5 * time.Second)
	o.waitOrderStatus(t, unpaidOrder, "cancelled")

	// find waits for a line of msg whose attributes include those given.
	find := func(msg string, attrs map[string]any) map[string]any {
		t.Helper()
		var found map[string]any
		require.EventuallyWithT(t, func(c *assert.CollectT) {
		lines:
			for _, l := range o.logs.Lines(c) {
				if l["msg"] != msg {
					continue
				}
				for k, v := range attrs {
					if l[k] != v {
						continue lines
					}
				}
				found = l
				return
			}
			assert.Fail(c, "not logged yet")
		}, 15*time.Second, 50*time.Millisecond, "no %q line with %v", msg, attrs)
		return found
	}
	var traces []string
	check := func(l map[string]any, span string) string {
		t.Helper()
		traceID, _ := l["trace_id"].(string)
		require.Regexp(t, `^[0-9a-f]{32}$`, traceID, "%q logged without a trace id: %v", l["msg"], l)
		require.Regexp(t, `^[0-9a-f]{16}$`, l["span_id"], "%q logged without a span id", l["msg"])
		require.Nil(t, l["request_id"], "%q is background work, not a request's", l["msg"])
		require.Eventually(t, func() bool { return slices.Contains(spansOf(exp, traceID), span) }, 15*time.Second, 50*time.Millisecond,
			"%q's trace %s has no %s span (it has %v)", l["msg"], traceID, span, spansOf(exp, traceID))
		traces = append(traces, traceID)
		return traceID
	}

	reconciled := find("payment settled by reconciliation", map[string]any{"payment_id": p.GetId()})
	check(reconciled, "reconcile.round")
	done := find("event done", map[string]any{"order_id": paidOrder, "event_type": "order_provisioned"})
	eventTrace := check(done, "event.handle")
	// The handler's own line of that attempt is in the attempt's trace.
	queued := find("notifications queued", map[string]any{"event_id": done["event_id"]})
	require.Equal(t, eventTrace, queued["trace_id"], "the handler's lines carry the attempt's trace")
	check(find("notification sent", map[string]any{"event_id": done["event_id"]}), "notification.deliver")
	check(find("order cancelled: payment timeout", map[string]any{"order_id": unpaidOrder}), "periodic.run")
	check(find("plugin loaded", map[string]any{"plugin": "epay"}), "plugin.scan")

	// Each unit of work is a trace of its own, none the request's.
	var created map[string]any
	for _, l := range o.logs.Lines(t) {
		if l["msg"] == "payment created" && l["payment_id"] == p.GetId() {
			created = l
		}
	}
	require.NotNil(t, created)
	require.NotContains(t, traces, created["trace_id"])
	slices.Sort(traces)
	require.Len(t, slices.Compact(traces), 5, "five units of work, five traces")
}
