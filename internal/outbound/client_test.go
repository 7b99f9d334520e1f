package outbound

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/testkit"
)

func TestGetIsRetriedAndSucceedsOnTheThirdAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	srv := newServer(t, statuses(http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusOK))

	// GET is idempotent whatever the caller says.
	resp, err := b.get(t, srv.URL)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status)
	require.Equal(t, "OK", string(resp.Body))
	require.EqualValues(t, 3, srv.hits.Load())
	require.Equal(t, 2, b.status(t, srv.host).RecentFailures)
	require.Equal(t, 2, strings.Count(b.logs.String(), "outbound retry scheduled"))
}

func TestTooManyRequestsIsRetriedButIsNoBreakerFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	srv := newServer(t, statuses(http.StatusTooManyRequests, http.StatusOK))

	resp, err := b.get(t, srv.URL)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status)
	require.EqualValues(t, 2, srv.hits.Load())
	require.Equal(t, 0, b.status(t, srv.host).RecentFailures)
}

func TestNonIdempotentPostIsSentExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})

	t.Run("on a 503", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, statuses(http.StatusServiceUnavailable, http.StatusOK))
		resp, err := b.post(t, srv.URL)
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, resp.Status)
		require.EqualValues(t, 1, srv.hits.Load())
	})
	t.Run("on a dropped connection", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, func(w http.ResponseWriter, _ *http.Request, _ int64) { dropConnection(w) })
		_, err := b.post(t, srv.URL)
		require.Error(t, err)
		require.NotErrorIs(t, err, ErrCircuitOpen)
		require.EqualValues(t, 1, srv.hits.Load())
		require.Equal(t, 1, b.status(t, srv.host).RecentFailures)
	})
}

func TestIdempotentPostIsRetriedWithTheSameBody(t *testing.T) {
	t.Parallel()
	const body = `{"payment_id":"pay_1","amount":"12.30"}`
	for _, tc := range []struct {
		name       string
		body       func() io.Reader
		hasGetBody bool
	}{
		{"replayable through GetBody", func() io.Reader { return strings.NewReader(body) }, true},
		{"plain reader buffered once", func() io.Reader { return io.NopCloser(strings.NewReader(body)) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Options{})
			var (
				mu       sync.Mutex
				received []string
			)
			answer := statuses(http.StatusServiceUnavailable, http.StatusInternalServerError, http.StatusCreated)
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int64) {
				got, _ := io.ReadAll(r.Body)
				mu.Lock()
				received = append(received, fmt.Sprintf("%s %d %s", r.Header.Get("Content-Type"), r.ContentLength, got))
				mu.Unlock()
				answer(w, r, hit)
			})

			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, tc.body())
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			require.Equal(t, tc.hasGetBody, req.GetBody != nil)
			resp, err := b.client.Do(req, true)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, resp.Status)

			want := fmt.Sprintf("application/json %d %s", len(body), body)
			require.Equal(t, []string{want, want, want}, received)
		})
	}
}

func TestClientErrorIsNotRetriedAndNotABreakerFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	srv := newServer(t, statuses(http.StatusBadRequest))

	for range 10 {
		resp, err := b.do(t.Context(), http.MethodPost, srv.URL, "amount=-1", true)
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, resp.Status)
		require.Equal(t, "Bad Request", string(resp.Body))
	}
	require.EqualValues(t, 10, srv.hits.Load(), "each call sent once")
	st := b.status(t, srv.host)
	require.Equal(t, StateClosed, st.State)
	require.Equal(t, 0, st.RecentFailures)
}

