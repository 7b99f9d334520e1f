package concurrency

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sync/semaphore"

	"github.com/rustbill/paymentd/internal/rpcanswer"
)

// Why a queued request left the queue without a slot: the reason label of
// paymentd_concurrency_queue_left_total.
const (
	// LeftDeadline: the client's own deadline (grpc-timeout,
	// connect-timeout-ms) passed while it waited; answered DeadlineExceeded.
	LeftDeadline = "deadline_exceeded"
	// LeftCanceled: the client went away (connection closed, stream reset);
	// nothing is written, nobody reads.
	LeftCanceled = "canceled"
	// LeftQueueTimeout: [server].queue_timeout_ms passed; answered
	// ResourceExhausted with Retry-After.
	LeftQueueTimeout = "queue_timeout"
)

// LeftReasons lists every reason, for metrics.
var LeftReasons = []string{LeftDeadline, LeftCanceled, LeftQueueTimeout}

// Limiter admits at most Max requests at once and queues the rest in
// arrival order. Its counters are for metrics and tests.
type Limiter struct {
	max          int
	queueTimeout time.Duration
	sem          *semaphore.Weighted
	inFlight     atomic.Int64
	waiting      atomic.Int64

	leftDeadline, leftCanceled, leftQueueTimeout atomic.Uint64
}

// Option adjusts a Limiter.
type Option func(*Limiter)

// WithQueueTimeout makes a request that has waited d for a slot leave the
// queue with ResourceExhausted and Retry-After ([server].queue_timeout_ms).
// Zero, the default, waits as long as the client does.
func WithQueueTimeout(d time.Duration) Option {
	return func(l *Limiter) { l.queueTimeout = d }
}

// New returns a Limiter for n concurrent requests. n comes from
// [server].max_concurrency, which config.Validate keeps at 1 or more; a
// smaller n is a programming error and panics.
func New(n int, opts ...Option) *Limiter {
	if n < 1 {
		panic(fmt.Sprintf("concurrency: limit must be at least 1 ([server].max_concurrency), got %d", n))
	}
	l := &Limiter{max: n, sem: semaphore.NewWeighted(int64(n))}
	for _, o := range opts {
		o(l)
	}
	return l
}

// Limit is New(n).Middleware(), for callers that need no counters.
func Limit(n int) func(http.Handler) http.Handler {
	return New(n).Middleware()
}

// Max is the configured number of concurrent requests.
func (l *Limiter) Max() int { return l.max }

// InFlight is the number of requests being handled now.
func (l *Limiter) InFlight() int { return int(l.inFlight.Load()) }

// Waiting is the number of requests queued for a slot now.
func (l *Limiter) Waiting() int { return int(l.waiting.Load()) }

// Left is the number of requests that left the queue without a slot since
// the start, for reason (one of LeftReasons).
func (l *Limiter) Left(reason string) uint64 {
	switch reason {
	case LeftDeadline:
		return l.leftDeadline.Load()
	case LeftCanceled:
		return l.leftCanceled.Load()
	case LeftQueueTimeout:
		return l.leftQueueTimeout.Load()
	}
	return 0
}

// The causes of a wait's end that are the limiter's own doing.
var (
	errClientDeadline = errors.New("client deadline passed while queued")
	errQueueTimeout   = errors.New("[server].queue_timeout_ms passed while queued")
)

// queueRetryAfter is the Retry-After of a queue timeout: the queue is full
// now, and a second is long against a request's usual time.
const queueRetryAfter = time.Second

// Middleware is the HTTP layer. A request waits for a slot in FIFO order
// until its client's deadline, the queue timeout or its context ends,
// whichever comes first (see the package comment for each answer).
func (l *Limiter) Middleware() func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !l.sem.TryAcquire(1) {
				if !l.wait(w, r) {
					return
				}
			}
			l.inFlight.Add(1)
			s := &slot{release: func() {
				l.inFlight.Add(-1)
				l.sem.Release(1)
			}}
			defer s.free()
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), slotKey{}, s)))
		})
	}
}

// wait queues r for a slot. It reports whether the slot was taken; when
// not, the request has been answered (or, its client gone, left alone).
func (l *Limiter) wait(w http.ResponseWriter, r *http.Request) bool {
	ctx := r.Context()
	if d, ok := ClientTimeout(r.Header); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, d, errClientDeadline)
		defer cancel()
	}
	if l.queueTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, l.queueTimeout, errQueueTimeout)
		defer cancel()
	}
	l.waiting.Add(1)
	err := l.sem.Acquire(ctx, 1)
	l.waiting.Add(-1)
	if err == nil {
		return true
	}
	switch cause := context.Cause(ctx); {
	case r.Context().Err() != nil:
		// The client is gone: whatever else also ran out, nobody reads.
		l.leftCanceled.Add(1)
	case errors.Is(cause, errClientDeadline):
		l.leftDeadline.Add(1)
		rpcanswer.Error(w, r, connect.CodeDeadlineExceeded, "deadline exceeded while queued for a slot")
	case errors.Is(cause, errQueueTimeout):
		l.leftQueueTimeout.Add(1)
		rpcanswer.RetryLater(w, r, connect.CodeResourceExhausted, "server busy", queueRetryAfter)
	default:
		l.leftCanceled.Add(1)
	}
	return false
}

// slot is a request's place among the Max in flight, freed once: by
// Release when the handler lets go of it early, else when the handler
// returns.
type slot struct {
	once    sync.Once
	release func()
}

func (s *slot) free() { s.once.Do(s.release) }

type slotKey struct{}

// Release gives back the slot the request of ctx holds, before its handler
// returns, to the next queued request; it does nothing for a context
// without one or whose slot is already given back. A handler about to wait
// for something other than the service's own work calls it, so that the
// wait holds no slot: a password check queued for argon2id
// (internal/identity) would otherwise fill the slots with calls that only
// wait, and every other call would queue behind them (issue 35). What the
// request does after Release is no longer counted in flight nor bounded by
// Max: the caller bounds it itself.
func Release(ctx context.Context) {
	if s, ok := ctx.Value(slotKey{}).(*slot); ok {
		s.free()
	}
}

// ClientTimeout is the deadline a gRPC, gRPC-Web or Connect client sent
// with r: Connect-Timeout-Ms (digits, at most 10), else Grpc-Timeout
// (digits, at most 8, and a unit H, M, S, m, u or n). connect-go applies
// them only inside the handler; the limiter sits in front and must read
// them itself. A malformed value is ignored here: the handler refuses it.
func ClientTimeout(h http.Header) (time.Duration, bool) {
	if v := h.Get("Connect-Timeout-Ms"); v != "" {
		if len(v) > 10 || !digits(v) {
			return 0, false
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, false
		}
		return time.Duration(ms) * time.Millisecond, true
	}
	v := h.Get("Grpc-Timeout")
	if len(v) < 2 || len(v) > 9 || !digits(v[:len(v)-1]) {
		return 0, false
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil {
		return 0, false
	}
	var unit time.Duration
	switch v[len(v)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	// 99999999H overflows a Duration: such a deadline is no bound at all.
	if n > int64(1<<63-1)/int64(unit) {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

func digits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
