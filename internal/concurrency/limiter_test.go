package concurrency

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// bundle is what the tests need: a server behind the limiter, a client with
// one connection per request, and the handler's view of what ran.
type bundle struct {
	limiter *Limiter
	server  *httptest.Server
	client  *http.Client

	mu      sync.Mutex
	order   []int // request numbers in the order the handler started them
	running atomic.Int64
	peak    atomic.Int64
}

// setup serves a handler behind a limit of n. The handler records each
// request's "n" query value, then waits for hold to return.
func setup(t *testing.T, n int, hold func(r *http.Request)) *bundle {
	t.Helper()
	b := &bundle{limiter: New(n)}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		num, err := strconv.Atoi(r.URL.Query().Get("n"))
		if err != nil {
			// Not this test's request: a client of a test that has ended
			// may still reach the port this server now has. (Counted as
			// request 0, one once made the order 21 long.)
			http.Error(w, "no request number", http.StatusBadRequest)
			return
		}
		now := b.running.Add(1)
		defer b.running.Add(-1)
		for {
			peak := b.peak.Load()
			if now <= peak || b.peak.CompareAndSwap(peak, now) {
				break
			}
		}
		b.mu.Lock()
		b.order = append(b.order, num)
		b.mu.Unlock()
		hold(r)
		_, _ = io.WriteString(w, "done")
	})
	b.server = httptest.NewServer(b.limiter.Middleware()(h))
	b.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(func() {
		b.client.CloseIdleConnections()
		b.server.Close()
	})
	return b
}

func (b *bundle) get(ctx context.Context, n int) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/?n=%d", b.server.URL, n), nil)
	if err != nil {
		return "", err
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(body), nil
}

// waitQueued waits until the limiter holds want requests (in flight or
// queued).
func (b *bundle) waitQueued(t *testing.T, want int) {
	t.Helper()
	require.Eventually(t, func() bool {
		return b.limiter.InFlight()+b.limiter.Waiting() == want
	}, 5*time.Second, time.Millisecond, "limiter never held %d requests", want)
}

// waitArrived waits until want requests have reached the limiter: those the
// handler has started plus those still queued. It is the barrier that makes
// arrival order deterministic even while earlier requests finish.
func (b *bundle) waitArrived(t *testing.T, want int) {
	t.Helper()
	require.Eventually(t, func() bool {
		b.mu.Lock()
		started := len(b.order)
		b.mu.Unlock()
		return started+b.limiter.Waiting() >= want
	}, 5*time.Second, time.Millisecond, "limiter never saw %d requests", want)
}

func TestRequestsAboveTheLimitWaitAndAreServedInArrivalOrder(t *testing.T) {
	t.Parallel()
	const limit, total = 2, 20
	b := setup(t, limit, func(*http.Request) { time.Sleep(50 * time.Millisecond) })

	start := time.Now()
	errs := make(chan error, total)
	for i := range total {
		go func() {
			body, err := b.get(context.Background(), i)
			if err == nil && body != "done" {
				err = fmt.Errorf("request %d: body %q", i, body)
			}
			errs <- err
		}()
		// The next request starts only after this one is in flight or
		// queued, so arrival order is i = 0, 1, 2, … The gap keeps two
		// requests from being admitted at the same instant, when the
		// order their handlers record would be down to the scheduler.
		b.waitArrived(t, i+1)
		time.Sleep(10 * time.Millisecond)
		require.LessOrEqual(t, b.limiter.InFlight(), limit)
	}
	for range total {
		require.NoError(t, <-errs, "no request is rejected")
	}
	elapsed := time.Since(start)

	require.EqualValues(t, limit, b.peak.Load(), "never more than the limit at once")
	// Served in arrival order, as far as a busy machine lets the handlers
	// say: two requests admitted together (both slots freed at once) may
	// record their start in either order, but none overtakes one that
	// arrived limit or more places before it. The exact order is held by
	// TestQueuedRequestsAreAdmittedInArrivalOrderWithoutTimingAssumptions.
	require.Len(t, b.order, total)
	seen := map[int]bool{}
	for pos, i := range b.order {
		require.False(t, seen[i], "request %d served twice", i)
		seen[i] = true
		require.Less(t, max(pos-i, i-pos), limit, "request %d served at position %d: %v", i, pos, b.order)
	}
	// 20 requests of 50 ms, two at a time, cannot finish in under 500 ms.
	require.GreaterOrEqual(t, elapsed, total/limit*50*time.Millisecond)
	require.Zero(t, b.limiter.InFlight())
	require.Zero(t, b.limiter.Waiting())
}

