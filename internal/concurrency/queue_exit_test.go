package concurrency

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// occupied returns l's middleware around a handler that holds the one slot
// of l until the test ends, once the slot is taken.
func occupied(t *testing.T, l *Limiter) http.Handler {
	t.Helper()
	hold := make(chan struct{})
	entered := make(chan struct{})
	var served int
	h := l.Middleware()(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			close(entered)
			<-hold
			return
		}
		served++
		w.WriteHeader(http.StatusOK)
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/hold", nil))
	}()
	<-entered
	t.Cleanup(func() {
		close(hold)
		<-done
		require.Zero(t, served, "no queued request reached the handler")
		require.Zero(t, l.InFlight())
		require.Zero(t, l.Waiting())
	})
	return h
}

func rpcRequest(contentType string, header ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/billing.payment.PaymentService/GetPayment", nil)
	r.Header.Set("Content-Type", contentType)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return r
}

func TestQueuedConnectRequestPastItsDeadlineGetsDeadlineExceeded(t *testing.T) {
	t.Parallel()
	l := New(1)
	h := occupied(t, l)
	rec := httptest.NewRecorder()
	// Served only once the deadline has taken it out of the queue.
	h.ServeHTTP(rec, rpcRequest("application/json", "Connect-Protocol-Version", "1", "Connect-Timeout-Ms", "20"))
	require.Equal(t, http.StatusGatewayTimeout, rec.Code)
	require.Contains(t, rec.Body.String(), `"code":"deadline_exceeded"`)
	require.EqualValues(t, 1, l.Left(LeftDeadline))
	require.Zero(t, l.Left(LeftCanceled))
}

func TestQueuedGRPCRequestPastItsDeadlineGetsStatusFour(t *testing.T) {
	t.Parallel()
	for _, ct := range []string{"application/grpc", "application/grpc-web+proto"} {
		l := New(1)
		h := occupied(t, l)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, rpcRequest(ct, "Grpc-Timeout", "20m"))
		require.Equal(t, http.StatusOK, rec.Code, ct)
		// A trailers-only answer: the status is in the headers.
		require.Equal(t, "4", rec.Header().Get("Grpc-Status"), ct)
		require.EqualValues(t, 1, l.Left(LeftDeadline), ct)
	}
}

func TestQueueTimeoutAnswersResourceExhaustedWithRetryAfter(t *testing.T) {
	t.Parallel()
	l := New(1, WithQueueTimeout(20*time.Millisecond))
	h := occupied(t, l)

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, rpcRequest("application/json", "Connect-Protocol-Version", "1"))
	require.Equal(t, http.StatusTooManyRequests, rec.Code)
	require.Equal(t, "1", rec.Header().Get("Retry-After"))
	require.Contains(t, rec.Body.String(), `"code":"resource_exhausted"`)

	plain := httptest.NewRecorder()
	h.ServeHTTP(plain, httptest.NewRequest(http.MethodGet, "/callbacks/1", nil))
	require.Equal(t, http.StatusTooManyRequests, plain.Code)
	require.Equal(t, "1", plain.Header().Get("Retry-After"))
	require.EqualValues(t, 2, l.Left(LeftQueueTimeout))
}

func TestClientDeadlineShorterThanQueueTimeoutWins(t *testing.T) {
	t.Parallel()
	l := New(1, WithQueueTimeout(time.Hour))
	h := occupied(t, l)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, rpcRequest("application/json", "Connect-Protocol-Version", "1", "Connect-Timeout-Ms", "10"))
	require.Equal(t, http.StatusGatewayTimeout, rec.Code)
	require.EqualValues(t, 1, l.Left(LeftDeadline))
	require.Zero(t, l.Left(LeftQueueTimeout))
}

func TestQueuedRequestWhoseClientLeavesIsCountedAndGetsNoAnswer(t *testing.T) {
	t.Parallel()
	l := New(1)
	h := occupied(t, l)
	ctx, cancel := context.WithCancel(context.Background())
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, rpcRequest("application/grpc", "Grpc-Timeout", "1H").WithContext(ctx))
	}()
	require.Eventually(t, func() bool { return l.Waiting() == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	<-done
	require.False(t, rec.Flushed)
	require.Empty(t, rec.Header(), "nothing written for a client that is gone")
	require.EqualValues(t, 1, l.Left(LeftCanceled))
	require.Zero(t, l.Left(LeftDeadline))
}

func TestClientTimeoutReadsBothProtocolsHeaders(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, value string
		want        time.Duration
		ok          bool
	}{
		{"Connect-Timeout-Ms", "1500", 1500 * time.Millisecond, true},
		{"Connect-Timeout-Ms", "0", 0, true},
		{"Connect-Timeout-Ms", "12345678901", 0, false},
		{"Connect-Timeout-Ms", "-5", 0, false},
		{"Connect-Timeout-Ms", "1s", 0, false},
		{"Grpc-Timeout", "2H", 2 * time.Hour, true},
		{"Grpc-Timeout", "3M", 3 * time.Minute, true},
		{"Grpc-Timeout", "4S", 4 * time.Second, true},
		{"Grpc-Timeout", "5m", 5 * time.Millisecond, true},
		{"Grpc-Timeout", "6u", 6 * time.Microsecond, true},
		{"Grpc-Timeout", "7n", 7, true},
		{"Grpc-Timeout", "99999999H", 0, false},
		{"Grpc-Timeout", "123456789S", 0, false},
		{"Grpc-Timeout", "5", 0, false},
		{"Grpc-Timeout", "m", 0, false},
		{"Grpc-Timeout", "5x", 0, false},
		{"Grpc-Timeout", "", 0, false},
	} {
		h := http.Header{}
		h.Set(tc.name, tc.value)
		got, ok := ClientTimeout(h)
		require.Equal(t, tc.ok, ok, "%s: %q", tc.name, tc.value)
		require.Equal(t, tc.want, got, "%s: %q", tc.name, tc.value)
	}
}
