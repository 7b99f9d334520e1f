package startstop_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/testsignal"
)

// A Periodic runs its round while Active says so and not otherwise, and
// its rounds end with Stop.
func TestPeriodicRunsOnlyWhileActive(t *testing.T) {
	t.Parallel()
	var active atomic.Bool
	var runs atomic.Int32
	rounds := testsignal.New()
	p := startstop.NewPeriodic(startstop.PeriodicOptions{
		Name: "job", Interval: time.Millisecond, Active: active.Load, Rounds: rounds,
		Logger: slog.New(slog.DiscardHandler),
		Round:  func(context.Context) error { runs.Add(1); return nil },
	})
	require.NoError(t, p.Start(t.Context()))
	require.ErrorIs(t, p.Start(t.Context()), startstop.ErrStarted)

	rounds.WaitNext(t, 3, "three rounds while inactive")
	require.Zero(t, runs.Load(), "no round ran while inactive")

	active.Store(true)
	rounds.WaitNext(t, 2, "two rounds once active")
	require.GreaterOrEqual(t, runs.Load(), int32(2))

	active.Store(false)
	rounds.WaitNext(t, 1, "a round after the role was lost")
	ran := runs.Load()
	rounds.WaitNext(t, 3, "three more rounds while inactive")
	require.Equal(t, ran, runs.Load(), "no round ran once inactive again")

	require.True(t, p.Stop())
	require.Equal(t, testsignal.Mark(rounds.Count()), rounds.Mark(), "Stop waited for the round under way")
	require.False(t, p.Stop(), "a second Stop does nothing")
}

// A failing job is logged once, not every round, and its recovery once.
func TestPeriodicLogsAFailureOnceAndItsRecovery(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var runs atomic.Int32
	rounds := testsignal.New()
	p := startstop.NewPeriodic(startstop.PeriodicOptions{
		Name: "job", Interval: time.Millisecond, Rounds: rounds,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Round: func(context.Context) error {
			if runs.Add(1) <= 3 {
				return errors.New("database down")
			}
			return nil
		},
	})
	require.NoError(t, p.Start(t.Context()))
	rounds.Wait(t, 5, "five rounds")
	p.Stop()
	require.Equal(t, 1, strings.Count(logs.String(), `msg="job round failed"`), logs.String())
	require.Equal(t, 1, strings.Count(logs.String(), `msg="job works again"`), logs.String())
}

// The rounds end when the context given to Start ends, and start again.
func TestPeriodicEndsWithItsContextAndRestarts(t *testing.T) {
	t.Parallel()
	rounds := testsignal.New()
	p := startstop.NewPeriodic(startstop.PeriodicOptions{
		Name: "job", Interval: time.Hour, Rounds: rounds, Logger: slog.New(slog.DiscardHandler),
		Round: func(ctx context.Context) error { return nil },
	})
	ctx, cancel := context.WithCancel(t.Context())
	require.NoError(t, p.Start(ctx))
	rounds.Wait(t, 1, "the round at start")
	cancel()
	require.True(t, p.Stop())
	require.NoError(t, p.Start(t.Context()), "a stopped Periodic starts again")
	rounds.Wait(t, 2, "the round at the second start")
	require.True(t, p.Stop())
}
