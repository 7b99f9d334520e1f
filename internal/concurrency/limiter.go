package concurrency

import (
	"fmt"
	"net/http"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// Limiter admits at most Max requests at once and queues the rest in
// arrival order. Its counters are for metrics and tests.
type Limiter struct {
	max      int
	sem      *semaphore.Weighted
	inFlight atomic.Int64
	waiting  atomic.Int64
}

// New returns a Limiter for n concurrent requests. n comes from
// [server].max_concurrency, which config.Validate keeps at 1 or more; a
// smaller n is a programming error and panics.
func New(n int) *Limiter {
	if n < 1 {
		panic(fmt.Sprintf("concurrency: limit must be at least 1 ([server].max_concurrency), got %d", n))
	}
	return &Limiter{max: n, sem: semaphore.NewWeighted(int64(n))}
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

// Middleware is the HTTP layer. A request waits for a slot in FIFO order;
// when its context ends first it is dropped without a response, since the
// client is no longer there to read one.
func (l *Limiter) Middleware() func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !l.sem.TryAcquire(1) {
				l.waiting.Add(1)
				err := l.sem.Acquire(r.Context(), 1)
				l.waiting.Add(-1)
				if err != nil {
					return
				}
			}
			l.inFlight.Add(1)
			defer func() {
				l.inFlight.Add(-1)
				l.sem.Release(1)
			}()
			next.ServeHTTP(w, r)
		})
	}
}