func TestTransportErrorIsRetriedForIdempotentCalls(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})

	t.Run("connection dropped by the host", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int64) {
			if hit <= 2 {
				dropConnection(w)
				return
			}
			_, _ = io.WriteString(w, "ok")
		})
		resp, err := b.get(t, srv.URL)
		require.NoError(t, err)
		require.Equal(t, "ok", string(resp.Body))
		require.EqualValues(t, 3, srv.hits.Load())
		require.Equal(t, 2, b.status(t, srv.host).RecentFailures)
	})
	t.Run("server closed", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		target, host := srv.URL, strings.TrimPrefix(srv.URL, "http://")
		srv.Close()

		_, err := b.get(t, target+"/api.php?act=order&key=s3cret")
		require.Error(t, err)
		require.NotErrorIs(t, err, ErrCircuitOpen)
		require.Contains(t, err.Error(), host)
		require.NotContains(t, err.Error(), "s3cret", "the query string may carry a merchant key")
		require.Equal(t, 3, b.status(t, host).RecentFailures, "three attempts")

		_, err = b.post(t, target)
		require.Error(t, err)
		require.Equal(t, 4, b.status(t, host).RecentFailures, "one attempt")
	})
}

func TestResponseBodyOverMaxResponseBytesIsAnError(t *testing.T) {
	t.Parallel()
	const limit = 1024
	b := setup(t, Options{MaxResponseBytes: limit})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		switch r.URL.Path {
		case "/exact":
			_, _ = io.WriteString(w, strings.Repeat("a", limit))
		case "/announced": // Content-Length says too much up front
			_, _ = io.WriteString(w, strings.Repeat("a", limit+1))
		case "/chunked": // no Content-Length: found while reading
			_, _ = io.WriteString(w, strings.Repeat("a", limit/2+1))
			_ = http.NewResponseController(w).Flush()
			_, _ = io.WriteString(w, strings.Repeat("a", limit/2+1))
		}
	})

	resp, err := b.get(t, srv.URL+"/exact")
	require.NoError(t, err)
	require.Len(t, resp.Body, limit)

	for _, path := range []string{"/announced", "/chunked"} {
		_, err := b.get(t, srv.URL+path)
		require.ErrorIs(t, err, ErrResponseTooLarge, path)
	}
	require.EqualValues(t, 3, srv.hits.Load(), "a body that is too large is not retried")

	// A HEAD announces the length of a body it does not send.
	resp, err = b.do(t.Context(), http.MethodHead, srv.URL+"/announced", "", false)
	require.NoError(t, err)
	require.Empty(t, resp.Body)
	require.Equal(t, 0, b.status(t, srv.host).RecentFailures, "the host did answer")
}

func TestPerAttemptTimeoutEndsAHungCallInTime(t *testing.T) {
	t.Parallel()
	const perAttempt = 100 * time.Millisecond
	b := setup(t, Options{Timeout: perAttempt})
	release := make(chan struct{})
	srv := newServer(t, func(_ http.ResponseWriter, r *http.Request, _ int64) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before srv.Close

	start := time.Now()
	_, err := b.get(t, srv.URL)
	elapsed := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), srv.host)
	require.GreaterOrEqual(t, elapsed, 3*perAttempt)
	require.Less(t, elapsed, 3*perAttempt+time.Second)
	// Three attempts, each ended by its timeout. An attempt whose 100 ms
	// ran out before a busy machine even sent it never reached the host,
	// so the host's count is at most three
	// (TestEveryRetryAttemptCountsAgainstTheBreaker shows that retries reach
	// it); the breaker counts every attempt.
	require.LessOrEqual(t, srv.hits.Load(), int64(3))
	require.Equal(t, 3, b.status(t, srv.host).RecentFailures)
}

func TestCallerDeadlineEndsTheWholeCall(t *testing.T) {
	t.Parallel()
	const perAttempt = 5 * time.Second
	b := setup(t, Options{Timeout: perAttempt})
	release := make(chan struct{})
	arrived := make(chan struct{}, 3)
	srv := newServer(t, func(_ http.ResponseWriter, r *http.Request, _ int64) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) })

	// The deadline passes once the host has the request: a short real one
	// could pass before a busy machine sent it, and no hit would prove
	// nothing about retries.
	ctx := testkit.ExpiresOn(arrived)
	start := time.Now()
	_, err := b.do(ctx, http.MethodGet, srv.URL, "", true)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), perAttempt, "ended by the caller's deadline, not the attempt's timeout")
	require.EqualValues(t, 1, srv.hits.Load(), "no retry once the caller's deadline has passed")

	// A caller that has already given up sends nothing.
	_, err = b.do(ctx, http.MethodGet, srv.URL, "", true)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.EqualValues(t, 1, srv.hits.Load())
}

