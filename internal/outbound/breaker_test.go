package outbound

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rustbill/paymentd/internal/testkit"
	"github.com/stretchr/testify/require"
)

// Cool-down tests keep Timeout below Cooldown, as production must.
const (
	testCooldown = 500 * time.Millisecond
	testTimeout  = 400 * time.Millisecond
)

func TestBreakerOpensAfterFiveFailuresAndFailsFastWithoutReachingTheHost(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	srv := newServer(t, statuses(http.StatusInternalServerError))

	b.openBreaker(t, srv)
	require.EqualValues(t, 5, srv.hits.Load())

	for range 10 {
		before := time.Now()
		resp, err := b.post(t, srv.URL)
		require.Nil(t, resp)
		require.ErrorIs(t, err, ErrCircuitOpen)
		var open *CircuitOpenError
		require.ErrorAs(t, err, &open)
		require.Equal(t, srv.host, open.Host)
		require.Contains(t, err.Error(), srv.host)
		require.WithinDuration(t, before.Add(DefaultCooldown), open.RetryAt, 2*time.Second)
	}
	require.EqualValues(t, 5, srv.hits.Load(), "no call may reach the host while its breaker is open")
	require.Equal(t, 1, strings.Count(b.logs.String(), "from=closed to=open"), b.logs.String())
	require.Contains(t, b.logs.String(), "host="+srv.host)
}

func TestEveryRetryAttemptCountsAgainstTheBreaker(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	srv := newServer(t, statuses(http.StatusBadGateway))

	resp, err := b.get(t, srv.URL)
	require.NoError(t, err, "the last answer is returned when the retries run out")
	require.Equal(t, http.StatusBadGateway, resp.Status)
	require.EqualValues(t, 3, srv.hits.Load())
	st := b.status(t, srv.host)
	require.Equal(t, StateClosed, st.State)
	require.Equal(t, 3, st.RecentFailures)

	// Attempts 4 and 5 open the breaker; the third attempt of this call is
	// refused without being sent.
	_, err = b.get(t, srv.URL)
	require.ErrorIs(t, err, ErrCircuitOpen)
	require.EqualValues(t, 5, srv.hits.Load())
}

func TestAfterTheCooldownExactlyOneProbeGoesThroughAndItsSuccessClosesTheBreaker(t *testing.T) {
	t.Parallel()
	// The probe is held at the host while twenty other calls are refused,
	// and its attempt's timeout runs meanwhile: it must outlast that work
	// on a machine busy with other jobs (400 ms could run out), and the
	// cool-down must stay longer than it.
	const cooldown, timeout = 2 * time.Second, 1500 * time.Millisecond
	b := setup(t, Options{Cooldown: cooldown, Timeout: timeout})
	var (
		mu      sync.Mutex
		healthy bool
	)
	probeArrived := make(chan struct{})
	releaseProbe := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int64) {
		mu.Lock()
		ok := healthy
		mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if hit == 6 { // the probe: hold it so that others call meanwhile
			close(probeArrived)
			select {
			case <-releaseProbe:
			case <-r.Context().Done():
			}
		}
		_, _ = io.WriteString(w, "ok")
	})

	b.openBreaker(t, srv)
	mu.Lock()
	healthy = true
	mu.Unlock()
	b.waitForProbe(t, srv.host)

	type result struct {
		resp *Response
		err  error
	}
	probe := make(chan result, 1)
	go func() {
		resp, err := b.do(t.Context(), http.MethodPost, srv.URL, "amount=12.30", false)
		probe <- result{resp, err}
	}()
	testkit.WaitOrTimeout(t, probeArrived, "the probe to reach the host")
	require.Equal(t, StateHalfOpen, b.status(t, srv.host).State)

	// While the probe is in flight every other caller fails fast, retryable
	// or not.
	errs := make(chan error, 20)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			_, err := b.do(t.Context(), http.MethodGet, srv.URL, "", true)
			errs <- err
		})
		wg.Go(func() {
			_, err := b.do(t.Context(), http.MethodPost, srv.URL, "amount=12.30", false)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.ErrorIs(t, err, ErrCircuitOpen)
	}
	require.EqualValues(t, 6, srv.hits.Load(), "only the probe reached the host")

	close(releaseProbe)
	got := <-probe
	require.NoError(t, got.err)
	require.Equal(t, http.StatusOK, got.resp.Status)
	st := b.status(t, srv.host)
	require.Equal(t, StateClosed, st.State)
	require.True(t, st.OpenedAt.IsZero())
	require.True(t, st.NextProbe.IsZero())

	resp, err := b.get(t, srv.URL)
	require.NoError(t, err)
	require.Equal(t, "ok", string(resp.Body))
	require.EqualValues(t, 7, srv.hits.Load())

	logs := b.logs.String()
	for _, change := range []string{"from=closed to=open", "from=open to=half_open", "from=half_open to=closed"} {
		require.Equal(t, 1, strings.Count(logs, change), "%s in\n%s", change, logs)
	}
}

