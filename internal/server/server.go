package server

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"

	"github.com/rustbill/paymentd/internal/rpc"
)

// Pinger is what readiness needs of the database pool.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Service is one Connect service to mount: its name (for reflection) and the
// path and handler that the generated New<Service>Handler returns.
type Service struct {
	Name    string
	Path    string
	Handler http.Handler
}

// Middleware wraps a handler; in a list, layers are applied so that the
// first in the list sees the request first.
type Middleware func(http.Handler) http.Handler

// Route is a plain HTTP route (a ServeMux pattern) that is no Connect
// service: it passes the limits, and is not listed in gRPC reflection. It
// passes the credential layers only when Authenticated (the CSV exports
// check the principal themselves; a gateway's callback has none).
type Route struct {
	Pattern       string
	Handler       http.Handler
	Authenticated bool
}

// The defaults New applies to a zero option; config.Default() starts
// [server] from the same values.
const (
	DefaultAdminPath       = "/admin"
	DefaultMaxRequestBytes = 1 << 20
	DefaultShutdownTimeout = 15 * time.Second
	DefaultReadTimeout     = 10 * time.Second
	// Go's own default is 250; a client needs far fewer.
	DefaultMaxConcurrentStreams = 100
)

// Options are the parts a Server is built from: the listener's settings
// ([server], mapped by config.Server.Options) and what internal/app adds.
type Options struct {
	// Addr is the host:port Listen opens.
	Addr string
	// TLSCertFile and TLSKeyFile, when set, serve TLS; empty serves
	// cleartext HTTP/1.1 and HTTP/2.
	TLSCertFile string
	TLSKeyFile  string
	// MaxRequestBytes bounds a request's body (and a Connect message).
	MaxRequestBytes int
	// ShutdownTimeout is how long requests in flight get to finish once
	// Serve's context is cancelled.
	ShutdownTimeout time.Duration
	// ReadTimeout bounds reading a request's headers, and then its body,
	// each; a client slower than that is cut off.
	ReadTimeout time.Duration
	// MaxConcurrentStreams bounds the requests one HTTP/2 connection may
	// have open at once.
	MaxConcurrentStreams int
	// CORSAllowedOrigins are the browser origins whose pages may call the
	// API with gRPC-Web and Connect.
	CORSAllowedOrigins []string
	// AdminPath is where AdminUI is served.
	AdminPath string

	DB       Pinger
	Logger   *slog.Logger
	Services []Service
	// Limits wrap every service and route (the concurrency limit, the rate
	// limit); Credentials wrap the services only (the credential layers).
	Limits      []Middleware
	Routes      []Route
	Credentials []Middleware
	// AdminUI is the built admin console (adminui.Dist()), served under
	// AdminPath; nil serves none.
	AdminUI fs.FS
	// Observe, when set, wraps everything, /health and the console
	// included: request ids, traces and access lines cover every request.
	Observe Middleware
	// Panicked, when set, counts a panic recovered from a handler, by
	// route: the procedure of an RPC, else the path New mounted it at
	// (recover.go). HandlerOptions reads it too.
	Panicked func(route string)
}

