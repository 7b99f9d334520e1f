package metrics

import (
	"errors"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/outbound"
	"github.com/rustbill/paymentd/internal/plugin"
)

// Namespace prefixes every paymentd family.
const Namespace = "paymentd"

// Metrics holds the registry and the instruments the code feeds. The zero
// value is not usable; a nil *Metrics is (every method does nothing), so
// code can be instrumented without a registry in unit tests.
type Metrics struct {
	reg *prometheus.Registry

	rpcRequests    *prometheus.CounterVec
	rpcDuration    *prometheus.HistogramVec
	httpRequests   *prometheus.CounterVec
	httpDuration   *prometheus.HistogramVec
	transitions    *prometheus.CounterVec
	settledCents   *prometheus.CounterVec
	capturedCents  *prometheus.CounterVec
	callbacks      *prometheus.CounterVec
	refunds        *prometheus.CounterVec
	refundedCents  *prometheus.CounterVec
	pluginDuration *prometheus.HistogramVec
	pluginErrors   *prometheus.CounterVec
	panics         *prometheus.CounterVec
	secondFactor   *prometheus.CounterVec
}

// New returns Metrics on a registry of its own, with the Go runtime,
// process and build-info collectors registered.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{reg: reg}
	f := func(c prometheus.Collector) { reg.MustRegister(c) }
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f(collectors.NewBuildInfoCollector())

	m.rpcRequests = counterVec("rpc_requests_total",
		"RPCs answered, by procedure and Connect code (ok, invalid_argument, …).", "procedure", "code")
	m.rpcDuration = histogramVec("rpc_duration_seconds",
		"Time to answer an RPC, by procedure and code, from the interceptor's view (after the limiter's queue and the credential layers).",
		prometheus.DefBuckets, "procedure", "code")
	m.httpRequests = counterVec("http_requests_total",
		"Requests to the plain HTTP routes (callbacks, ready, health, admin console, other), and RPC requests answered before reaching a service (route rpc: rate limited, unknown procedure), by route and status code. Other RPCs are in rpc_requests_total.", "route", "code")
	m.httpDuration = histogramVec("http_request_duration_seconds",
		"Time to answer a request counted in http_requests_total, by route.", prometheus.DefBuckets, "route")
	m.transitions = counterVec("payment_transitions_total",
		"Payment status changes made by the payment domain: created (pending), settled (success), failed, refunded in full; by gateway plugin and new status.", "gateway", "status")
	m.settledCents = counterVec("payment_settled_cents_total",
		"Money settled by gateways (payments turned success), in cents, by gateway plugin and currency.", "gateway", "currency")
	m.capturedCents = counterVec("payment_captured_cents_total",
		"Money gateways captured for payments that could no longer apply (a late success, paid after the order or invoice closed), to be returned, in cents, by gateway plugin and currency. Alert on any increase.", "gateway", "currency")
	m.callbacks = counterVec("callbacks_total",
		"Gateway callbacks (the /callbacks route and HandleCallback), by gateway plugin and outcome: accepted, duplicate, ignored, malformed, bad_signature, mismatch, not_found, unavailable, error.", "gateway", "outcome")
	m.refunds = counterVec("refunds_total",
		"Refunds, by gateway plugin (balance for a balance payment) and outcome: succeeded, failed, unknown.", "gateway", "outcome")
	m.refundedCents = counterVec("refunded_cents_total",
		"Money refunded (succeeded refunds), in cents, by gateway plugin and currency.", "gateway", "currency")
	m.pluginDuration = histogramVec("plugin_call_duration_seconds",
		"Time a plugin function took, by plugin and function, failed calls included.",
		[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}, "plugin", "function")
	m.pluginErrors = counterVec("plugin_call_errors_total",
		"Failed plugin calls, by plugin, function and kind (script_error, timeout, budget, memory, bad_result, circuit_open, other).", "plugin", "function", "kind")
	m.panics = counterVec("panics_total",
		"Panics recovered from request handlers (answered Internal, or 500 to plain HTTP; logged at ERROR with the stack), by route: the procedure for an RPC, else the path the server mounts (/callbacks/, /export/payments.csv, the admin path, /ready, other). A panic is a defect: alert on any.", "route")
	m.secondFactor = counterVec("admin_second_factor_refused_total",
		"Admins' second-factor codes (TOTP or recovery) refused after a right password, by outcome: wrong (judged wrong), locked (refused unjudged while the admin's codes are locked out after too many wrong ones). Both series exist from the start at 0. Anything but a rare typo is someone who has an admin's password.", "outcome")
	for _, outcome := range []string{"wrong", "locked"} {
		m.secondFactor.WithLabelValues(outcome)
	}
	for _, c := range []prometheus.Collector{m.rpcRequests, m.rpcDuration, m.httpRequests, m.httpDuration, m.transitions,
		m.settledCents, m.capturedCents, m.callbacks, m.refunds, m.refundedCents, m.pluginDuration, m.pluginErrors, m.panics, m.secondFactor} {
		f(c)
	}
	return m
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
}

