package ratelimit

import (
	"github.com/rustbill/paymentd/internal/testkit"
	"github.com/rustbill/paymentd/internal/testredis"

	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/cache"
)

const (
	warnUnavailable = "redis unavailable, falling back"
	infoRecovered   = "redis available again"
)

// instance is one paymentd instance: its own cache client, its own
// Fallback limiter and its own server, all logging to one buffer.
type instance struct {
	cache *cache.Cache
	srv   *server
	logs  *testkit.Logs
}

func newCache(t *testing.T, url string, clk *testkit.Clock, logs *testkit.Logs) *cache.Cache {
	t.Helper()
	cfg := cache.Options{Enabled: url != "", URL: url, KeyPrefix: "test", MaxConnections: 2}
	c, err := cache.New(cfg, logs.Text(), cache.WithClock(clk.Now))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c
}

func newInstance(t *testing.T, url string, clk *testkit.Clock) *instance {
	t.Helper()
	in := &instance{logs: &testkit.Logs{}}
	in.cache = newCache(t, url, clk, in.logs)
	in.srv = newServerLogging(t, NewFallback(in.cache, WithClock(clk.Now)), loginRules(), in.logs)
	return in
}

func TestRedisCountersAreSharedBetweenInstances(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t)
	clk := testkit.NewClock()
	a, b := NewRedis(newCache(t, srv.URL(), clk, &testkit.Logs{}), WithClock(clk.Now)),
		NewRedis(newCache(t, srv.URL(), clk, &testkit.Logs{}), WithClock(clk.Now))
	const key = LoginProcedure + ":198.51.100.1"

	allowN(t, a, key, 5, 3)
	allowN(t, b, key, 5, 2)
	require.Equal(t, 200*time.Millisecond, refused(t, a, key, 5))
	require.Equal(t, 200*time.Millisecond, refused(t, b, key, 5))
	allowN(t, b, LoginProcedure+":198.51.100.2", 5, 5)

	clk.Advance(200 * time.Millisecond)
	allowN(t, a, key, 5, 1)
	refused(t, b, key, 5)
	clk.Advance(time.Second)
	allowN(t, b, key, 5, 5)
	refused(t, a, key, 5)
}

func TestRedisKeyIsUnderThePrefixAndExpiresWithItsWindow(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t)
	clk := testkit.NewClock()
	c := newCache(t, srv.URL(), clk, &testkit.Logs{})
	l := NewRedis(c, WithClock(clk.Now))
	allowN(t, l, RegisterProcedure+":198.51.100.1", 1, 1)

	ctx := context.Background()
	keys, err := c.Client().Keys(ctx, "*").Result()
	require.NoError(t, err)
	require.Equal(t, []string{"test:ratelimit:" + RegisterProcedure + ":198.51.100.1"}, keys)
	ttl, err := c.Client().PTTL(ctx, keys[0]).Result()
	require.NoError(t, err)
	require.Positive(t, ttl)
	require.LessOrEqual(t, ttl, time.Second)
}

func TestRedisUsesTheServerClockByDefault(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t)
	c := newCache(t, srv.URL(), testkit.NewClock(), &testkit.Logs{})
	l := NewRedis(c)
	allowN(t, l, "k", 1, 1)
	ok, retryAfter, err := l.Allow(context.Background(), "k", 1)
	require.NoError(t, err)
	require.False(t, ok)
	require.Greater(t, retryAfter, 500*time.Millisecond, "a second call right after waits most of a second")
	require.LessOrEqual(t, retryAfter, time.Second)
}

func TestRedisLimiterWithoutRedisIsAnError(t *testing.T) {
	t.Parallel()
	c := newCache(t, "", testkit.NewClock(), &testkit.Logs{})
	_, _, err := NewRedis(c).Allow(context.Background(), "k", 1)
	require.ErrorIs(t, err, ErrNoRedis)
}

func TestFallbackWithoutRedisCountsInMemory(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	logs := &testkit.Logs{}
	f := NewFallback(newCache(t, "", clk, logs), WithClock(clk.Now))
	allowN(t, f, "k", 5, 5)
	refused(t, f, "k", 5)
	require.Empty(t, logs.String(), "a disabled Redis is not an outage")
}

