package outbound

import (
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// With tracing on, every attempt carries the call's trace context, and the
// call is one client span naming the host, never the path or query.
func TestTracingSendsTraceparentOnEveryAttemptAndRecordsASpan(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int64) {
		mu.Lock()
		got = append(got, r.Header.Get("Traceparent"))
		mu.Unlock()
		if hit == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	b := setup(t, Options{Tracer: tp.Tracer("test"), Propagator: propagation.TraceContext{}})

	ctx, parent := tp.Tracer("test").Start(t.Context(), "caller")
	resp, err := b.do(ctx, http.MethodGet, s.URL+"/api.php?key=secret", "", false)
	parent.End()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 2, "a retried GET")
	for _, tp := range got {
		require.Regexp(t, `^00-`+parent.SpanContext().TraceID().String()+`-[0-9a-f]{16}-01$`, tp)
	}
	var call sdktrace.ReadOnlySpan
	for _, sp := range exp.GetSpans().Snapshots() {
		if sp.Name() == "HTTP GET" {
			call = sp
		}
	}
	require.NotNil(t, call)
	require.Equal(t, parent.SpanContext().SpanID(), call.Parent().SpanID())
	for _, a := range call.Attributes() {
		require.NotContains(t, a.Value.Emit(), "secret", "no query string in the span")
	}
}

func TestWithoutTracingNoTraceparentIsSent(t *testing.T) {
	t.Parallel()
	var header string
	s := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		header = r.Header.Get("Traceparent")
		w.WriteHeader(http.StatusOK)
	})
	b := setup(t, Options{})
	_, err := b.get(t, s.URL)
	require.NoError(t, err)
	require.Empty(t, header)
}