func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets}, labels)
}

// Registry is the registry every instrument and collector is on.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Register adds a collector; the collectors of this package's Register*
// functions use it.
func (m *Metrics) Register(c prometheus.Collector) error { return m.reg.Register(c) }

// Handler serves the metrics listener: /metrics, and /debug/pprof/ when
// pprof is true. Nothing else answers (404).
func (m *Metrics) Handler(withPprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// A failing collector must not hide the others.
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             10 * time.Second,
	}))
	if withPprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// RPC records one answered RPC.
func (m *Metrics) RPC(procedure, code string, took time.Duration) {
	if m == nil {
		return
	}
	m.rpcRequests.WithLabelValues(procedure, code).Inc()
	m.rpcDuration.WithLabelValues(procedure, code).Observe(took.Seconds())
}

// HTTP records one request to a plain HTTP route.
func (m *Metrics) HTTP(route string, status int, took time.Duration) {
	if m == nil {
		return
	}
	m.httpRequests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.httpDuration.WithLabelValues(route).Observe(took.Seconds())
}

// Panic counts a panic the server recovered from a handler
// (server.Options.Panicked).
func (m *Metrics) Panic(route string) {
	if m == nil {
		return
	}
	m.panics.WithLabelValues(route).Inc()
}

// PanicRoutes creates the panic counter's series of these routes at zero
// (server.Server.PanicRoutes: every label it can count), so that an alert
// on any increase sees the first panic as one.
func (m *Metrics) PanicRoutes(routes []string) {
	if m == nil {
		return
	}
	for _, r := range routes {
		m.panics.WithLabelValues(r)
	}
}

// PaymentSeries creates the payment domain's series at zero, each a
// gateway and a status (transitions), a currency (captured money) or an
// outcome (callbacks, refunds): payment.KnownMetricLabels. The money
// settled and refunded, which no alert watches, appear with their first
// event.
func (m *Metrics) PaymentSeries(transitions, captured, callbacks, refunds [][2]string) {
	if m == nil {
		return
	}
	for _, set := range []struct {
		vec    *prometheus.CounterVec
		labels [][2]string
	}{{m.transitions, transitions}, {m.capturedCents, captured}, {m.callbacks, callbacks}, {m.refunds, refunds}} {
		for _, l := range set.labels {
			set.vec.WithLabelValues(l[0], l[1])
		}
	}
}

// SecondFactorRefused implements identity.SecondFactorMetrics.
func (m *Metrics) SecondFactorRefused(outcome string) {
	if m == nil {
		return
	}
	m.secondFactor.WithLabelValues(outcome).Inc()
}

// PaymentTransition implements payment.Metrics.
func (m *Metrics) PaymentTransition(gateway, status string, amount money.Amount, currency string) {
	if m == nil {
		return
	}
	m.transitions.WithLabelValues(gateway, status).Inc()
	if status == "success" {
		m.settledCents.WithLabelValues(gateway, currency).Add(float64(amount.Cents()))
	}
}

// MoneyCaptured implements payment.Metrics.
func (m *Metrics) MoneyCaptured(gateway string, amount money.Amount, currency string) {
	if m == nil {
		return
	}
	m.capturedCents.WithLabelValues(gateway, currency).Add(float64(amount.Cents()))
}

// CallbackOutcome implements payment.Metrics.
func (m *Metrics) CallbackOutcome(gateway, outcome string) {
	if m == nil {
		return
	}
	m.callbacks.WithLabelValues(gateway, outcome).Inc()
}

// RefundOutcome implements payment.Metrics.
func (m *Metrics) RefundOutcome(gateway, outcome string, amount money.Amount, currency string) {
	if m == nil {
		return
	}
	m.refunds.WithLabelValues(gateway, outcome).Inc()
	if outcome == "succeeded" {
		m.refundedCents.WithLabelValues(gateway, currency).Add(float64(amount.Cents()))
	}
}

// PluginCall records one call of a plugin function.
func (m *Metrics) PluginCall(pluginName, fn string, took time.Duration, err error) {
	if m == nil {
		return
	}
	m.pluginDuration.WithLabelValues(pluginName, fn).Observe(took.Seconds())
	if err != nil {
		m.pluginErrors.WithLabelValues(pluginName, fn, pluginErrorKind(err)).Inc()
	}
}

// pluginErrorKind classifies a failed call for the kind label: an open
// circuit (nothing was sent), else the plugin runtime's kind.
func pluginErrorKind(err error) string {
	if errors.Is(err, outbound.ErrCircuitOpen) {
		return "circuit_open"
	}
	if ce, ok := errors.AsType[*plugin.CallError](err); ok {
		return string(ce.Kind)
	}
	return "other"
}
