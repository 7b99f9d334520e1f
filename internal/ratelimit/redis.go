package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rustbill/paymentd/internal/cache"
)

// ErrNoRedis is Redis.Allow's error when the cache is disabled.
var ErrNoRedis = errors.New("ratelimit: redis is not enabled")

// gcraScript is GCRA on one key holding the TAT in microseconds, in one
// round trip and atomically, so concurrent instances cannot both take the
// last slot. Times are integers of microseconds: a Lua number holds them
// exactly (they stay far below 2^53), and string.format('%d') keeps Redis
// from storing them in the exponent notation tostring would use.
//
// KEYS[1] bucket key; ARGV[1] interval µs; ARGV[2] window µs;
// ARGV[3] now µs, or -1 for the Redis server's clock.
// Returns {1, 0} when allowed, {0, retry µs} when refused.
var gcraScript = redis.NewScript(`
local interval = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
if now < 0 then
  if redis.replicate_commands then redis.replicate_commands() end
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil or tat < now then tat = now end
local new = tat + interval
local allow_at = new - window
if now < allow_at then
  return {0, allow_at - now}
end
redis.call('SET', KEYS[1], string.format('%d', new), 'PX', math.ceil((new - now) / 1000))
return {1, 0}
`)

// Redis is a GCRA limiter whose counters are shared by every instance, under
// the keys <prefix>:ratelimit:<key>. Each key expires once its bucket is
// full again (at most a second), so Redis holds only active keys.
type Redis struct {
	cache *cache.Cache
	now   func() time.Time // nil: the Redis server's clock
}

// NewRedis returns a limiter on c's Redis. It does no outage handling of its
// own: wrap it in Fallback.
func NewRedis(c *cache.Cache, opts ...Option) *Redis {
	o := buildOptions(opts)
	return &Redis{cache: c, now: o.now}
}

// Allow implements Limiter.
func (r *Redis) Allow(ctx context.Context, key string, perSec int) (bool, time.Duration, error) {
	if err := checkPerSec(perSec); err != nil {
		return false, 0, err
	}
	return r.AllowRate(ctx, key, PerSecond(perSec))
}

// AllowRate is Allow for any Rate; a key expires once its bucket is full
// again (at most rate.Per).
func (r *Redis) AllowRate(ctx context.Context, key string, rate Rate) (bool, time.Duration, error) {
	if err := checkRate(rate); err != nil {
		return false, 0, err
	}
	client := r.cache.Client()
	if client == nil {
		return false, 0, ErrNoRedis
	}
	interval, window := intervals(rate)
	now := int64(-1)
	if r.now != nil {
		now = r.now().UnixMicro()
	}
	res, err := gcraScript.Run(ctx, client, []string{r.cache.Key("ratelimit", key)},
		interval.Microseconds(), window.Microseconds(), now).Int64Slice()
	if err != nil {
		return false, 0, fmt.Errorf("ratelimit: redis: %w", err)
	}
	if len(res) != 2 {
		return false, 0, fmt.Errorf("ratelimit: redis: unexpected reply %v", res)
	}
	if res[0] == 1 {
		return true, 0, nil
	}
	return false, time.Duration(res[1]) * time.Microsecond, nil
}
