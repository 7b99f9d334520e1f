package cache

import (
	"github.com/rustbill/paymentd/internal/testkit"
	"github.com/rustbill/paymentd/internal/testredis"

	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

const (
	warnUnavailable = "redis unavailable, falling back"
	infoRecovered   = "redis available again"
)

type bundle struct {
	cache *Cache
	clock *testkit.Clock
	logs  *testkit.Logs
}

// setup builds a Cache for url (disabled when url is empty).
func setup(t *testing.T, url string) *bundle {
	t.Helper()
	b := &bundle{clock: testkit.NewClock(), logs: &testkit.Logs{}}
	cfg := Options{Enabled: url != "", URL: url, MaxConnections: 4, KeyPrefix: "test"}
	log := slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := New(cfg, log, WithClock(b.clock.Now), WithBackoff(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	b.cache = c
	return b
}

// deadURL points at a port nobody listens on: every dial is refused.
func deadURL(t *testing.T) string {
	return fmt.Sprintf("redis://127.0.0.1:%d/0", testkit.FreePort(t))
}

func TestDisabledCacheIsNeverAvailable(t *testing.T) {
	t.Parallel()
	b := setup(t, "")
	c := b.cache
	require.False(t, c.Enabled())
	require.False(t, c.Available())
	require.Nil(t, c.Client())
	c.ReportError(errors.New("ignored"))
	c.ReportOK()
	require.False(t, c.Available())
	require.Equal(t, "test:ratelimit:x", c.Key("ratelimit", "x"))
	require.Empty(t, b.logs.String(), "a disabled cache logs nothing")
}

func TestNilCacheIsNeverAvailable(t *testing.T) {
	t.Parallel()
	var c *Cache
	require.False(t, c.Available())
	require.False(t, c.Enabled())
	require.Nil(t, c.Client())
	c.ReportError(errors.New("ignored"))
	c.ReportOK()
	require.NoError(t, c.Close())
}

func TestKeyJoinsPartsUnderThePrefix(t *testing.T) {
	t.Parallel()
	c := setup(t, "").cache
	require.Equal(t, "test", c.Key())
	require.Equal(t, "test:a", c.Key("a"))
	require.Equal(t, "test:ratelimit:/svc/Login:192.0.2.1", c.Key("ratelimit", "/svc/Login:192.0.2.1"))
}

func TestBadURLIsAnErrorNamingTheKeyWithoutThePassword(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"http://127.0.0.1:6379", "redis://user:s3cret@[::1", "redis://:s3cret@host:notaport/0"} {
		cfg := Options{Enabled: true, URL: raw}
		_, err := New(cfg, slog.New(slog.DiscardHandler))
		require.Error(t, err, raw)
		require.Contains(t, err.Error(), "[redis].url")
		require.NotContains(t, err.Error(), "s3cret")
	}
}

func TestRedisDownAtStartIsLoggedOnceAndSkippedDuringTheBackoff(t *testing.T) {
	t.Parallel()
	b := setup(t, deadURL(t))
	c := b.cache
	require.True(t, c.Enabled())
	require.Equal(t, 1, b.logs.Count(slog.LevelWarn, warnUnavailable), b.logs.String())

	for range 100 {
		require.False(t, c.Available(), "skipped until the back-off has passed")
	}
	b.clock.Advance(time.Second)
	require.True(t, c.Available(), "one caller probes after the back-off")
	require.False(t, c.Available(), "only one probe at a time")

	err := c.Client().Ping(context.Background()).Err()
	require.Error(t, err)
	c.ReportError(err)
	require.False(t, c.Available())
	require.Equal(t, 1, b.logs.Count(slog.LevelWarn, warnUnavailable), "one warning per outage")
	require.Zero(t, b.logs.Count(slog.LevelInfo, infoRecovered))
}

func TestFailingRedisCostsNothingWhileMarkedUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t, deadURL(t))
	start := time.Now()
	for range 10_000 {
		require.False(t, b.cache.Available())
	}
	require.Less(t, time.Since(start), 500*time.Millisecond, "no network call while marked unavailable")
}

func TestProbeThatNeverReportsDoesNotLockRedisOut(t *testing.T) {
	t.Parallel()
	b := setup(t, deadURL(t))
	c := b.cache
	b.clock.Advance(time.Second)
	require.True(t, c.Available())
	require.False(t, c.Available())
	b.clock.Advance(time.Second)
	require.True(t, c.Available(), "a new probe once the silent one is a back-off old")
}

func TestCancelledCallerDoesNotStartAnOutage(t *testing.T) {
	t.Parallel()
	b := setup(t, deadURL(t))
	c := b.cache
	b.clock.Advance(time.Second)
	require.True(t, c.Available())
	c.ReportOK()
	require.True(t, c.Available())

	c.ReportError(context.Canceled)
	c.ReportError(fmt.Errorf("eval: %w", context.Canceled))
	c.ReportError(redis.Nil)
	c.ReportError(nil)
	require.True(t, c.Available())
	require.Equal(t, 1, b.logs.Count(slog.LevelWarn, warnUnavailable), "only the one at start")
	require.Equal(t, 1, b.logs.Count(slog.LevelInfo, infoRecovered))
}

func TestOutageAgainstARealRedisIsLoggedOnceAndEndsWhenItReturns(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t)
	b := setup(t, srv.URL())
	c := b.cache
	ctx := context.Background()
	require.True(t, c.Available())
	require.Equal(t, 1, b.logs.Count(slog.LevelInfo, "redis connected"))

	key := c.Key("probe")
	require.NoError(t, c.Client().Set(ctx, key, "v", time.Minute).Err())
	got, err := c.Client().Get(ctx, key).Result()
	require.NoError(t, err)
	require.Equal(t, "v", got)
	c.ReportOK()

	srv.Stop(t)
	// Requests keep coming during the outage: the first failure marks it,
	// every later probe fails again, and only one line is logged.
	for range 5 {
		if c.Available() {
			start := time.Now()
			err := c.Client().Ping(ctx).Err()
			require.Error(t, err)
			require.Less(t, time.Since(start), time.Second, "a dead Redis answers quickly")
			c.ReportError(err)
		}
		b.clock.Advance(time.Second)
	}
	require.Equal(t, 1, b.logs.Count(slog.LevelWarn, warnUnavailable), b.logs.String())

	srv.Start(t)
	require.Eventually(t, func() bool {
		b.clock.Advance(time.Second)
		if !c.Available() {
			return false
		}
		if err := c.Client().Ping(ctx).Err(); err != nil {
			c.ReportError(err)
			return false
		}
		c.ReportOK()
		return true
	}, 10*time.Second, 50*time.Millisecond)
	require.True(t, c.Available())
	require.Equal(t, 1, b.logs.Count(slog.LevelInfo, infoRecovered))
	require.Equal(t, 1, b.logs.Count(slog.LevelWarn, warnUnavailable))
	require.NotContains(t, b.logs.String(), "password")
}
