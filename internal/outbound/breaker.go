package outbound

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/failsafe-go/failsafe-go/timeout"
)

// Breaker states as reported by BreakerStatus.State.
const (
	StateClosed   = "closed"
	StateOpen     = "open"
	StateHalfOpen = "half_open"
)

// ErrCircuitOpen is matched (errors.Is) by every *CircuitOpenError.
var ErrCircuitOpen = errors.New("circuit open")

// CircuitOpenError is returned, without anything being sent, while a host's
// breaker is open or its single half-open probe is in flight.
type CircuitOpenError struct {
	Host    string    // host:port
	RetryAt time.Time // when the breaker lets a probe through; now while a probe is in flight
}

func (e *CircuitOpenError) Error() string {
	return fmt.Sprintf("circuit open for host %s (next attempt allowed at %s)", e.Host, e.RetryAt.UTC().Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrCircuitOpen) true.
func (e *CircuitOpenError) Is(target error) bool { return target == ErrCircuitOpen }

// BreakerStatus is a snapshot of one host's breaker.
type BreakerStatus struct {
	Host  string // host:port
	State string // StateClosed, StateOpen or StateHalfOpen
	// RecentFailures counts failures in the breaker's current window: the
	// last FailureThreshold calls while closed, the window that opened it
	// while open, the probe while half-open.
	RecentFailures int
	// OpenedAt is when the breaker last opened; zero while closed.
	OpenedAt time.Time
	// NextProbe is when an open breaker lets one probe through; zero unless
	// open. A time in the past means the next call is the probe.
	NextProbe time.Time
}

// hostBreaker is the failsafe-go state of one downstream host:port.
type hostBreaker struct {
	host     string
	cb       circuitbreaker.CircuitBreaker[*Response]
	retrying failsafe.Executor[*Response] // retry(breaker(timeout(attempt)))
	once     failsafe.Executor[*Response] // breaker(timeout(attempt))

	mu       sync.Mutex
	openedAt time.Time
}

// breaker returns host's breaker, creating it on first use.
func (c *Client) breaker(host string) *hostBreaker {
	c.mu.Lock()
	defer c.mu.Unlock()
	if hb, ok := c.breakers[host]; ok {
		return hb
	}
	hb := newHostBreaker(host, c.opts, c.log)
	c.breakers[host] = hb
	return hb
}

func newHostBreaker(host string, o Options, log *slog.Logger) *hostBreaker {
	hb := &hostBreaker{host: host}
	hb.cb = circuitbreaker.NewBuilder[*Response]().
		HandleIf(isHostFailure).
		// Count based: open when the last FailureThreshold results are all
		// failures, i.e. after that many consecutive failures.
		WithFailureThreshold(uint(o.FailureThreshold)).
		// One permit in half-open: one probe, and its result alone decides.
		// Without this the half-open state would admit FailureThreshold
		// probes and need as many failures to reopen.
		WithSuccessThreshold(1).
		WithDelay(o.Cooldown).
		OnStateChanged(func(e circuitbreaker.StateChangedEvent) { hb.stateChanged(e, log) }).
		Build()

	perAttempt := timeout.New[*Response](o.Timeout)
	retry := retrypolicy.NewBuilder[*Response]().
		HandleIf(isRetryable).
		WithMaxAttempts(o.Attempts).
		WithBackoff(o.BaseBackoff, o.MaxBackoff).
		WithJitterFactor(backoffJitterFactor).
		// After the last attempt the caller gets that attempt's answer (a
		// 503 Response) or error, not a failsafe ExceededError.
		ReturnLastFailure().
		OnRetryScheduled(func(e failsafe.ExecutionScheduledEvent[*Response]) {
			attrs := []any{"host", host, "attempt", e.Attempts(), "delay", e.Delay}
			if err := e.LastError(); err != nil {
				attrs = append(attrs, "error", err.Error())
			} else if r := e.LastResult(); r != nil {
				attrs = append(attrs, "status", r.Status)
			}
			log.Debug("outbound retry scheduled", attrs...)
		}).
		Build()

	// The breaker sits inside the retry policy, so every attempt asks it for
	// a permit and reports its result: retries count against the host.
	hb.retrying = failsafe.With[*Response](retry, hb.cb, perAttempt)
	hb.once = failsafe.With[*Response](hb.cb, perAttempt)
	return hb
}

// stateChanged records and logs a change of hb's state. failsafe-go calls
// it with the breaker's lock released while other calls go on recording
// their results, so the failures are read through the breaker, which
// locks, and never through e.Metrics(), which reads the counts unguarded
// (a data race: TestCallsFailingTogetherOpenTheBreakerOnceWithoutARace).
// They are the counts of the window after the change: the failures that
// opened it, none in a half-open or closed breaker's new window.
func (hb *hostBreaker) stateChanged(e circuitbreaker.StateChangedEvent, log *slog.Logger) {
	hb.mu.Lock()
	switch e.NewState {
	case circuitbreaker.OpenState:
		hb.openedAt = time.Now()
	case circuitbreaker.ClosedState:
		hb.openedAt = time.Time{}
	}
	hb.mu.Unlock()

	level := slog.LevelInfo
	if e.NewState == circuitbreaker.OpenState {
		level = slog.LevelWarn
	}
	log.Log(e.Context(), level, "outbound circuit breaker state changed",
		"host", hb.host,
		"from", stateName(e.OldState),
		"to", stateName(e.NewState),
		"recent_failures", hb.cb.Metrics().Failures())
}

func (hb *hostBreaker) openError() *CircuitOpenError {
	return &CircuitOpenError{Host: hb.host, RetryAt: time.Now().Add(hb.cb.RemainingDelay())}
}

func (hb *hostBreaker) status(now time.Time) BreakerStatus {
	state := hb.cb.State()
	s := BreakerStatus{
		Host:           hb.host,
		State:          stateName(state),
		RecentFailures: int(hb.cb.Metrics().Failures()),
	}
	if state != circuitbreaker.ClosedState {
		hb.mu.Lock()
		s.OpenedAt = hb.openedAt
		hb.mu.Unlock()
	}
	if state == circuitbreaker.OpenState {
		s.NextProbe = now.Add(hb.cb.RemainingDelay())
	}
	return s
}

// Breakers reports every host's breaker that has been used, sorted by host.
func (c *Client) Breakers() []BreakerStatus {
	c.mu.Lock()
	hbs := slices.Collect(maps.Values(c.breakers))
	c.mu.Unlock()

	now := time.Now()
	out := make([]BreakerStatus, 0, len(hbs))
	for _, hb := range hbs {
		out = append(out, hb.status(now))
	}
	slices.SortFunc(out, func(a, b BreakerStatus) int { return strings.Compare(a.Host, b.Host) })
	return out
}

func stateName(s circuitbreaker.State) string {
	switch s {
	case circuitbreaker.OpenState:
		return StateOpen
	case circuitbreaker.HalfOpenState:
		return StateHalfOpen
	default:
		return StateClosed
	}
}
