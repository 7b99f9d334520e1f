package observe

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/metrics"
	"github.com/rustbill/paymentd/internal/text"
)

// RequestIDHeader carries the request id both ways.
const RequestIDHeader = "X-Request-Id"

// Options build an Observer.
type Options struct {
	Logger *slog.Logger
	// Metrics may be nil (nothing is counted).
	Metrics *metrics.Metrics
	// Tracer and Propagator are nil while tracing is off.
	Tracer     trace.Tracer
	Propagator propagation.TextMapPropagator
	// AdminPath is [server].admin_path, to name the console's route.
	AdminPath string
}

// Observer is the request path's logs, metrics and traces.
type Observer struct {
	log        *slog.Logger
	metrics    *metrics.Metrics
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	adminPath  string
}

// New returns an Observer.
func New(o Options) *Observer {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Observer{log: o.Logger, metrics: o.Metrics, tracer: o.Tracer, propagator: o.Propagator, adminPath: o.AdminPath}
}

// route names a path for metrics and span names, from a fixed set: a
// client choosing paths must not create series.
func (o *Observer) route(path string) string {
	switch {
	case strings.HasPrefix(path, "/callbacks/"):
		return "/callbacks/{gateway_interface_id}"
	case path == "/health", path == "/ready", path == "/export/payments.csv", path == "/export/refunds.csv", path == "/export/invoices.csv":
		return path
	case strings.HasPrefix(path, "/grpc.reflection."):
		return "reflection"
	case o.adminPath != "" && (path == o.adminPath || strings.HasPrefix(path, o.adminPath+"/")):
		return o.adminPath
	case isRPCPath(path):
		return "rpc"
	}
	return "other"
}

// isRPCPath reports whether path looks like /package.Service/Method: the
// RPC interceptor accounts for those it serves.
func isRPCPath(path string) bool {
	svc, method, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return ok && strings.Contains(svc, ".") && method != "" && !strings.Contains(method, "/")
}

// Middleware is the outermost layer; see the package comment.
func (o *Observer) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(RequestIDHeader)
		if !logging.ValidRequestID(id) {
			id = logging.NewRequestID()
		}
		w.Header().Set(RequestIDHeader, id)
		ctx, scope := logging.NewScope(r.Context(), id)
		route := o.route(r.URL.Path)

		var span trace.Span
		if o.tracer != nil {
			opts := []trace.SpanStartOption{
				trace.WithSpanKind(trace.SpanKindServer),
				// The caller is not trusted to decide what this service
				// records: its trace is linked, not continued.
				trace.WithNewRoot(),
				trace.WithAttributes(
					attribute.String("http.request.method", r.Method),
					attribute.String("http.route", route),
					attribute.String("request.id", id),
				),
			}
			if o.propagator != nil {
				remote := trace.SpanContextFromContext(o.propagator.Extract(ctx, propagation.HeaderCarrier(r.Header)))
				if remote.IsValid() {
					opts = append(opts, trace.WithLinks(trace.Link{SpanContext: remote}))
				}
			}
			ctx, span = o.tracer.Start(ctx, r.Method+" "+route, opts...)
		}

		rec := &recorder{ResponseWriter: w}
		defer func() {
			took := time.Since(start)
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			if span != nil {
				span.SetAttributes(attribute.Int("http.response.status_code", status))
				if status >= 500 {
					span.SetStatus(codes.Error, http.StatusText(status))
				}
				span.End()
			}
			if scope.Logged() {
				return // the RPC interceptor counted and logged it
			}
			// Plain routes, and RPC paths answered before any service
			// (rate limited, unknown procedure) under route "rpc".
			o.metrics.HTTP(route, status, took)
			level := slog.LevelInfo
			switch {
			case route == "/health", route == o.adminPath && status < 400:
				level = slog.LevelDebug
			case status >= 500:
				level = slog.LevelWarn
			}
			o.log.LogAttrs(ctx, level, "http", slog.String("method", r.Method), slog.String("path", text.Clip(r.URL.Path, 200)),
				slog.String("route", route), slog.Int("status", status), slog.Int64("bytes", rec.bytes),
				slog.Float64("duration_ms", ms(took)), slog.String("remote_addr", r.RemoteAddr),
				slog.String("user_agent", text.Clip(r.UserAgent(), 200)))
		}()
		next.ServeHTTP(rec, r.WithContext(ctx))
	})
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// recorder notes the status and size of an answer. It keeps Flush (gRPC
// needs it for trailers) and Unwrap (http.ResponseController).
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

func (r *recorder) Flush() {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// StartCall implements gateway.CallObserver: a span per plugin call and
// the plugin_call_* metrics.
func (o *Observer) StartCall(ctx context.Context, plugin, fn string) (context.Context, func(error)) {
	start := time.Now()
	var span trace.Span
	if o.tracer != nil {
		ctx, span = o.tracer.Start(ctx, "plugin "+plugin+"."+fn, trace.WithAttributes(
			attribute.String("plugin.name", plugin), attribute.String("plugin.function", fn)))
	}
	return ctx, func(err error) {
		o.metrics.PluginCall(plugin, fn, time.Since(start), err)
		if span != nil {
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, "plugin call failed")
			}
			span.End()
		}
	}
}