func TestQueuedRequestsAreAdmittedInArrivalOrderWithoutTimingAssumptions(t *testing.T) {
	t.Parallel()
	const total = 10
	gates := make([]chan struct{}, total)
	for i := range gates {
		gates[i] = make(chan struct{})
	}
	b := setup(t, 1, func(r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		<-gates[n]
	})
	errs := make(chan error, total)
	for i := range total {
		go func() { _, err := b.get(context.Background(), i); errs <- err }()
		b.waitQueued(t, i+1)
	}
	require.Equal(t, total-1, b.limiter.Waiting())
	// Open one gate at a time: a single slot frees, a single request is
	// admitted, and it is recorded before the next gate opens.
	for i := range total {
		require.Eventually(t, func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			return len(b.order) == i+1
		}, 5*time.Second, time.Millisecond)
		close(gates[i])
	}
	for range total {
		require.NoError(t, <-errs)
	}
	want := make([]int, total)
	for i := range want {
		want[i] = i
	}
	require.Equal(t, want, b.order)
}

func TestWaitingRequestWhoseClientCancelsIsDroppedWithoutTakingASlot(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := setup(t, 1, func(r *http.Request) {
		if r.URL.Query().Get("n") == "0" {
			<-release
		}
	})

	first := make(chan error, 1)
	go func() { _, err := b.get(context.Background(), 0); first <- err }()
	b.waitQueued(t, 1)
	require.Equal(t, 1, b.limiter.InFlight())

	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() { _, err := b.get(ctx, 1); cancelled <- err }()
	b.waitQueued(t, 2)
	require.Equal(t, 1, b.limiter.Waiting())

	cancel()
	require.ErrorIs(t, <-cancelled, context.Canceled)
	require.Eventually(t, func() bool { return b.limiter.Waiting() == 0 }, 5*time.Second, time.Millisecond,
		"the cancelled request leaves the queue")
	require.Equal(t, 1, b.limiter.InFlight(), "the cancelled request took no slot")

	third := make(chan error, 1)
	go func() { _, err := b.get(context.Background(), 2); third <- err }()
	b.waitQueued(t, 2)
	require.Equal(t, 1, b.limiter.Waiting(), "the next request waits behind the one in flight")

	close(release)
	require.NoError(t, <-first)
	require.NoError(t, <-third)
	require.Equal(t, []int{0, 2}, b.order, "the cancelled request never reached the handler")
	require.Zero(t, b.limiter.InFlight())
	require.Zero(t, b.limiter.Waiting())
}

func TestRequestWithinTheLimitDoesNotWait(t *testing.T) {
	t.Parallel()
	l := New(3)
	var seen int
	h := l.Middleware()(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = l.InFlight()
		w.WriteHeader(http.StatusNoContent)
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	require.Equal(t, http.StatusNoContent, rec.Code)
	require.Equal(t, 1, seen)
	require.Zero(t, l.Waiting())
	require.Equal(t, 3, l.Max())
}

func TestRequestWhoseContextIsAlreadyDoneIsNotServed(t *testing.T) {
	t.Parallel()
	l := New(1)
	hold := make(chan struct{})
	entered := make(chan struct{})
	h := l.Middleware()(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			close(entered)
			<-hold
		}
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/hold", nil))
	}()
	<-entered

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var served bool
	probe := l.Middleware()(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }))
	probe.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
	require.False(t, served)
	require.Zero(t, l.Waiting())

	close(hold)
	<-done
	require.Zero(t, l.InFlight())
}

func TestLimitBelowOnePanicsNamingTheKey(t *testing.T) {
	t.Parallel()
	require.PanicsWithValue(t,
		"concurrency: limit must be at least 1 ([server].max_concurrency), got 0",
		func() { New(0) })
}

func TestLimitWrapsAHandler(t *testing.T) {
	t.Parallel()
	h := Limit(1)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	require.Equal(t, http.StatusAccepted, rec.Code)
}
