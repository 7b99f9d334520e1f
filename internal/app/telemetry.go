package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"go.opentelemetry.io/otel/trace"

	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/concurrency"
	"github.com/rustbill/paymentd/internal/metrics"
	"github.com/rustbill/paymentd/internal/observe"
	"github.com/rustbill/paymentd/internal/tracing"
)

// telemetry is the App's metrics, tracing and request observer
// (docs/operations.md).
type telemetry struct {
	metrics  *metrics.Metrics
	tracing  *tracing.Tracing
	observer *observe.Observer
}

// startTelemetry builds the metrics registry (always: counting is cheap,
// [metrics].enabled only decides whether a listener serves it) and
// tracing as [tracing] says.
func (a *App) startTelemetry(ctx context.Context) error {
	a.tel.metrics = metrics.New()
	to := a.cfg.Tracing.Options()
	to.Version, to.Logger, to.Exporter = buildVersion(), a.log, a.opts.spanExporter
	t, err := tracing.New(ctx, to)
	if err != nil {
		return err
	}
	a.tel.tracing = t
	o := observe.Options{Logger: a.log, Metrics: a.tel.metrics, AdminPath: a.cfg.Server.AdminPath}
	if t.Enabled() {
		o.Tracer, o.Propagator = t.Tracer(), t.Propagator()
	}
	a.tel.observer = observe.New(o)
	return nil
}

// backgroundTracer starts the spans of background work (an event handled,
// a periodic task or housekeeping round, a reconciliation round, a plugin
// scan, a notification delivered), so that their log lines carry a trace
// id as requests' do. It is nil while tracing is off: then they start no
// span and cost nothing.
func (a *App) backgroundTracer() trace.Tracer {
	if !a.tel.tracing.Enabled() {
		return nil
	}
	return a.tel.tracing.Tracer()
}

// interceptors come first in every service's handler options: the
// observer (procedure, principal, ids, rpc metrics and access line), then
// otelconnect's RPC span when tracing is on.
func (a *App) interceptors() ([]connect.Interceptor, error) {
	is := []connect.Interceptor{a.tel.observer.Interceptor()}
	if a.tel.tracing.Enabled() {
		otel, err := otelconnect.NewInterceptor(
			otelconnect.WithTracerProvider(a.tel.tracing.Provider()),
			otelconnect.WithPropagator(a.tel.tracing.Propagator()),
			otelconnect.WithoutMetrics(),
		)
		if err != nil {
			return nil, fmt.Errorf("[tracing]: %w", err)
		}
		is = append(is, otel)
	}
	return is, nil
}

// registerCollectors puts what is read at scrape time on the registry: the
// pool, the limiter, the breakers, the leader roles, the queues and the
// commits waiting for a synchronous standby.
func (a *App) registerCollectors(limiter *concurrency.Limiter) error {
	m := a.tel.metrics
	return errors.Join(
		m.RegisterPool(a.pool),
		m.RegisterLimiter(limiter, concurrency.LeftReasons),
		m.RegisterBreakers(a.outbound.Breakers),
		m.RegisterLeaders(map[string]func() bool{
			cluster.RoleBilling:     a.bg.billing.IsLeader,
			cluster.RoleEventWorker: a.bg.eventLead.IsLeader,
		}),
		m.RegisterQueues(a.pool, metrics.QueueOptions{Timeout: a.opts.dbScrape.Timeout, MaxAge: a.opts.dbScrape.MaxAge,
			Logger: a.log, PartlyPaidPastTermination: a.bg.renewals.PartlyPaidPastTermination}),
		m.RegisterSyncReplication(a.pool.Config().ConnConfig, metrics.QueueOptions{Timeout: a.opts.dbScrape.Timeout, MaxAge: a.opts.dbScrape.MaxAge, Logger: a.log}),
	)
}

// Metrics is the App's registry and instruments.
func (a *App) Metrics() *metrics.Metrics { return a.tel.metrics }

// ListenMetrics opens [metrics].host:port; nil when [metrics].enabled is
// false.
func (a *App) ListenMetrics() (net.Listener, error) {
	if !a.cfg.Metrics.Enabled {
		return nil, nil
	}
	ln, err := net.Listen("tcp", a.cfg.Metrics.Addr())
	if err != nil {
		return nil, fmt.Errorf("listen on %s ([metrics].host and [metrics].port): %w", a.cfg.Metrics.Addr(), err)
	}
	return ln, nil
}

// serveMetrics answers /metrics (and pprof when configured) on ln until
// the returned stop is called.
func (a *App) serveMetrics(ln net.Listener) (stop func()) {
	srv := &http.Server{
		Handler:           a.tel.metrics.Handler(a.cfg.Metrics.Pprof),
		ReadHeaderTimeout: 10 * time.Second,
		// pprof's CPU profile and trace run for up to their ?seconds=.
		WriteTimeout: 2 * time.Minute,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("metrics listener failed", "err", err)
		}
	}()
	a.log.Info("metrics listening", "addr", ln.Addr().String(), "pprof", a.cfg.Metrics.Pprof)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
}

// ServeWithMetrics is Serve with the metrics listener served beside it
// (mln nil: none).
func (a *App) ServeWithMetrics(ctx context.Context, ln, mln net.Listener) error {
	if mln != nil {
		defer a.serveMetrics(mln)()
	}
	return a.Serve(ctx, ln)
}

// closeTelemetry flushes the spans still buffered.
func (a *App) closeTelemetry() {
	if a.tel.tracing == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.tel.tracing.Shutdown(ctx); err != nil {
		a.log.Warn("tracing: spans not flushed", "err", err)
	}
}
