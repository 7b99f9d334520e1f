package outbound

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/timeout"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Defaults applied by New to every zero (or negative) field of Options.
const (
	DefaultFailureThreshold = 5
	DefaultCooldown         = 30 * time.Second
	DefaultAttempts         = 3
	DefaultBaseBackoff      = 100 * time.Millisecond
	DefaultMaxBackoff       = 2 * time.Second
	DefaultTimeout          = 10 * time.Second
	DefaultMaxResponseBytes = 1 << 20

	// backoffJitterFactor spreads each backoff wait by ±25% so that callers
	// that failed together do not retry together.
	backoffJitterFactor = 0.25
)

// Options configures a Client. Zero values take the defaults above.
type Options struct {
	// FailureThreshold is the number of consecutive failures (transport
	// errors, per-attempt timeouts, 5xx answers) that open a host's breaker.
	FailureThreshold int
	// Cooldown is how long an open breaker refuses calls before it lets one
	// probe through. Keep it above Timeout: an attempt that started before
	// the breaker opened must be over before the probe decides.
	Cooldown time.Duration
	// Attempts is the total number of attempts for a retryable call.
	Attempts int
	// BaseBackoff is the wait before the first retry; it doubles per retry up
	// to MaxBackoff, and every wait is jittered by ±25%.
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
	// Timeout bounds one attempt, from dialling to the last byte of the body.
	// The request's context deadline also applies and bounds the whole call,
	// retries and backoff included.
	Timeout time.Duration
	// MaxResponseBytes bounds a response body (after transparent gzip
	// decoding); a longer body is an error wrapping ErrResponseTooLarge.
	MaxResponseBytes int64
	// Transport defaults to a tuned *http.Transport (keep-alives, bounded
	// idle pool, TLS 1.2 or newer, proxy from the environment).
	Transport http.RoundTripper
	// Logger receives one line per breaker state change; slog.Default()
	// when nil.
	Logger *slog.Logger
	// Tracer, when set, records a client span per call (host and method,
	// never the URL's path or query), and Propagator, when set, sends the
	// caller's trace context with every attempt (W3C traceparent). Both are
	// nil while tracing is off.
	Tracer     trace.Tracer
	Propagator propagation.TextMapPropagator
}

