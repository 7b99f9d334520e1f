package logging

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestBackgroundSpanPutsItsTraceIDOnTheLinesOfItsWork(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
	var buf bytes.Buffer
	log := slog.New(WithContext(slog.NewJSONHandler(&buf, nil)))

	ctx, span := BackgroundSpan(context.Background(), tp.Tracer("test"), "event.handle")
	require.True(t, span.IsRecording())
	log.InfoContext(ctx, "event done")
	span.End()
	m := decode(t, &buf)
	require.Equal(t, span.SpanContext().TraceID().String(), m["trace_id"])
	require.Equal(t, span.SpanContext().SpanID().String(), m["span_id"])

	// Inside a span already (a request's): a child of it, same trace.
	child, cspan := BackgroundSpan(ctx, tp.Tracer("test"), "plugin.scan")
	log.InfoContext(child, "plugin loaded")
	cspan.End()
	m = decode(t, &buf)
	require.Equal(t, span.SpanContext().TraceID().String(), m["trace_id"])
	require.NotEqual(t, span.SpanContext().SpanID().String(), m["span_id"])
	require.Len(t, exp.GetSpans(), 2)
}

func TestBackgroundSpanWithTracingOffCostsNothing(t *testing.T) {
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, span := BackgroundSpan(ctx, nil, "event.handle")
		if span.IsRecording() {
			t.Fatal("a span recorded with tracing off")
		}
		span.End()
		if c != ctx {
			t.Fatal("the context changed")
		}
	})
	require.Zero(t, allocs)

	var buf bytes.Buffer
	log := slog.New(WithContext(slog.NewJSONHandler(&buf, nil)))
	c, _ := BackgroundSpan(ctx, nil, "event.handle")
	log.InfoContext(c, "event done")
	require.NotContains(t, buf.String(), "trace_id")
}
