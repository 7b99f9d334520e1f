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
	var logs bytes.Buffer
	p := startstop.NewPeriodic(startstop.PeriodicOptions{
		Job:  startstop.Job{Active: active.Load, Rounds: rounds, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		Name: "job", Interval: time.Millisecond, StartAttrs: []any{"batch_size", 7},
		Round: func(context.Context) error { runs.Add(1); return nil },
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

	p.Stop()
	require.Equal(t, testsignal.Mark(rounds.Count()), rounds.Mark(), "Stop waited for the round under way")
	p.Stop()
	require.Equal(t, 1, strings.Count(logs.String(), `msg="job started" interval=1ms batch_size=7`), logs.String())
	require.Equal(t, 1, strings.Count(logs.String(), `msg="job stopped"`), "a second Stop does nothing: %s", logs.String())
}

// A failing job is logged once, not every round, and its recovery once.
func TestPeriodicLogsAFailureOnceAndItsRecovery(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var runs atomic.Int32
	rounds := testsignal.New()
	p := startstop.NewPeriodic(startstop.PeriodicOptions{
		Job:  startstop.Job{Rounds: rounds, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		Name: "job", Interval: time.Millisecond,
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
	var logs bytes.Buffer
	p := startstop.NewPeriodic(startstop.PeriodicOptions{
		Job:  startstop.Job{Rounds: rounds, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		Name: "job", Interval: time.Hour,
		Round: func(ctx context.Context) error { return nil },
	})
	ctx, cancel := context.WithCancel(t.Context())
	require.NoError(t, p.Start(ctx))
	rounds.Wait(t, 1, "the round at start")
	cancel()
	p.Stop()
	require.NoError(t, p.Start(t.Context()), "a stopped Periodic starts again")
	rounds.Wait(t, 2, "the round at the second start")
	p.Stop()
	require.Equal(t, 2, strings.Count(logs.String(), `msg="job stopped"`), logs.String())
}