func TestFallbackWithRedisDownAtStartCountsInMemory(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	logs := &testkit.Logs{}
	f := NewFallback(newCache(t, fmt.Sprintf("redis://127.0.0.1:%d/0", testkit.FreePort(t)), clk, logs), WithClock(clk.Now))
	allowN(t, f, "k", 5, 5)
	refused(t, f, "k", 5)
	clk.Advance(time.Second)
	allowN(t, f, "k", 5, 5) // the probe fails and falls back within the call
	require.Equal(t, 1, logs.Count(slog.LevelWarn, warnUnavailable), logs.String())
}

// requireAnswered checks that a call got an answer from the service: either
// it was let through or it was refused, but not a transport failure.
func requireAnswered(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		require.Equal(t, connect.CodeResourceExhausted, connect.CodeOf(err), "%v", err)
	}
}

func TestRedisOutageFallsBackToMemoryLogsOnceAndRecovers(t *testing.T) {
	t.Parallel()
	srv := testredis.Start(t)
	clk := testkit.NewClock()
	a, b := newInstance(t, srv.URL(), clk), newInstance(t, srv.URL(), clk)
	const ip = "198.51.100.1"
	sharedKey := "test:ratelimit:" + LoginProcedure + ":" + ip
	ctx := context.Background()

	// Redis up: the two instances share one count.
	a.srv.callN(t, 3, LoginProcedure, ip)
	b.srv.callN(t, 2, LoginProcedure, ip)
	requireExhausted(t, b.srv.call(t, protoConnect, LoginProcedure, ip), 200*time.Millisecond)
	requireExhausted(t, a.srv.call(t, protoConnect, LoginProcedure, ip), 200*time.Millisecond)
	require.EqualValues(t, 1, a.cache.Client().Exists(ctx, sharedKey).Val())

	// Redis down: every request is still answered, each instance enforces
	// the limit on its own.
	srv.Stop(t)
	clk.Advance(time.Second)
	for _, in := range []*instance{a, b} {
		start := time.Now()
		in.srv.callN(t, 5, LoginProcedure, ip)
		requireExhausted(t, in.srv.call(t, protoConnect, LoginProcedure, ip), 200*time.Millisecond)
		require.Less(t, time.Since(start), 2*time.Second, "a dead Redis does not hold requests")
	}
	// The outage goes on across several back-offs; each probe fails again.
	for range 5 {
		clk.Advance(1100 * time.Millisecond)
		for _, in := range []*instance{a, b} {
			for range 3 {
				requireAnswered(t, in.srv.call(t, protoConnect, LoginProcedure, ip))
			}
		}
	}
	for _, in := range []*instance{a, b} {
		require.Equal(t, 1, in.logs.Count(slog.LevelWarn, warnUnavailable), "one warning per outage:\n%s", in.logs)
		require.Zero(t, in.logs.Count(slog.LevelInfo, infoRecovered))
	}

	// Redis back on the same port: after a back-off each instance probes it,
	// logs the recovery once and counts there again.
	srv.Start(t)
	require.Eventually(t, func() bool {
		clk.Advance(1100 * time.Millisecond)
		for _, in := range []*instance{a, b} {
			_ = in.srv.call(t, protoConnect, LoginProcedure, "203.0.113.9")
		}
		return a.logs.Count(slog.LevelInfo, infoRecovered) == 1 && b.logs.Count(slog.LevelInfo, infoRecovered) == 1
	}, 10*time.Second, 20*time.Millisecond)

	clk.Advance(time.Second)
	a.srv.callN(t, 3, LoginProcedure, ip)
	b.srv.callN(t, 2, LoginProcedure, ip)
	requireExhausted(t, a.srv.call(t, protoConnect, LoginProcedure, ip), 200*time.Millisecond)
	requireExhausted(t, b.srv.call(t, protoConnect, LoginProcedure, ip), 200*time.Millisecond)
	require.EqualValues(t, 1, a.cache.Client().Exists(ctx, sharedKey).Val(), "counted in the restarted Redis")
	for _, in := range []*instance{a, b} {
		require.Equal(t, 1, in.logs.Count(slog.LevelWarn, warnUnavailable))
		require.Equal(t, 1, in.logs.Count(slog.LevelInfo, infoRecovered))
	}
}
