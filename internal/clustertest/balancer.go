package clustertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Balancer is the load balancer an operator puts in front of the
// instances, modelled on deploy/nginx/paymentd.conf's upstreams with
// nginx's defaults: each request goes to the next node round robin, over a
// kept-alive connection when one is idle (keepalive); a node that refuses
// the connection is passed over for FailTimeout and the request goes to
// the next one (nothing was sent; proxy_next_upstream error); a request
// whose connection fails after it was sent goes to the next node only when
// its method is idempotent (a GET callback: nginx passes no POST on once
// sent, it may have been handled) and is otherwise answered 502, as is one
// no node takes.
//
// The nodes' [server].public_url is the balancer's URL (Options.Env), so
// the gateway's notifications pass through it as well as the load's
// calls (Bundle.Through). It records every exchange: what failed, when.
type Balancer struct {
	// FailTimeout is how long a node that refused a connection is passed
	// over (nginx's fail_timeout; default 1 s).
	FailTimeout time.Duration

	ln    net.Listener
	srv   *http.Server
	proxy *httputil.ReverseProxy
	tr    *http.Transport
	next  atomic.Uint64

	mu        sync.Mutex
	nodes     []*Node
	downUntil map[*Node]time.Time
	exchanges []Exchange
}

// Exchange is one request through the balancer and its answer.
type Exchange struct {
	Start, End   time.Time
	Method, Path string
	// Node is the node that answered ("" when none did).
	Node string
	// Status is the answer's HTTP status: the node's, or the balancer's
	// 502 when no node took the request or one broke it off (Err says
	// why), or 499 when the caller left first.
	Status int
	Err    string
}

// Failed reports whether the caller got a server error: the node's 5xx or
// the balancer's 502. A 4xx (a hostile callback refused, a bad request) is
// an answer.
func (e Exchange) Failed() bool { return e.Status >= 500 }

func (e Exchange) String() string {
	s := fmt.Sprintf("%s %s %s → %d", e.Start.Format("15:04:05.000"), e.Method, e.Path, e.Status)
	if e.Node != "" {
		s += " from " + e.Node
	}
	if e.Err != "" {
		s += " (" + e.Err + ")"
	}
	return s + fmt.Sprintf(" in %s", e.End.Sub(e.Start).Round(time.Millisecond))
}

// StartBalancer listens on a free port of 127.0.0.1; it answers 502 until
// Route gives it nodes.
func StartBalancer() (*Balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Balancer{
		FailTimeout: time.Second,
		ln:          ln,
		downUntil:   map[*Node]time.Time{},
		tr: &http.Transport{
			MaxIdleConnsPerHost:   16,
			DialContext:           (&net.Dialer{Timeout: time.Second}).DialContext,
			ResponseHeaderTimeout: 30 * time.Second,
		},
	}
	b.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetXForwarded()
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "upstream"
		},
		Transport: roundTripper(b.roundTrip),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if s, ok := r.Context().Value(exchangeKey{}).(*Exchange); ok {
				s.Err = err.Error()
			}
			if r.Context().Err() != nil {
				// The caller went away (nginx logs 499): nobody to answer.
				w.WriteHeader(statusClientClosed)
				return
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	b.srv = &http.Server{Handler: http.HandlerFunc(b.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

// URL is the balancer's address: the nodes' public URL.
func (b *Balancer) URL() string { return "http://" + b.ln.Addr().String() }

// Route sends requests to c's nodes from now on.
func (b *Balancer) Route(c *Cluster) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nodes = append([]*Node(nil), c.Nodes...)
}

// Close stops listening and drops every connection.
func (b *Balancer) Close() {
	_ = b.srv.Close()
	b.tr.CloseIdleConnections()
}

// Exchanges is every exchange so far, in the order they ended.
func (b *Balancer) Exchanges() []Exchange {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]Exchange(nil), b.exchanges...)
}

type exchangeKey struct{}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (b *Balancer) serve(w http.ResponseWriter, r *http.Request) {
	ex := &Exchange{Start: time.Now(), Method: r.Method, Path: r.URL.Path}
	// The body is read once so that a request no node took can go to the
	// next one whole.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<20))
	if err != nil {
		http.Error(w, "cannot read the request", http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r = r.WithContext(context.WithValue(r.Context(), exchangeKey{}, ex))
	sw := &statusWriter{ResponseWriter: w}
	b.proxy.ServeHTTP(sw, r)
	ex.End, ex.Status = time.Now(), sw.status
	b.mu.Lock()
	b.exchanges = append(b.exchanges, *ex)
	b.mu.Unlock()
}

// statusClientClosed is an exchange whose caller left before the answer
// (nginx's 499): not a failure of the service.
const statusClientClosed = 499

// idempotent are the methods nginx passes to the next node after an error
// on a request already sent.
var idempotent = map[string]bool{http.MethodGet: true, http.MethodHead: true, http.MethodOptions: true}

// errNoNode is the answer when no node took the connection.
var errNoNode = errors.New("no node took the connection")

// roundTrip sends r to the nodes in turn, the ones passed over last, until
// one takes the connection (or, for an idempotent request, answers).
func (b *Balancer) roundTrip(r *http.Request) (*http.Response, error) {
	ex, _ := r.Context().Value(exchangeKey{}).(*Exchange)
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		_ = r.Body.Close()
	}
	var last error
	for _, n := range b.order() {
		out := r.Clone(r.Context())
		out.URL.Host = strings.TrimPrefix(n.URL, "http://")
		out.Host = out.URL.Host
		out.Body, out.GetBody = http.NoBody, nil
		if len(body) > 0 {
			out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
			out.Body, _ = out.GetBody()
		}
		resp, err := b.tr.RoundTrip(out)
		if err == nil {
			if ex != nil {
				ex.Node = n.Name
			}
			return resp, nil
		}
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			b.mu.Lock()
			b.downUntil[n] = time.Now().Add(b.FailTimeout)
			b.mu.Unlock()
			continue
		}
		if r.Context().Err() != nil || !idempotent[r.Method] {
			if ex != nil {
				ex.Node = n.Name
			}
			return nil, err // sent: it may have been handled
		}
		last = fmt.Errorf("%s: %w", n.Name, err)
	}
	if last != nil {
		return nil, last
	}
	return nil, errNoNode
}

// order is the nodes to try: round robin from the next one, those passed
// over (a refused connection within FailTimeout) last.
func (b *Balancer) order() []*Node {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.nodes) == 0 {
		return nil
	}
	start := int(b.next.Add(1) % uint64(len(b.nodes)))
	now := time.Now()
	var up, down []*Node
	for i := range b.nodes {
		n := b.nodes[(start+i)%len(b.nodes)]
		if now.Before(b.downUntil[n]) {
			down = append(down, n)
		} else {
			up = append(up, n)
		}
	}
	return append(up, down...)
}
