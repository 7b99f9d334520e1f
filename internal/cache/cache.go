package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

const (
	// ioTimeout bounds dialing, reading and writing: a Redis that does not
	// answer within it is treated as down, and the request falls back.
	ioTimeout = 300 * time.Millisecond
	// DefaultBackoff is how long callers skip Redis after a failure before
	// one of them probes it again.
	DefaultBackoff = time.Second
)

// Options is the connection to Redis ([redis] in the configuration).
type Options struct {
	// Enabled turns the cache on; off, Available is always false.
	Enabled bool
	// URL is a redis:// or rediss:// URL (DefaultURL).
	URL string
	// MaxConnections bounds the pool (DefaultMaxConnections when zero).
	MaxConnections int
	// KeyPrefix starts every key, so that instances of several services
	// can share one Redis (DefaultKeyPrefix when empty).
	KeyPrefix string
}

// The defaults of Options.
const (
	DefaultURL            = "redis://127.0.0.1:6379/0"
	DefaultMaxConnections = 10
	DefaultKeyPrefix      = "paymentd"
)

// Option configures a Cache.
type Option func(*Cache)

// WithClock replaces time.Now for the back-off (tests).
func WithClock(now func() time.Time) Option {
	return func(c *Cache) { c.now = now }
}

// WithBackoff replaces DefaultBackoff.
func WithBackoff(d time.Duration) Option {
	return func(c *Cache) {
		if d > 0 {
			c.backoff = d
		}
	}
}

// Cache is the shared Redis, or a stand-in that is never available when
// [redis].enabled is false. It is safe for concurrent use.
type Cache struct {
	client  *redis.Client
	addr    string
	prefix  string
	log     *slog.Logger
	now     func() time.Time
	backoff time.Duration

	// down is read without the lock on every call, so that the healthy
	// path costs one atomic load; mu guards the rest of the outage state.
	down         atomic.Bool
	mu           sync.Mutex
	since        time.Time // when the outage began
	retryAt      time.Time // no probe before this
	probing      bool      // one caller is trying Redis for everyone
	probeStarted time.Time
}

// New builds the cache for o. A disabled o gives a Cache whose Available
// is always false and whose Client is nil. An enabled one is pinged once,
// briefly: a Redis that is down at start is logged and marked unavailable,
// not an error, since the service runs without it. The error is for a
// configuration that cannot work (a bad URL).
func New(o Options, log *slog.Logger, opts ...Option) (*Cache, error) {
	if log == nil {
		log = slog.Default()
	}
	c := &Cache{prefix: cmp.Or(o.KeyPrefix, DefaultKeyPrefix), log: log, now: time.Now, backoff: DefaultBackoff}
	for _, o := range opts {
		o(c)
	}
	if !o.Enabled {
		return c, nil
	}
	opt, err := redis.ParseURL(cmp.Or(o.URL, DefaultURL))
	if err != nil {
		// url.Error repeats the URL, password included: keep only the cause.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("[redis].url: %w", err)
	}
	opt.PoolSize = cmp.Or(max(o.MaxConnections, 0), DefaultMaxConnections)
	opt.DialTimeout = ioTimeout
	opt.ReadTimeout = ioTimeout
	opt.WriteTimeout = ioTimeout
	opt.PoolTimeout = ioTimeout
	opt.ContextTimeoutEnabled = true
	// The fallback is the retry: a failed command is not repeated, and a
	// failed dial is not redialled, both of which would hold the request.
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	// A plain Redis sends no maintenance notifications; asking for them
	// only adds a command to every new connection.
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}

	libraryLog.Do(func() { redis.SetLogger(libraryLogger{log}) })
	c.client = redis.NewClient(opt)
	c.addr = opt.Addr
	ctx, cancel := context.WithTimeout(context.Background(), 2*ioTimeout)
	defer cancel()
	if err := c.client.Ping(ctx).Err(); err != nil {
		c.ReportError(err)
	} else {
		c.log.Info("redis connected", "addr", c.addr, "key_prefix", c.prefix)
	}
	return c, nil
}

// libraryLog routes go-redis's own log lines (one "failed to dial" per
// failed probe, otherwise printed to stderr) into slog at debug level: the
// outage is reported once by ReportError. go-redis has one process-wide
// logger, so the first enabled Cache's logger is the one used.
var libraryLog sync.Once

type libraryLogger struct{ log *slog.Logger }

func (l libraryLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

// Close releases the connection pool.
func (c *Cache) Close() error {
	if c == nil || c.client == nil {
		return nil
	}
	return c.client.Close()
}

// Enabled reports whether [redis].enabled is set, whatever Redis's health.
func (c *Cache) Enabled() bool { return c != nil && c.client != nil }

// Client is the go-redis client, nil when the cache is disabled. Check
// Available before using it and report the outcome.
func (c *Cache) Client() *redis.Client {
	if c == nil {
		return nil
	}
	return c.client
}

// Key joins parts under the configured prefix: Key("ratelimit", "x") is
// "paymentd:ratelimit:x".
func (c *Cache) Key(parts ...string) string {
	if len(parts) == 0 {
		return c.prefix
	}
	return c.prefix + ":" + strings.Join(parts, ":")
}

// Available reports whether the caller should use Redis now. It is false
// when the cache is disabled, and during an outage until the back-off has
// passed; then it is true for one caller, the probe, whose ReportOK or
// ReportError decides for everyone.
func (c *Cache) Available() bool {
	if c == nil || c.client == nil {
		return false
	}
	if !c.down.Load() {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.down.Load() {
		return true
	}
	now := c.now()
	if now.Before(c.retryAt) {
		return false
	}
	// A probe that never reported (its caller returned early) must not
	// keep Redis out for good: after a back-off another caller probes.
	if c.probing && now.Sub(c.probeStarted) < c.backoff {
		return false
	}
	c.probing, c.probeStarted = true, now
	return true
}

// ReportError records that a Redis call failed. The first failure of an
// outage logs one warning; later ones only push the next probe back.
// redis.Nil (a missing key) is an answer, not a failure, and a cancelled
// caller says nothing about Redis: neither is counted.
func (c *Cache) ReportError(err error) {
	if c == nil || c.client == nil || err == nil || errors.Is(err, redis.Nil) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.probing = false
	if errors.Is(err, context.Canceled) {
		return
	}
	now := c.now()
	c.retryAt = now.Add(c.backoff)
	if c.down.Load() {
		return
	}
	c.down.Store(true)
	c.since = now
	c.log.Warn("redis unavailable, falling back to local state until it recovers",
		"addr", c.addr, "err", err, "retry_every", c.backoff.String())
}

// ReportOK records that a Redis call succeeded; it ends an outage with one
// info line. On the healthy path it is one atomic load.
func (c *Cache) ReportOK() {
	if c == nil || c.client == nil || !c.down.Load() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.down.Load() {
		return
	}
	c.down.Store(false)
	c.probing = false
	c.log.Info("redis available again", "addr", c.addr, "outage", c.now().Sub(c.since).Round(time.Millisecond).String())
}
