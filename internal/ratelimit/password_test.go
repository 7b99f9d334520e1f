package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/testkit"
)

// A per-minute key outlives Memory's one-second generations: forgetting it
// early would hand an attacker a fresh account budget every two seconds.
func TestMemoryKeepsAPerMinuteKeyAcrossItsGenerations(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	m := NewMemory(WithClock(clk.Now))
	for range 2 {
		ok, _, err := m.AllowRate(context.Background(), "k", PerMinute(2))
		require.NoError(t, err)
		require.True(t, ok)
	}
	for range 10 {
		clk.Advance(2 * time.Second)
		ok, retryAfter, err := m.AllowRate(context.Background(), "k", PerMinute(2))
		require.NoError(t, err)
		require.False(t, ok, "the burst is still spent")
		require.Positive(t, retryAfter)
	}
	clk.Advance(10 * time.Second) // 30 s since the burst: one interval
	ok, _, err := m.AllowRate(context.Background(), "k", PerMinute(2))
	require.NoError(t, err)
	require.True(t, ok)
}

func TestPasswordBudgetRefusesPerAccountThenGlobally(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	b := NewPasswordBudget(NewMemory(WithClock(clk.Now)), Limits{Enabled: true, PasswordPerSec: 3, PasswordPerAccountPerMin: 2}, nil)
	ctx := context.Background()
	for range 2 {
		ok, _ := b.AllowPassword(ctx, "customer:victim@example.com")
		require.True(t, ok)
	}
	ok, retryAfter := b.AllowPassword(ctx, "customer:victim@example.com")
	require.False(t, ok, "the account's budget is spent")
	require.Equal(t, 30*time.Second, retryAfter)

	// The refused attempt spent none of the global budget: one is left.
	ok, _ = b.AllowPassword(ctx, "customer:other@example.com")
	require.True(t, ok)
	ok, retryAfter = b.AllowPassword(ctx, "customer:third@example.com")
	require.False(t, ok, "the global budget is spent")
	require.Positive(t, retryAfter)
	require.LessOrEqual(t, retryAfter, time.Second)
}

func TestPasswordBudgetIsOffWithTheRateLimit(t *testing.T) {
	t.Parallel()
	require.Nil(t, NewPasswordBudget(NewMemory(), Limits{Enabled: false}, nil))
	var b *PasswordBudget
	ok, _ := b.AllowPassword(context.Background(), "customer:x@example.com")
	require.True(t, ok)
}

func TestEveryPasswordProcedureHasTheLoginLimit(t *testing.T) {
	t.Parallel()
	rules := Rules(Limits{Enabled: true, LoginPerSec: 7, RegisterPerSec: 1})
	for _, p := range []string{LoginProcedure, AdminLoginProcedure, ChangePasswordProcedure, DisableTotpProcedure,
		StartTotpEnrolmentProcedure, ConfirmTotpEnrolmentProcedure} {
		require.Equal(t, 7, rules[p], p)
	}
	require.Equal(t, 1, rules[RegisterProcedure])
}
