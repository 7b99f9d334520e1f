package identity

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rustbill/paymentd/internal/cache"
)

// RedisSessionCache shares admin sessions between instances through Redis.
// While Redis is unavailable it answers "not cached" without asking it
// (internal/cache tracks the outage and logs it once), so every lookup goes
// to the database and nobody is logged out.
type RedisSessionCache struct {
	c   *cache.Cache
	now func() time.Time
}

// NewRedisSessionCache returns a session cache over c, or nil when c is not
// enabled (the service then reads sessions from the database alone).
func NewRedisSessionCache(c *cache.Cache, now func() time.Time) SessionCache {
	if c == nil || !c.Enabled() {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	return &RedisSessionCache{c: c, now: now}
}

func (r *RedisSessionCache) key(id []byte) string { return r.c.Key("session", hex.EncodeToString(id)) }

// Get implements SessionCache.
func (r *RedisSessionCache) Get(ctx context.Context, id []byte) (Session, bool, error) {
	if !r.c.Available() {
		return Session{}, false, nil
	}
	b, err := r.c.Client().Get(ctx, r.key(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		r.c.ReportOK()
		return Session{}, false, nil
	}
	if err != nil {
		r.c.ReportError(err)
		return Session{}, false, nil
	}
	r.c.ReportOK()
	var s Session
	if err := json.Unmarshal(b, &s); err != nil {
		return Session{}, false, nil // a foreign or old entry: read the database
	}
	return s, true, nil
}

// Put implements SessionCache; the entry expires with the session.
func (r *RedisSessionCache) Put(ctx context.Context, s Session) error {
	if !r.c.Available() {
		return nil
	}
	ttl := s.AbsoluteExpiresAt.Sub(r.now())
	if ttl <= 0 {
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := r.c.Client().Set(ctx, r.key(s.ID), b, ttl).Err(); err != nil {
		r.c.ReportError(err)
		return nil
	}
	r.c.ReportOK()
	return nil
}

// Delete implements SessionCache. A failed delete is reported: the cached
// copy then lives until its one-minute verification runs out.
func (r *RedisSessionCache) Delete(ctx context.Context, id []byte) error {
	if !r.c.Available() {
		return nil
	}
	if err := r.c.Client().Del(ctx, r.key(id)).Err(); err != nil {
		r.c.ReportError(err)
		return err
	}
	r.c.ReportOK()
	return nil
}
