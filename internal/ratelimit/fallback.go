package ratelimit

import (
	"context"
	"time"

	"github.com/rustbill/paymentd/internal/cache"
)

// Fallback counts in Redis while the cache is available and in this
// instance's memory otherwise: when Redis is disabled, during an outage
// (after the first failed call, for the cache's back-off) and for the
// request whose Redis call failed. Requests are always answered; only the
// scope of the limit changes, from the cluster to the instance. The outage
// is logged once, by the cache.
//
// Memory's counts are not copied to Redis or back: at a switch a key may get
// one more burst, which for a per-second limit is the price of never
// blocking on a dead Redis.
type Fallback struct {
	cache  *cache.Cache
	redis  *Redis
	memory *Memory
}

// NewFallback builds both limiters with opts.
func NewFallback(c *cache.Cache, opts ...Option) *Fallback {
	return &Fallback{cache: c, redis: NewRedis(c, opts...), memory: NewMemory(opts...)}
}

// Allow implements Limiter.
func (f *Fallback) Allow(ctx context.Context, key string, perSec int) (bool, time.Duration, error) {
	if err := checkPerSec(perSec); err != nil {
		return false, 0, err
	}
	return f.AllowRate(ctx, key, PerSecond(perSec))
}

// AllowRate is Allow for any Rate.
func (f *Fallback) AllowRate(ctx context.Context, key string, rate Rate) (bool, time.Duration, error) {
	if err := checkRate(rate); err != nil {
		return false, 0, err
	}
	if f.cache.Available() {
		allowed, retryAfter, err := f.redis.AllowRate(ctx, key, rate)
		if err == nil {
			f.cache.ReportOK()
			return allowed, retryAfter, nil
		}
		f.cache.ReportError(err)
	}
	return f.memory.AllowRate(ctx, key, rate)
}