func (o Options) withDefaults() Options {
	if o.FailureThreshold <= 0 {
		o.FailureThreshold = DefaultFailureThreshold
	}
	if o.Cooldown <= 0 {
		o.Cooldown = DefaultCooldown
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultAttempts
	}
	if o.BaseBackoff <= 0 {
		o.BaseBackoff = DefaultBaseBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.MaxBackoff < o.BaseBackoff {
		o.MaxBackoff = o.BaseBackoff
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.Transport == nil {
		o.Transport = newTransport()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// newTransport is the default transport: the stdlib defaults made explicit,
// with a minimum TLS version and a bound on response headers.
func newTransport() *http.Transport {
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    5 * time.Second,
		ExpectContinueTimeout:  1 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
	}
}

// Response is a fully read, bounded HTTP answer. Any status is a Response:
// a 4xx or a 5xx that is still 5xx after the retries is returned with a nil
// error, so the caller decides what the answer means.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// ErrResponseTooLarge is wrapped by the error of a call whose response body
// exceeds Options.MaxResponseBytes. The host did answer, so it is neither
// retried nor counted against the host's breaker.
var ErrResponseTooLarge = errors.New("response body too large")

// Client is the service's only HTTP client. It is safe for concurrent use.
type Client struct {
	opts Options
	http *http.Client
	log  *slog.Logger

	mu       sync.Mutex
	breakers map[string]*hostBreaker // by host:port, created on first use
	// tlsClients are the clients of DoTLS, one per client certificate
	// (identity), oldest first in tlsOrder, at most maxTLSClients.
	tlsClients map[string]*http.Client
	tlsOrder   []string
}

// maxTLSClients bounds the transports DoTLS keeps for client certificates
// (a few per gateway configuration that uses mutual TLS); the oldest is
// closed when another certificate comes.
const maxTLSClients = 32

// New returns a Client with o's zero fields set to their defaults.
func New(o Options) *Client {
	o = o.withDefaults()
	if o.Timeout >= o.Cooldown {
		o.Logger.Warn("outbound: timeout is not shorter than cooldown; a call started before a breaker opened may decide its half-open probe",
			"timeout", o.Timeout, "cooldown", o.Cooldown)
	}
	return &Client{
		opts:       o,
		http:       &http.Client{Transport: o.Transport, CheckRedirect: noRedirect},
		log:        o.Logger,
		breakers:   make(map[string]*hostBreaker),
		tlsClients: make(map[string]*http.Client),
	}
}

// CloseIdleConnections closes the transports' idle keep-alive connections;
// call it on shutdown.
func (c *Client) CloseIdleConnections() {
	c.http.CloseIdleConnections()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, hc := range c.tlsClients {
		hc.CloseIdleConnections()
	}
}

// noRedirect returns a redirect as the answer. Following it would send the
// call to a host whose breaker never sees it (with a client certificate,
// the certificate would go along), and would turn a POST into a GET on
// 302/303.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// DoTLS is Do with a client certificate, for gateways that demand mutual
// TLS: cfg carries the certificate (and the CA to trust, when the host's is
// private), identity names that combination (a hash of certificate, key
// and CA), so that calls with the same certificate share one transport and
// its keep-alive connections. Everything else is Do's: the host's breaker
// (the same one as for its calls without a certificate), the retry rule,
// the timeouts and the bound on the answer.
func (c *Client) DoTLS(req *http.Request, idempotent bool, identity string, cfg *tls.Config) (*Response, error) {
	if cfg == nil || identity == "" {
		return nil, errors.New("outbound: DoTLS needs a TLS configuration and its identity")
	}
	return c.do(req, idempotent, c.tlsClient(identity, cfg))
}

// tlsClient returns the client of a certificate identity, made on first
// use from the default transport's settings with cfg (TLS 1.2 at least).
func (c *Client) tlsClient(identity string, cfg *tls.Config) *http.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	if hc, ok := c.tlsClients[identity]; ok {
		return hc
	}
	tr := newTransport()
	tr.TLSClientConfig = cfg.Clone()
	if tr.TLSClientConfig.MinVersion < tls.VersionTLS12 {
		tr.TLSClientConfig.MinVersion = tls.VersionTLS12
	}
	hc := &http.Client{Transport: tr, CheckRedirect: noRedirect}
	if len(c.tlsOrder) >= maxTLSClients {
		oldest := c.tlsOrder[0]
		c.tlsOrder = c.tlsOrder[1:]
		c.tlsClients[oldest].CloseIdleConnections()
		delete(c.tlsClients, oldest)
	}
	c.tlsClients[identity] = hc
	c.tlsOrder = append(c.tlsOrder, identity)
	return hc
}

// IdempotencyKeyHeader is the header by which a caller (a plugin talking
// to Stripe, say) lets the receiver recognise a resend of one request.
const IdempotencyKeyHeader = "Idempotency-Key"

// Resendable is the retry rule: a request may be sent more than once when
// the caller says so (idempotent), when its method is GET or HEAD, or when
// it carries an Idempotency-Key — the receiver then answers a resend with
// the first answer instead of acting twice.
func Resendable(req *http.Request, idempotent bool) bool {
	switch {
	case idempotent, req.Method == "", req.Method == http.MethodGet, req.Method == http.MethodHead:
		return true
	}
	return req.Header.Get(IdempotencyKeyHeader) != ""
}

// Do sends req. idempotent says whether the caller allows a resend: a payment
// creation or a refund is never sent twice blindly, unless it carries an
// Idempotency-Key (see Resendable). GET/HEAD are always idempotent. Retries (up to Attempts, exponential backoff + jitter) happen only
// for idempotent calls and only on transport errors, 429 and 5xx; the request
// body is read once (through req.GetBody when set) and buffered, so each
// attempt sends the same bytes with a Content-Length.
//
// While the host's breaker is open Do fails at once with a *CircuitOpenError
// (errors.Is(err, ErrCircuitOpen)) and nothing is sent. Like http.Client.Do,
// Do consumes and closes req.Body. Errors name the method and host:port but
// never the URL's path or query, which may carry credentials.
func (c *Client) Do(req *http.Request, idempotent bool) (*Response, error) {
	return c.do(req, idempotent, c.http)
}

// do is Do and DoTLS, sending every attempt through hc.
func (c *Client) do(req *http.Request, idempotent bool, hc *http.Client) (resp *Response, err error) {
	if req == nil || req.URL == nil {
		return nil, errors.New("outbound: nil request or URL")
	}
	if req.Body != nil {
		defer req.Body.Close()
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	host, err := hostKey(req.URL)
	if err != nil {
		return nil, err
	}
	fail := func(err error) error { return fmt.Errorf("outbound %s %s: %w", method, host, err) }

	ctx := req.Context()
	if c.opts.Tracer != nil {
		var span trace.Span
		ctx, span = c.opts.Tracer.Start(ctx, "HTTP "+method, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("http.request.method", method), attribute.String("server.address", host)))
		req = req.WithContext(ctx)
		defer func() { endSpan(span, resp, err) }()
	}
	// A caller that has already given up must not use up a half-open probe.
	if err := ctx.Err(); err != nil {
		return nil, fail(err)
	}
	req, err = replayable(req)
	if err != nil {
		return nil, fail(err)
	}

	hb := c.breaker(host)
	exec := hb.once
	if Resendable(req, idempotent) {
		exec = hb.retrying
	}
	resp, err = exec.WithContext(ctx).GetWithExecution(func(e failsafe.Execution[*Response]) (*Response, error) {
		resp, err := c.attempt(e.Context(), hc, req)
		if err != nil && ctx.Err() != nil {
			// The caller gave up, not the host (see isHostFailure).
			err = callerGaveUp{err}
		}
		return resp, err
	})
	switch {
	case err == nil:
		return resp, nil
	case errors.Is(err, circuitbreaker.ErrOpen):
		return nil, hb.openError()
	case errors.Is(err, timeout.ErrExceeded):
		return nil, fail(fmt.Errorf("no answer within %s: %w", c.opts.Timeout, context.DeadlineExceeded))
	default:
		return nil, fail(err)
	}
}

// attempt sends one copy of req and reads the whole bounded body, so that a
// connection dropped in the middle of the body is a transport error of this
// attempt (retried, counted) rather than a surprise for the caller.
func (c *Client) attempt(ctx context.Context, hc *http.Client, req *http.Request) (*Response, error) {
	r := req.Clone(ctx)
	if r.GetBody != nil {
		r.Body, _ = r.GetBody() // replayable's GetBody cannot fail
	}
	if c.opts.Propagator != nil {
		c.opts.Propagator.Inject(ctx, propagation.HeaderCarrier(r.Header))
	}
	resp, err := hc.Do(r)
	if err != nil {
		// *url.Error repeats the full URL, query string included.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, err
	}
	defer resp.Body.Close()

	limit := c.opts.MaxResponseBytes
	if resp.ContentLength > limit && r.Method != http.MethodHead {
		return nil, fmt.Errorf("%w: status %d, %d bytes announced, limit %d", ErrResponseTooLarge, resp.StatusCode, resp.ContentLength, limit)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading response body: %w", err)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("%w: status %d, more than %d bytes", ErrResponseTooLarge, resp.StatusCode, limit)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// endSpan records a call's outcome on its span: the status of the answer,
// or the error (an error status also for a 5xx answer).
func endSpan(span trace.Span, resp *Response, err error) {
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case resp != nil:
		span.SetAttributes(attribute.Int("http.response.status_code", resp.Status))
		if resp.Status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(resp.Status))
		}
	}
	span.End()
}

// replayable returns a copy of req whose body is read into memory once, so
// that every attempt sends the same bytes and no attempt can fail, inside
// the breaker, for a reason that is not the host's. The copy has no Body;
// attempts take theirs from GetBody (nil when there is no body).
func replayable(req *http.Request) (*http.Request, error) {
	r := req.Clone(req.Context())
	r.Body, r.GetBody = nil, nil
	src := req.Body
	if req.GetBody != nil {
		var err error
		if src, err = req.GetBody(); err != nil {
			return nil, fmt.Errorf("request body: %w", err)
		}
		defer src.Close()
	}
	if src == nil || src == http.NoBody {
		r.ContentLength = 0
		return r, nil
	}
	buf, err := io.ReadAll(src)
	if err != nil {
		return nil, fmt.Errorf("request body: %w", err)
	}
	r.ContentLength = int64(len(buf))
	r.GetBody = func() (io.ReadCloser, error) {
		if len(buf) == 0 {
			return http.NoBody, nil
		}
		return io.NopCloser(bytes.NewReader(buf)), nil
	}
	return r, nil
}

// hostKey names the breaker of u's host: lower-case host and explicit port,
// so that https://Pay.example.com and https://pay.example.com:443 share one.
func hostKey(u *url.URL) (string, error) {
	var port string
	switch strings.ToLower(u.Scheme) {
	case "http":
		port = "80"
	case "https":
		port = "443"
	default:
		return "", fmt.Errorf("outbound: unsupported URL scheme %q", u.Scheme)
	}
	name := strings.ToLower(u.Hostname())
	if name == "" {
		return "", errors.New("outbound: URL has no host")
	}
	if p := u.Port(); p != "" {
		port = p
	}
	return net.JoinHostPort(name, port), nil
}

// callerGaveUp marks an attempt cut short because the caller's own context
// ended (its client went away, its deadline passed) rather than by the host
// or the per-attempt timeout.
type callerGaveUp struct{ error }

func (e callerGaveUp) Unwrap() error { return e.error }

// isHostFailure is the breaker's rule: a transport error (a per-attempt
// timeout included) or a 5xx. A 4xx, 429 included, is an answer from a
// working host. A call its caller gave up on is no failure either (the
// breaker records it as a success, having no third outcome): it says nothing
// against the host, and counting it would let any client with a short
// deadline open a healthy host's breaker for everyone. A host that hangs
// still opens it through the per-attempt timeout; a half-open probe whose
// caller gives up closes it, and five more timeouts reopen it.
func isHostFailure(resp *Response, err error) bool {
	if err != nil {
		var gaveUp callerGaveUp
		return !errors.Is(err, ErrResponseTooLarge) && !errors.As(err, &gaveUp)
	}
	return resp != nil && resp.Status >= 500
}

// isRetryable is the retry rule for idempotent calls: transport errors, 429
// and 5xx. An open breaker, a body that is too large, a cancelled call and a
// certificate the host will present again unchanged end the call at once.
func isRetryable(resp *Response, err error) bool {
	if err != nil {
		switch {
		case errors.Is(err, circuitbreaker.ErrOpen),
			errors.Is(err, ErrResponseTooLarge),
			errors.Is(err, context.Canceled),
			isCertificateError(err):
			return false
		}
		return true
	}
	return resp != nil && (resp.Status == http.StatusTooManyRequests || resp.Status >= 500)
}

func isCertificateError(err error) bool {
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	_, ok := errors.AsType[x509.CertificateInvalidError](err)
	return ok
}
