package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"

	"connectrpc.com/connect"

	"github.com/rustbill/paymentd/internal/rpcanswer"
	"github.com/rustbill/paymentd/internal/text"
)

// panicMessage is all a client learns of a panic. The panic's value and
// stack may hold whatever the handler had in hand (a key, a callback's
// payload), so they go to the log alone.
const panicMessage = "internal error"

// panicValueMax bounds the panic's value in its log line; the stack is
// logged whole.
const panicValueMax = 2000

// recoverer turns a handler's panic into an answer: Internal in the
// caller's RPC protocol (500 "internal error" to plain HTTP), one ERROR
// line with the value and the stack, and a count by route. Without it a
// panic reaches net/http, which logs it on its own logger, resets the
// HTTP/2 stream or closes the HTTP/1.1 connection (taking a keep-alive
// client's next request with it), and counts nothing.
//
// It recovers at two places, both built by this package:
//
//   - Inside every Connect handler, as its innermost interceptor
//     (connect.WithRecover, HandlerOptionsAround): the interceptors
//     outside see an Internal error like any other, so the RPC's access
//     line, paymentd_rpc_requests_total{code="internal"} and the
//     idempotency key's outcome are written as for a returned error. The
//     label is the procedure.
//
//   - Around the whole handler tree, inside Options.Observe (New): the
//     plain routes (callbacks, CSV exports, the console, /ready,
//     reflection) and any layer in front of a Connect handler (the limits,
//     the credential layers, CORS, the interceptors outside the recovery
//     above). The label is the mounted path (routeLabels).
//
// The layers between the two release what they hold in defers (the
// concurrency limiter's slot, the body reader's budget), so a panic
// unwinding through them leaks neither. Either place lets net/http's
// http.ErrAbortHandler through: it is how a handler ends a response on
// purpose.
type recoverer struct {
	log   *slog.Logger
	count func(route string) // nil: not counted
}

// record logs and counts one panic. It runs in the deferred function that
// recovered, on the panicking goroutine's stack, so the stack it logs
// still holds the frames that panicked.
func (p recoverer) record(ctx context.Context, v any, attrs ...slog.Attr) {
	attrs = append(attrs,
		slog.String("panic", text.Clip(fmt.Sprint(v), panicValueMax)),
		slog.String("stack", string(debug.Stack())))
	p.log.LogAttrs(ctx, slog.LevelError, "handler panicked", attrs...)
}

// rpc is the connect.WithRecover handler: the panic becomes the call's
// Internal error. connect-go re-panics http.ErrAbortHandler itself.
func (p recoverer) rpc(ctx context.Context, spec connect.Spec, _ http.Header, v any) error {
	p.record(ctx, v, slog.String("procedure", spec.Procedure))
	if p.count != nil {
		p.count(spec.Procedure)
	}
	return connect.NewError(connect.CodeInternal, errors.New(panicMessage))
}

// wrap recovers a panic anywhere in next. Nothing of the answer written
// yet: Internal in the caller's protocol, or 500 "internal error" as
// plain text (the body a gateway's callback gets for any failure, so it
// retries). Part of it written already: anything more would corrupt it,
// so the response is aborted as http.ErrAbortHandler does (the HTTP/2
// stream reset, the HTTP/1.1 connection closed) without net/http's own
// log line.
func (p recoverer) wrap(label func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &startedWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			// net/http compares with ==, and so does connect-go.
			if v == http.ErrAbortHandler {
				panic(v)
			}
			route := label(r)
			p.record(r.Context(), v, slog.String("route", route), slog.String("method", r.Method),
				slog.String("path", text.Clip(r.URL.Path, 200)), slog.Bool("answer_started", sw.started))
			if p.count != nil {
				p.count(route)
			}
			if sw.started {
				panic(http.ErrAbortHandler)
			}
			resetHeader(w.Header())
			rpcanswer.Error(w, r, connect.CodeInternal, panicMessage)
		}()
		next.ServeHTTP(sw, r)
	})
}

// resetHeader drops the headers the handler set for the answer it did not
// finish (a length, an encoding, caching, a file name, gRPC trailers),
// keeping those of the layers in front of it: the request id (Observe)
// and CORS's, without which a browser could not read the error.
func resetHeader(h http.Header) {
	for k := range h {
		if k == "X-Request-Id" || k == "Vary" || strings.HasPrefix(k, "Access-Control-") {
			continue
		}
		delete(h, k)
	}
}

// startedWriter notes whether any of the answer has gone out: a status, a
// byte of the body or a flush. It keeps Flush (gRPC and the CSV exports
// need it) and Unwrap (http.ResponseController: read and write deadlines).
type startedWriter struct {
	http.ResponseWriter
	started bool
}

func (w *startedWriter) WriteHeader(code int) {
	// An informational answer (103 Early Hints) is not the answer.
	if code >= 200 {
		w.started = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *startedWriter) Write(b []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(b)
}

func (w *startedWriter) Flush() {
	w.started = true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *startedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// labelOf is the value of routeLabels' mux: the label of a pattern.
type labelOf string

func (labelOf) ServeHTTP(http.ResponseWriter, *http.Request) {}

// routeLabels names the route of a request for the panic counter, from
// what New mounts: a service's path (/billing.payment.PaymentService/,
// for a panic in a layer in front of its handler), a route's pattern
// without its method (/callbacks/, /export/payments.csv), /ready, the
// reflection services' paths, the admin path; "other" for the rest. Never
// the client's path: a client choosing paths must not create series. It
// also returns every label it can give, with the procedures of the
// services (the labels of the Connect handlers' recovery): all the routes
// the counter can count.
func routeLabels(opts Options, reflection ...string) (label func(*http.Request) string, all []string) {
	names := http.NewServeMux()
	add := func(pattern string) {
		path := pattern
		if _, p, ok := strings.Cut(pattern, " "); ok {
			path = p // "GET /export/payments.csv"
		}
		names.Handle(pattern, labelOf(path))
		all = append(all, path)
	}
	for _, svc := range opts.Services {
		add(svc.Path)
		all = append(all, procedures(svc.Name)...)
	}
	for _, r := range opts.Routes {
		add(r.Pattern)
	}
	for _, p := range reflection {
		add(p)
	}
	add("GET /ready")
	admin := opts.AdminPath
	if opts.AdminUI != nil {
		all = append(all, admin)
	}
	all = append(all, "other")
	slices.Sort(all)
	return func(r *http.Request) string {
		if opts.AdminUI != nil && (r.URL.Path == admin || strings.HasPrefix(r.URL.Path, admin+"/")) {
			return admin
		}
		if h, _ := names.Handler(r); h != nil {
			if l, ok := h.(labelOf); ok {
				return string(l)
			}
		}
		return "other"
	}, slices.Compact(all)
}