func TestAFailedProbeReopensTheBreaker(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Cooldown: testCooldown, Timeout: testTimeout})
	srv := newServer(t, statuses(http.StatusServiceUnavailable))

	b.openBreaker(t, srv)
	first := b.status(t, srv.host)
	b.waitForProbe(t, srv.host)

	// The probe is a GET: its 503 reopens the breaker, and its own retry is
	// refused like any other call.
	_, err := b.get(t, srv.URL)
	require.ErrorIs(t, err, ErrCircuitOpen)
	require.EqualValues(t, 6, srv.hits.Load())

	st := b.status(t, srv.host)
	require.Equal(t, StateOpen, st.State)
	require.True(t, st.OpenedAt.After(first.OpenedAt), "reopening starts a new cool-down")
	require.WithinDuration(t, st.OpenedAt.Add(testCooldown), st.NextProbe, 100*time.Millisecond)

	_, err = b.post(t, srv.URL)
	require.ErrorIs(t, err, ErrCircuitOpen)
	require.EqualValues(t, 6, srv.hits.Load())
	require.Equal(t, 1, strings.Count(b.logs.String(), "from=half_open to=open"), b.logs.String())
}

func TestAnOpenBreakerLeavesOtherHostsAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	down := newServer(t, statuses(http.StatusInternalServerError))
	up := newServer(t, statuses(http.StatusOK))

	b.openBreaker(t, down)
	for range 10 {
		resp, err := b.post(t, up.URL)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.Status)
	}
	_, err := b.post(t, down.URL)
	require.ErrorIs(t, err, ErrCircuitOpen)

	require.EqualValues(t, 10, up.hits.Load())
	require.Equal(t, StateOpen, b.status(t, down.host).State)
	require.Equal(t, StateClosed, b.status(t, up.host).State)
}

func TestBreakersReportsStateFailuresOpenedAtAndNextProbe(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Cooldown: 2 * time.Second, Timeout: time.Second})
	down := newServer(t, statuses(http.StatusInternalServerError))
	flaky := newServer(t, statuses(http.StatusInternalServerError, http.StatusInternalServerError, http.StatusOK))
	up := newServer(t, statuses(http.StatusOK))

	require.Empty(t, b.client.Breakers(), "breakers are created on first use")

	_, err := b.get(t, up.URL)
	require.NoError(t, err)
	_, err = b.get(t, flaky.URL) // two failures, then a success
	require.NoError(t, err)
	before := time.Now()
	b.openBreaker(t, down)
	after := time.Now()

	got := b.client.Breakers()
	require.Len(t, got, 3)
	require.IsIncreasing(t, []string{got[0].Host, got[1].Host, got[2].Host}, "sorted by host")

	st := b.status(t, down.host)
	require.Equal(t, StateOpen, st.State)
	require.Equal(t, 5, st.RecentFailures)
	require.False(t, st.OpenedAt.Before(before))
	require.False(t, st.OpenedAt.After(after))
	require.WithinDuration(t, st.OpenedAt.Add(2*time.Second), st.NextProbe, 100*time.Millisecond)

	require.Equal(t, BreakerStatus{Host: flaky.host, State: StateClosed, RecentFailures: 2}, b.status(t, flaky.host))
	require.Equal(t, BreakerStatus{Host: up.host, State: StateClosed}, b.status(t, up.host))
}

