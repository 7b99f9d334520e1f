package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

func decode(t *testing.T, b *bytes.Buffer) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(b.Bytes(), &m), b.String())
	b.Reset()
	return m
}

func TestScopeAttributesReachLinesLoggedWithTheRequestContext(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(WithContext(slog.NewJSONHandler(&buf, nil)))
	ctx, scope := NewScope(context.Background(), "req-1")
	derived := context.WithValue(ctx, struct{}{}, 1) // derived before the attribute is known

	Add(ctx, slog.String("procedure", "/p.S/M"), slog.String("payment_id", "p-1"))
	Add(ctx, slog.String("payment_id", "p-2")) // replaces
	log.InfoContext(derived, "hello", "order_id", "o-1", "payment_id", "own")
	m := decode(t, &buf)
	require.Equal(t, "req-1", m["request_id"])
	require.Equal(t, "/p.S/M", m["procedure"])
	require.Equal(t, "own", m["payment_id"], "the line's own attribute wins")
	require.Equal(t, "o-1", m["order_id"])
	v, ok := scope.Attr("payment_id")
	require.True(t, ok)
	require.Equal(t, "p-2", v.String())

	log.Info("no context")
	require.NotContains(t, decode(t, &buf), "request_id")
	Add(context.Background(), slog.String("x", "y")) // outside a request: nothing happens
	require.Empty(t, RequestID(context.Background()))
	require.Equal(t, "req-1", RequestID(derived))
}

func TestTraceAndSpanIDsAreAddedFromTheContextsSpan(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := Contextual(slog.New(slog.NewJSONHandler(&buf, nil)))
	require.Same(t, log, Contextual(log), "wrapped once")
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5}, TraceFlags: trace.FlagsSampled,
	})
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "traced")
	m := decode(t, &buf)
	require.Equal(t, sc.TraceID().String(), m["trace_id"])
	require.Equal(t, sc.SpanID().String(), m["span_id"])
	require.NotContains(t, m, "request_id")
}

func TestValidRequestIDKeepsTokensAndRefusesWhatCouldForgeALine(t *testing.T) {
	t.Parallel()
	for id, ok := range map[string]bool{
		"support-ticket-42": true, "01HZX3M9Q2": true, "a:b/c+d=e.f_g": true,
		"": false, "two words": false, "line\nbreak": false, `quote"`: false, "ü": false,
		string(make([]byte, 129)): false,
	} {
		require.Equal(t, ok, ValidRequestID(id), "%q", id)
	}
	require.Regexp(t, `^[0-9a-f]{32}$`, NewRequestID())
	require.NotEqual(t, NewRequestID(), NewRequestID())
}
