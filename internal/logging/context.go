package logging

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/trace"
)

// Scope is what the log lines of one request share: the request id, and
// what the layers learn on the way (procedure, principal, payment and order
// ids). The edge middleware puts one in the request's context; every later
// layer adds to the same Scope, so a line logged anywhere with that context
// — or a context derived from it, even one derived before the attribute was
// added — carries everything known so far.
type Scope struct {
	requestID string

	mu    sync.Mutex
	attrs []slog.Attr
	// logged is set when the RPC interceptor wrote the request's access
	// line, so the edge middleware does not write a second one.
	logged bool
}

type scopeKey struct{}

// NewScope returns ctx carrying a new Scope for a request with id requestID.
func NewScope(ctx context.Context, requestID string) (context.Context, *Scope) {
	s := &Scope{requestID: requestID}
	return context.WithValue(ctx, scopeKey{}, s), s
}

// ScopeFrom returns the request's Scope, nil outside a request.
func ScopeFrom(ctx context.Context) *Scope {
	s, _ := ctx.Value(scopeKey{}).(*Scope)
	return s
}

// RequestID is the id of the request ctx belongs to, "" outside a request.
func RequestID(ctx context.Context) string {
	if s := ScopeFrom(ctx); s != nil {
		return s.requestID
	}
	return ""
}

// Add records attributes for every later log line of the request; an
// attribute replaces an earlier one of the same key. Outside a request it
// does nothing. Never add a secret.
func Add(ctx context.Context, attrs ...slog.Attr) {
	s := ScopeFrom(ctx)
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range attrs {
		if i := slices.IndexFunc(s.attrs, func(b slog.Attr) bool { return b.Key == a.Key }); i >= 0 {
			s.attrs[i] = a
		} else {
			s.attrs = append(s.attrs, a)
		}
	}
}

// Attr returns the value of a recorded attribute.
func (s *Scope) Attr(key string) (slog.Value, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.attrs {
		if a.Key == key {
			return a.Value, true
		}
	}
	return slog.Value{}, false
}

// MarkLogged notes that the request's access line was written.
func (s *Scope) MarkLogged() {
	s.mu.Lock()
	s.logged = true
	s.mu.Unlock()
}

// Logged reports whether MarkLogged was called.
func (s *Scope) Logged() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logged
}

func (s *Scope) snapshot() []slog.Attr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.attrs)
}

// NewRequestID is a fresh request id: 16 random bytes in hex.
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ValidRequestID reports whether a client's X-Request-Id can be kept: 1 to
// 128 characters of letters, digits and "-_.:/+=". Anything else (too long,
// spaces, control characters that could forge log lines) is replaced.
func ValidRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-', c == '_', c == '.', c == ':', c == '/', c == '+', c == '=':
		default:
			return false
		}
	}
	return true
}

// ContextHandler adds to every record the request's id and Scope
// attributes, and the trace_id and span_id of the context's span, unless
// the record already has an attribute of that key.
type ContextHandler struct {
	next slog.Handler
}

// WithContext wraps h in a ContextHandler (once: a ContextHandler is
// returned as it is).
func WithContext(h slog.Handler) slog.Handler {
	if _, ok := h.(*ContextHandler); ok {
		return h
	}
	return &ContextHandler{next: h}
}

// Contextual returns log with a ContextHandler; nil stays nil.
func Contextual(log *slog.Logger) *slog.Logger {
	if log == nil {
		return nil
	}
	if _, ok := log.Handler().(*ContextHandler); ok {
		return log
	}
	return slog.New(WithContext(log.Handler()))
}

func (h *ContextHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *ContextHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx == nil {
		return h.next.Handle(ctx, r)
	}
	s := ScopeFrom(ctx)
	sc := trace.SpanContextFromContext(ctx)
	if s == nil && !sc.IsValid() {
		return h.next.Handle(ctx, r)
	}
	var have map[string]bool
	if r.NumAttrs() > 0 {
		have = make(map[string]bool, r.NumAttrs())
		r.Attrs(func(a slog.Attr) bool {
			have[a.Key] = true
			return true
		})
	}
	r = r.Clone()
	add := func(a slog.Attr) {
		if !have[a.Key] {
			r.AddAttrs(a)
		}
	}
	if s != nil {
		add(slog.String("request_id", s.requestID))
		for _, a := range s.snapshot() {
			add(a)
		}
	}
	if sc.IsValid() {
		add(slog.String("trace_id", sc.TraceID().String()))
		add(slog.String("span_id", sc.SpanID().String()))
	}
	return h.next.Handle(ctx, r)
}

func (h *ContextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &ContextHandler{next: h.next.WithAttrs(attrs)}
}

func (h *ContextHandler) WithGroup(name string) slog.Handler {
	return &ContextHandler{next: h.next.WithGroup(name)}
}
