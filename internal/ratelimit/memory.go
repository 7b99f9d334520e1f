package ratelimit

import (
	"context"
	"sync"
	"time"
)

// DefaultMaxKeys bounds Memory's map per generation. A key is an IP (or an
// IPv6 /64) and a procedure, about 100 bytes with its entry, so the two
// generations stay below roughly 20 MB even under a flood of addresses.
const DefaultMaxKeys = 100_000

// Memory is an in-process GCRA limiter: the fallback when Redis is down and
// the limiter when it is not configured.
//
// Idle keys are forgotten without a sweep: entries live in two generations,
// and every maxWindow the older one is dropped whole and the current one
// becomes the older. A key written in the dropped generation was last
// allowed more than maxWindow ago, so its TAT has passed and forgetting it
// changes no decision. Memory thus holds only the keys seen in the last two
// windows. If a flood fills the current generation to maxKeys it rotates
// early: the bound wins over exactness, and a key forgotten early can at
// worst make one more burst.
type Memory struct {
	now     func() time.Time
	maxKeys int

	mu      sync.Mutex
	cur     map[string]time.Time // key → TAT
	prev    map[string]time.Time
	rotated time.Time
	window  time.Duration // how long a generation lasts
}

// NewMemory returns an empty Memory limiter.
func NewMemory(opts ...Option) *Memory {
	o := buildOptions(opts)
	if o.now == nil {
		o.now = time.Now
	}
	return &Memory{now: o.now, maxKeys: o.maxKeys, window: maxWindow, cur: map[string]time.Time{}, prev: map[string]time.Time{}}
}

// Allow implements Limiter. It never fails except for perSec below 1.
func (m *Memory) Allow(ctx context.Context, key string, perSec int) (bool, time.Duration, error) {
	if err := checkPerSec(perSec); err != nil {
		return false, 0, err
	}
	return m.AllowRate(ctx, key, PerSecond(perSec))
}

// AllowRate is Allow for any Rate. The generations last the longest
// Rate.Per asked for so far (a second at least), so that a key of a slow
// rate is not forgotten while its TAT is ahead.
func (m *Memory) AllowRate(_ context.Context, key string, rate Rate) (bool, time.Duration, error) {
	if err := checkRate(rate); err != nil {
		return false, 0, err
	}
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, w := intervals(rate); w > m.window {
		m.window = w
	}
	m.rotate(now)

	tat, inCur := m.cur[key]
	if !inCur {
		tat = m.prev[key] // zero when unknown: a full bucket
	}
	allowed, newTAT, retryAfter := gcra(now, tat, rate)
	if !allowed {
		return false, retryAfter, nil
	}
	if !inCur {
		delete(m.prev, key)
		if len(m.cur) >= m.maxKeys {
			m.shift(now)
		}
	}
	m.cur[key] = newTAT
	return true, 0, nil
}

// Len is the number of keys held, for tests and metrics.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.cur) + len(m.prev)
}

func (m *Memory) rotate(now time.Time) {
	switch since := now.Sub(m.rotated); {
	case since >= 2*m.window:
		// Both generations are older than a window. Fresh maps rather than
		// clear(): a map keeps its buckets, and after a flood those are large.
		m.prev = map[string]time.Time{}
		m.cur = map[string]time.Time{}
		m.rotated = now
	case since >= m.window:
		m.shift(now)
	}
}

func (m *Memory) shift(now time.Time) {
	m.prev = m.cur
	m.cur = map[string]time.Time{}
	m.rotated = now
}
