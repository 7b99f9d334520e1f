package outbound

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rustbill/paymentd/internal/testkit"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testServer is a real HTTP server that counts the requests reaching it.
type testServer struct {
	*httptest.Server
	host string // the breaker key, 127.0.0.1:port
	hits atomic.Int64
}

// newServer serves h, which gets the 1-based number of each request.
func newServer(t *testing.T, h func(w http.ResponseWriter, r *http.Request, hit int64)) *testServer {
	t.Helper()
	s := &testServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(w, r, s.hits.Add(1))
	}))
	t.Cleanup(s.Close)
	u, err := url.Parse(s.URL)
	require.NoError(t, err)
	s.host = u.Host
	return s
}

// statuses answers the n-th request with codes[n-1], and later ones with
// the last code.
func statuses(codes ...int) func(http.ResponseWriter, *http.Request, int64) {
	return func(w http.ResponseWriter, _ *http.Request, hit int64) {
		code := codes[min(int(hit), len(codes))-1]
		w.WriteHeader(code)
		_, _ = io.WriteString(w, http.StatusText(code))
	}
}

// dropConnection closes the connection without an answer: the client sees a
// transport error, as with a host that crashed mid-request.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

type bundle struct {
	client *Client
	logs   *testkit.Logs
}

// setup returns a client with fast backoff for tests; o's other fields keep
// the production defaults unless set.
func setup(t *testing.T, o Options) *bundle {
	t.Helper()
	b := &bundle{logs: &testkit.Logs{}}
	if o.BaseBackoff == 0 {
		o.BaseBackoff = time.Millisecond
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 5 * time.Millisecond
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	o.Logger = slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b.client = New(o)
	t.Cleanup(b.client.CloseIdleConnections)
	return b
}

// do builds and sends one request; it does not use require, so goroutines
// may call it.
func (b *bundle) do(ctx context.Context, method, target, body string, idempotent bool) (*Response, error) {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, r)
	if err != nil {
		return nil, err
	}
	return b.client.Do(req, idempotent)
}

func (b *bundle) get(t *testing.T, target string) (*Response, error) {
	t.Helper()
	return b.do(t.Context(), http.MethodGet, target, "", false)
}

// post sends a POST the caller does not allow to be resent.
func (b *bundle) post(t *testing.T, target string) (*Response, error) {
	t.Helper()
	return b.do(t.Context(), http.MethodPost, target, "amount=12.30", false)
}

// status returns the breaker of host, failing the test when there is none.
func (b *bundle) status(t *testing.T, host string) BreakerStatus {
	t.Helper()
	for _, s := range b.client.Breakers() {
		if s.Host == host {
			return s
		}
	}
	require.FailNow(t, "no breaker", "host %s", host)
	return BreakerStatus{}
}

// openBreaker sends FailureThreshold (5) non-retried POSTs to a server
// that fails them, which opens its breaker.
func (b *bundle) openBreaker(t *testing.T, s *testServer) {
	t.Helper()
	for range DefaultFailureThreshold {
		resp, err := b.post(t, s.URL)
		require.NoError(t, err)
		require.GreaterOrEqual(t, resp.Status, 500)
	}
	require.Equal(t, StateOpen, b.status(t, s.host).State)
}

// waitForProbe sleeps until the open breaker of host lets a probe through.
func (b *bundle) waitForProbe(t *testing.T, host string) {
	t.Helper()
	st := b.status(t, host)
	require.Equal(t, StateOpen, st.State)
	time.Sleep(time.Until(st.NextProbe) + 20*time.Millisecond)
}
