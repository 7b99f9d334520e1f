package event

import (
	"math/rand/v2"
	"time"
)

// Backoff is the delay before the attempt after attempt (1-based) failed:
// base doubled per attempt, capped at maxDelay, with "equal jitter" — a
// random point in the upper half — so that the events of one outage do not
// all come back at the same moment, yet none comes back sooner than half
// its step. jitter is in [0, 1).
//
// With the defaults (base 10 s, cap 30 min) the eight attempts of an event
// that keeps failing are spread over roughly 10–21 minutes.
func Backoff(attempt int, base, maxDelay time.Duration, jitter float64) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := base
	for i := 1; i < attempt && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	half := d / 2
	return half + time.Duration(jitter*float64(d-half))
}

func randomJitter() float64 { return rand.Float64() }