// defaults fills the zero settings; a negative one counts as zero.
func (o *Options) defaults() {
	o.AdminPath = cmp.Or(o.AdminPath, DefaultAdminPath)
	o.MaxRequestBytes = cmp.Or(max(o.MaxRequestBytes, 0), DefaultMaxRequestBytes)
	o.ShutdownTimeout = cmp.Or(max(o.ShutdownTimeout, 0), DefaultShutdownTimeout)
	o.ReadTimeout = cmp.Or(max(o.ReadTimeout, 0), DefaultReadTimeout)
	o.MaxConcurrentStreams = cmp.Or(max(o.MaxConcurrentStreams, 0), DefaultMaxConcurrentStreams)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Server is the HTTP listener and its handler tree.
type Server struct {
	opts    Options
	log     *slog.Logger
	handler http.Handler
	http    *http.Server
	bodies  *bodyReader
	// panicRoutes are the routes Options.Panicked can be given.
	panicRoutes []string
}

// PanicRoutes lists every route Options.Panicked can be given: each
// service's procedures and path, the routes' paths, /ready, reflection,
// the admin path when the console is served, and "other". The service
// creates their series of paymentd_panics_total at zero.
func (s *Server) PanicRoutes() []string { return slices.Clone(s.panicRoutes) }

// HandlerOptions returns the Connect options every service handler is built
// with: the extra interceptors (outermost first), request validation, the
// one mapping of domain errors to Connect codes (handlers return their
// errors as they are), the recovery of a handler's panic (innermost: the
// panic is an Internal error to every interceptor) and the request size
// limit of opts (the same options the Server is built from).
func HandlerOptions(opts Options, log *slog.Logger, extra ...connect.Interceptor) ([]connect.HandlerOption, error) {
	return HandlerOptionsAround(opts, log, extra, nil)
}

// HandlerOptionsAround is HandlerOptions with interceptors on both sides
// of validation: outer ones see every request (authorization), inner ones
// only valid requests, and the codes the error mapping gives (the
// idempotency keys).
func HandlerOptionsAround(opts Options, log *slog.Logger, outer, inner []connect.Interceptor) ([]connect.HandlerOption, error) {
	opts.defaults()
	validate, err := NewValidateInterceptor()
	if err != nil {
		return nil, err
	}
	interceptors := append(append([]connect.Interceptor(nil), outer...), validate)
	interceptors = append(append(interceptors, inner...), rpc.NewErrorInterceptor(log))
	if log == nil {
		log = opts.Logger
	}
	panics := recoverer{log: log, count: opts.Panicked}
	return []connect.HandlerOption{
		connect.WithInterceptors(interceptors...),
		// After the interceptors: the innermost of them.
		connect.WithRecover(panics.rpc),
		connect.WithReadMaxBytes(opts.MaxRequestBytes),
	}, nil
}

// New builds the handler tree. It does not listen: call Serve.
func New(opts Options) *Server {
	opts.defaults()
	log, readTimeout := opts.Logger, opts.ReadTimeout
	mux := http.NewServeMux()
	names := make([]string, 0, len(opts.Services))
	for _, svc := range opts.Services {
		mux.Handle(svc.Path, knownMethods(svc.Name, svc.Handler))
		names = append(names, svc.Name)
	}
	// Any other path behind the credential layers is an unknown
	// procedure, answered as an RPC error in the caller's protocol.
	mux.Handle("/", unknownProcedure())

	inner := http.NewServeMux()
	for _, r := range opts.Routes {
		if r.Authenticated {
			mux.Handle(r.Pattern, r.Handler)
			continue
		}
		inner.Handle(r.Pattern, r.Handler)
	}
	inner.Handle("/", chain(opts.Credentials, mux))
	api := chain(opts.Limits, inner)
	bodies := newBodyReader(readTimeout, opts.MaxRequestBytes)
	api = bodies.wrap(api)

	// Routes that never wait for a slot of the concurrency limit: the
	// readiness probe (a load balancer must not take an instance out
	// because its API is busy) and gRPC reflection (a bidirectional stream
	// read as it goes, so its body cannot be read ahead; it touches no
	// database). Both are bounded by the read timeout instead.
	reflector := grpcreflect.NewStaticReflector(names...)
	front := http.NewServeMux()
	readMax := connect.WithReadMaxBytes(opts.MaxRequestBytes)
	v1Path, v1 := grpcreflect.NewHandlerV1(reflector, readMax)
	front.Handle(v1Path, withReadDeadline(readTimeout, v1))
	alphaPath, alpha := grpcreflect.NewHandlerV1Alpha(reflector, readMax)
	front.Handle(alphaPath, withReadDeadline(readTimeout, alpha))
	front.Handle("GET /ready", readyHandler(opts.DB, log))
	front.Handle("/", withCORS(opts.CORSAllowedOrigins, names, api))
	var h http.Handler = front
	if opts.AdminUI != nil {
		h = withAdminUI(opts.AdminUI, opts.AdminPath, log, h)
	}
	h = withHealth(h)
	// Inside Observe, so that a recovered panic's answer is what the
	// access line and the request's span record.
	panics := recoverer{log: log, count: opts.Panicked}
	label, panicRoutes := routeLabels(opts, v1Path, alphaPath)
	h = panics.wrap(label, h)
	if opts.Observe != nil {
		h = opts.Observe(h)
	}

	s := &Server{opts: opts, log: log, handler: h, bodies: bodies, panicRoutes: panicRoutes}
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true)
	s.http = &http.Server{
		Handler:   h,
		Protocols: &protocols,
		// The body's own deadline is set per request (bodyReader,
		// withReadDeadline): http.Server's ReadTimeout would stay armed
		// while a handler runs and cancel a slow gateway call's context.
		ReadHeaderTimeout: readTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: opts.MaxConcurrentStreams},
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return s
}

