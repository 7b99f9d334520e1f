package identity

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/rustbill/paymentd/internal/cache"
)

// accessSharedTTL bounds how long a customer's access state lives in Redis.
// The instance that changes a state writes the new one at once, so the TTL
// matters only when that write failed (Redis unreachable from it at that
// moment): the older state is then believed for at most this long.
const accessSharedTTL = 10 * time.Second

// putAccessIfNewer stores ARGV[2] ("<generation>:<0|1>") under KEYS[1] for
// ARGV[3] milliseconds unless the key holds a greater generation than
// ARGV[1]: an instance that read the database just before a change cannot
// put the older state back over the newer.
var putAccessIfNewer = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur then
  local g = tonumber(string.match(cur, '^(%d+):'))
  if g and g > tonumber(ARGV[1]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`)

// RedisAccessCache shares customers' access states between instances
// through Redis. While Redis is unavailable it answers "not cached" without
// asking (internal/cache tracks the outage), and every instance reads the
// database at most once a second per customer.
type RedisAccessCache struct {
	c *cache.Cache
}

// NewRedisAccessCache returns an access cache over c, or nil when c is not
// enabled.
func NewRedisAccessCache(c *cache.Cache) AccessCache {
	if c == nil || !c.Enabled() {
		return nil
	}
	return &RedisAccessCache{c: c}
}

func (r *RedisAccessCache) key(customer uuid.UUID) string {
	return r.c.Key("access", "customer", customer.String())
}

func encodeAccess(s AccessState) string {
	d := "0"
	if s.Disabled {
		d = "1"
	}
	return strconv.FormatInt(s.Generation, 10) + ":" + d
}

func decodeAccess(v string) (AccessState, bool) {
	g, d, ok := strings.Cut(v, ":")
	if !ok || (d != "0" && d != "1") {
		return AccessState{}, false
	}
	gen, err := strconv.ParseInt(g, 10, 64)
	if err != nil || gen < 0 {
		return AccessState{}, false
	}
	return AccessState{Generation: gen, Disabled: d == "1"}, true
}

// Get implements AccessCache.
func (r *RedisAccessCache) Get(ctx context.Context, customer uuid.UUID) (AccessState, bool, error) {
	if !r.c.Available() {
		return AccessState{}, false, nil
	}
	v, err := r.c.Client().Get(ctx, r.key(customer)).Result()
	if errors.Is(err, redis.Nil) {
		r.c.ReportOK()
		return AccessState{}, false, nil
	}
	if err != nil {
		r.c.ReportError(err)
		return AccessState{}, false, nil
	}
	r.c.ReportOK()
	s, ok := decodeAccess(v)
	return s, ok, nil // a foreign entry reads as none: the database decides
}

// Put implements AccessCache.
func (r *RedisAccessCache) Put(ctx context.Context, customer uuid.UUID, s AccessState) error {
	if !r.c.Available() {
		return nil
	}
	err := putAccessIfNewer.Run(ctx, r.c.Client(), []string{r.key(customer)},
		s.Generation, encodeAccess(s), accessSharedTTL.Milliseconds()).Err()
	if err != nil {
		r.c.ReportError(err)
		return err
	}
	r.c.ReportOK()
	return nil
}
