package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rustbill/paymentd/internal/testkit"
	"github.com/stretchr/testify/require"
)

func allowN(t *testing.T, l Limiter, key string, perSec, n int) {
	t.Helper()
	for i := range n {
		ok, _, err := l.Allow(context.Background(), key, perSec)
		require.NoError(t, err)
		require.True(t, ok, "request %d of %d", i+1, n)
	}
}

func refused(t *testing.T, l Limiter, key string, perSec int) time.Duration {
	t.Helper()
	ok, retryAfter, err := l.Allow(context.Background(), key, perSec)
	require.NoError(t, err)
	require.False(t, ok)
	require.Positive(t, retryAfter)
	return retryAfter
}

func TestMemorySixthRequestInOneSecondIsRefused(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	m := NewMemory(WithClock(clk.Now))
	allowN(t, m, "login:192.0.2.1", 5, 5)
	require.Equal(t, 200*time.Millisecond, refused(t, m, "login:192.0.2.1", 5))
	allowN(t, m, "login:192.0.2.2", 5, 5)
}

func TestMemoryRefillsOneRequestPerIntervalAndAllAfterTheWindow(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	m := NewMemory(WithClock(clk.Now))
	allowN(t, m, "k", 5, 5)
	clk.Advance(199 * time.Millisecond)
	require.Equal(t, time.Millisecond, refused(t, m, "k", 5))
	clk.Advance(time.Millisecond)
	allowN(t, m, "k", 5, 1)
	refused(t, m, "k", 5)

	clk.Advance(time.Second)
	allowN(t, m, "k", 5, 5)
	refused(t, m, "k", 5)
}

func TestMemoryRegisterAllowsOnePerSecond(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	m := NewMemory(WithClock(clk.Now))
	allowN(t, m, "register:192.0.2.1", 1, 1)
	require.Equal(t, time.Second, refused(t, m, "register:192.0.2.1", 1))
	clk.Advance(999 * time.Millisecond)
	refused(t, m, "register:192.0.2.1", 1)
	clk.Advance(time.Millisecond)
	allowN(t, m, "register:192.0.2.1", 1, 1)
}

func TestMemoryRefusedRequestsDoNotPushTheWindowBack(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	m := NewMemory(WithClock(clk.Now))
	allowN(t, m, "k", 1, 1)
	for range 50 {
		refused(t, m, "k", 1)
	}
	clk.Advance(time.Second)
	allowN(t, m, "k", 1, 1)
}

func TestMemoryPerSecondThatDoesNotDivideASecondStillAllowsTheBurst(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	m := NewMemory(WithClock(clk.Now))
	allowN(t, m, "k", 3, 3)
	refused(t, m, "k", 3)
	clk.Advance(time.Second)
	allowN(t, m, "k", 3, 3)
}

func TestMemoryRejectsALimitBelowOne(t *testing.T) {
	t.Parallel()
	_, _, err := NewMemory().Allow(context.Background(), "k", 0)
	require.ErrorIs(t, err, errPerSec)
}

func TestMemoryForgetsIdleKeysSoMemoryStaysBoundedUnderManyIPs(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	m := NewMemory(WithClock(clk.Now))
	const perStep, step = 1000, 100 * time.Millisecond
	// 60 000 distinct clients over 6 s, 10 000 a second: only those of the
	// last two windows may be held.
	for s := range 60 {
		for i := range perStep {
			allowN(t, m, fmt.Sprintf("login:10.%d.%d.%d", s, i/256, i%256), 5, 1)
		}
		require.LessOrEqual(t, m.Len(), 2*int(time.Second/step)*perStep+perStep, "after step %d", s)
		clk.Advance(step)
	}
	clk.Advance(2 * time.Second)
	allowN(t, m, "login:192.0.2.1", 5, 1)
	require.Equal(t, 1, m.Len(), "every idle key is gone")
}

func TestMemoryForgettingDoesNotResetALiveKey(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	m := NewMemory(WithClock(clk.Now))
	allowN(t, m, "other", 5, 1) // starts the generation clock
	clk.Advance(950 * time.Millisecond)
	allowN(t, m, "k", 5, 5)
	clk.Advance(100 * time.Millisecond) // a rotation: k moves to the older generation
	refused(t, m, "k", 5)
	clk.Advance(50 * time.Millisecond)
	refused(t, m, "k", 5)
	clk.Advance(time.Second) // k's bucket is full again, and k is forgotten
	allowN(t, m, "k", 5, 5)
	refused(t, m, "k", 5)
}

func TestMemoryFloodOfKeysIsCappedByMaxKeys(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	m := NewMemory(WithClock(clk.Now), WithMaxKeys(100))
	for i := range 10_000 {
		allowN(t, m, fmt.Sprintf("k%d", i), 5, 1)
	}
	require.LessOrEqual(t, m.Len(), 200)
}

func TestMemoryConcurrentRequestsOnOneKeyAllowExactlyTheBurst(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	m := NewMemory(WithClock(clk.Now))
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			ok, _, err := m.Allow(context.Background(), "k", 5)
			if err == nil && ok {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 5, allowed.Load())
}