func TestRedirectIsReturnedNotFollowed(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		http.Redirect(w, r, "http://elsewhere.example/", http.StatusFound)
	})

	resp, err := b.post(t, srv.URL)
	require.NoError(t, err)
	require.Equal(t, http.StatusFound, resp.Status)
	require.Equal(t, "http://elsewhere.example/", resp.Header.Get("Location"))
	require.EqualValues(t, 1, srv.hits.Load())
}

func TestHundredConcurrentCallsToAHealthyHostAllSucceed(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		_, _ = io.WriteString(w, r.URL.Query().Get("n"))
	})

	errs := make(chan error, 100)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			method, idempotent := http.MethodGet, false
			if i%2 == 1 {
				method, idempotent = http.MethodPost, i%4 == 1
			}
			resp, err := b.do(t.Context(), method, fmt.Sprintf("%s/?n=%d", srv.URL, i), "amount=12.30", idempotent)
			switch {
			case err != nil:
				errs <- err
			case resp.Status != http.StatusOK || string(resp.Body) != fmt.Sprint(i):
				errs <- fmt.Errorf("call %d: status %d, body %q", i, resp.Status, resp.Body)
			}
			_ = b.client.Breakers() // read while others write
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 100, srv.hits.Load())
	require.Equal(t, BreakerStatus{Host: srv.host, State: StateClosed}, b.status(t, srv.host))
}

func TestDoTLSKeepsOneTransportPerCertificateAndBoundsThem(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c := New(Options{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(c.CloseIdleConnections)

	call := func(identity string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		resp, err := c.DoTLS(req, false, identity, &tls.Config{RootCAs: roots})
		require.NoError(t, err)
		require.Equal(t, "ok", string(resp.Body))
	}
	call("cert-0")
	call("cert-0")
	require.Len(t, c.tlsClients, 1, "one certificate, one transport")
	for i := 1; i <= maxTLSClients; i++ {
		call(fmt.Sprintf("cert-%d", i))
	}
	require.Len(t, c.tlsClients, maxTLSClients)
	require.NotContains(t, c.tlsClients, "cert-0", "the oldest transport is closed and dropped")
	require.Len(t, c.tlsOrder, maxTLSClients)

	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	_, err = c.DoTLS(req, false, "", &tls.Config{})
	require.ErrorContains(t, err, "needs a TLS configuration and its identity")
}

func TestPostWithAnIdempotencyKeyIsRetriedWithTheSameKey(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	var (
		mu   sync.Mutex
		keys []string
	)
	answer := statuses(http.StatusServiceUnavailable, http.StatusOK)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int64) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		answer(w, r, hit)
	})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader("amount=1230"))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "pay_1")
	resp, err := b.client.Do(req, false)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.Status)
	require.Equal(t, []string{"pay_1", "pay_1"}, keys, "resent once, with the same key")

	// Without the key the same POST is sent once.
	plain := newServer(t, statuses(http.StatusServiceUnavailable, http.StatusOK))
	resp, err = b.post(t, plain.URL)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, resp.Status)
	require.EqualValues(t, 1, plain.hits.Load())
}

func TestResendableFollowsMethodFlagAndIdempotencyKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		method, key string
		idempotent  bool
		want        bool
	}{
		{http.MethodGet, "", false, true},
		{http.MethodHead, "", false, true},
		{http.MethodPost, "", false, false},
		{http.MethodPost, "", true, true},
		{http.MethodPost, "ref_1", false, true},
		{http.MethodDelete, "", false, false},
		{http.MethodDelete, "k", false, true},
	} {
		req, err := http.NewRequest(tc.method, "http://h/", nil)
		require.NoError(t, err)
		if tc.key != "" {
			req.Header.Set("Idempotency-Key", tc.key)
		}
		require.Equal(t, tc.want, Resendable(req, tc.idempotent), "%+v", tc)
	}
}