func TestHostKeyNamesHostAndPort(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, want string }{
		{"https://Pay.Example.com/mapi.php?key=secret", "pay.example.com:443"},
		{"https://pay.example.com:443/", "pay.example.com:443"},
		{"http://pay.example.com/", "pay.example.com:80"},
		{"http://127.0.0.1:8080/x", "127.0.0.1:8080"},
		{"https://[::1]:8443/", "[::1]:8443"},
	} {
		req, err := http.NewRequest(http.MethodGet, tc.url, nil)
		require.NoError(t, err)
		got, err := hostKey(req.URL)
		require.NoError(t, err)
		require.Equal(t, tc.want, got, tc.url)
	}

	b := setup(t, Options{})
	_, err := b.get(t, "ftp://pay.example.com/")
	require.ErrorContains(t, err, "unsupported URL scheme")
	require.Empty(t, b.client.Breakers(), "a request that cannot be sent touches no breaker")
}

// A call cut short because its caller gave up (the request's client went
// away or its deadline passed) says nothing about the host: it does not
// count against the breaker. Otherwise any client sending a short
// connect-timeout-ms a few times would open a healthy gateway's breaker
// for every customer. The host's own slowness still counts through the
// per-attempt timeout.
func TestCallsTheirCallersGaveUpOnDoNotOpenTheBreaker(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Timeout: 5 * time.Second})
	release := make(chan struct{})
	arrived := make(chan struct{}, 3*DefaultFailureThreshold)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, _ int64) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) })

	// Each caller's deadline passes once the host has the request: a short
	// real deadline can pass before a loaded machine sends the request at
	// all, and a call that never got there proves nothing.
	for range 2 * DefaultFailureThreshold {
		_, err := b.do(testkit.ExpiresOn(arrived), http.MethodPost, srv.URL, "{}", false)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotErrorIs(t, err, ErrCircuitOpen)
	}
	for range DefaultFailureThreshold {
		// Cancelled once the host has the request.
		ctx, cancel := context.WithCancel(t.Context())
		go func() { <-arrived; cancel() }()
		_, err := b.do(ctx, http.MethodPost, srv.URL, "{}", false)
		cancel()
		require.ErrorIs(t, err, context.Canceled)
	}
	require.EqualValues(t, 3*DefaultFailureThreshold, srv.hits.Load(), "every call reached the host")
	st := b.status(t, srv.host)
	require.Equal(t, StateClosed, st.State)
	require.Zero(t, st.RecentFailures)
}

// Calls to one host that fail together: one of them opens the breaker and
// the others' failures are recorded while its state-change log line is
// written. failsafe-go calls the listener with its lock released, so the
// listener reads the breaker's counts only through the breaker (which
// locks), never through the event's metrics, which it does not guard:
// that read was a data race the race detector found in a paymentd whose
// webhook host went down (go test -race fails this test on it). The log
// writer here is slow, so the other failures land while the line is
// written.
func TestCallsFailingTogetherOpenTheBreakerOnceWithoutARace(t *testing.T) {
	t.Parallel()
	const calls = 4 * DefaultFailureThreshold
	b := setup(t, Options{})
	b.client.log = slog.New(slowOn{slog.NewTextHandler(b.logs, nil), "outbound circuit breaker state changed", 200 * time.Millisecond})
	var inFlight sync.WaitGroup
	inFlight.Add(calls)
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request, _ int64) {
		inFlight.Done()
		inFlight.Wait() // all calls are at the host before any fails
		w.WriteHeader(http.StatusInternalServerError)
	})

	var wg sync.WaitGroup
	for range calls {
		wg.Go(func() { _, _ = b.do(t.Context(), http.MethodPost, srv.URL, "{}", false) })
	}
	wg.Wait()
	require.EqualValues(t, calls, srv.hits.Load())
	st := b.status(t, srv.host)
	require.Equal(t, StateOpen, st.State)
	require.Equal(t, DefaultFailureThreshold, st.RecentFailures, "the window holds the last FailureThreshold results")
	logs := b.logs.String()
	require.Equal(t, 1, strings.Count(logs, "from=closed to=open"), logs)
	require.Regexp(t, `to=open recent_failures=\d+`, logs)
}

// slowOn is a slog handler that takes d to write a record whose message is
// msg.
type slowOn struct {
	slog.Handler
	msg string
	d   time.Duration
}

func (h slowOn) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		time.Sleep(h.d)
	}
	return h.Handler.Handle(ctx, r)
}