// chain wraps h in layers, the first outermost.
func chain(layers []Middleware, h http.Handler) http.Handler {
	for i := len(layers) - 1; i >= 0; i-- {
		h = layers[i](h)
	}
	return h
}

// SlowRequests is the number of requests whose body did not arrive within
// [server].read_timeout_secs (answered 408 or DeadlineExceeded, and their
// connection ended).
func (s *Server) SlowRequests() uint64 { return s.bodies.cutOff.Load() }

// TooLargeRequests is the number of requests refused before the limit for
// a body longer than [server].max_request_bytes and its slack, declared or
// sent (413 or ResourceExhausted).
func (s *Server) TooLargeRequests() uint64 { return s.bodies.tooLarge.Load() }

// BufferBusyRequests is the number of requests refused because the budget
// of request buffers stayed spent until their read deadline (503 or
// Unavailable, Retry-After).
func (s *Server) BufferBusyRequests() uint64 { return s.bodies.budgetBusy.Load() }

// Handler is the complete handler tree, for tests that use httptest.
func (s *Server) Handler() http.Handler { return s.handler }

// Listen opens the configured address.
func (s *Server) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s ([server].host and [server].port): %w", s.opts.Addr, err)
	}
	return ln, nil
}

// Serve answers requests on ln until ctx is cancelled, then shuts down
// gracefully: the listener closes at once and requests in flight get up to
// [server].shutdown_timeout to finish.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	tlsOn := s.opts.TLSCertFile != ""
	if tlsOn {
		cert, err := tls.LoadX509KeyPair(s.opts.TLSCertFile, s.opts.TLSKeyFile)
		if err != nil {
			return fmt.Errorf("[server].tls_cert_file/tls_key_file: %w", err)
		}
		s.http.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	errc := make(chan error, 1)
	go func() {
		var err error
		if tlsOn {
			err = s.http.ServeTLS(ln, "", "")
		} else {
			err = s.http.Serve(ln)
		}
		errc <- err
	}()
	s.log.Info("listening", "addr", ln.Addr().String(), "tls", tlsOn)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down", "timeout", s.opts.ShutdownTimeout.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.ShutdownTimeout)
	defer cancel()
	err := s.http.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if errors.Is(err, context.DeadlineExceeded) {
		s.log.Warn("shutdown timed out; closing remaining connections")
		err = s.http.Close()
	}
	return err
}

// withHealth answers GET /health with 200 and an empty body before any other
// layer runs: a liveness probe must not queue behind the concurrency limit or
// touch the database.
func withHealth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// withAdminUI answers the console's paths before the middleware layers (see
// the package comment). A bundle that cannot be served is a build defect:
// it is logged and the console's paths answer 503, while the API keeps
// working.
func withAdminUI(dist fs.FS, prefix string, log *slog.Logger, next http.Handler) http.Handler {
	var ui http.Handler
	admin, err := newAdminUI(dist, prefix)
	if err != nil {
		log.Error("admin console not served", "err", err, "admin_path", prefix)
		ui = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "the admin console is not available in this build", http.StatusServiceUnavailable)
		})
	} else {
		ui = admin
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == prefix || strings.HasPrefix(r.URL.Path, prefix+"/") {
			ui.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// withReadDeadline gives a streaming request (gRPC reflection) until
// timeout to send all it sends.
func withReadDeadline(timeout time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
		next.ServeHTTP(w, r)
	})
}

// readyTimeout bounds one readiness check, so a hung database answers 503
// quickly instead of holding the probe.
const readyTimeout = 2 * time.Second

func readyHandler(db Pinger, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if db == nil {
			http.Error(w, "no database", http.StatusServiceUnavailable)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		if err := db.Ping(ctx); err != nil {
			log.WarnContext(r.Context(), "readiness check failed", "err", err)
			http.Error(w, "database unreachable", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
}
