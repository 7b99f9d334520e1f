package logging

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// BackgroundSpan starts the span of one unit of background work: an event
// handled, a periodic task's run, a reconciliation round, a plugin scan, a
// notification delivered. Lines logged with the returned context carry its
// trace_id and span_id (ContextHandler), as a request's lines carry the
// request's. Under a context that has a span already (an admin's reload
// scanning the plugins) it is a child of that span; otherwise it starts a
// trace of its own.
//
// tracer is nil while tracing is off: then ctx comes back unchanged with
// the no-op span of an empty context, and nothing is allocated. Set
// attributes only when span.IsRecording(), so that building them costs
// nothing either.
func BackgroundSpan(ctx context.Context, tracer trace.Tracer, name string) (context.Context, trace.Span) {
	if tracer == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal))
}
