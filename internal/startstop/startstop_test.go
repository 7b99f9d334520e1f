package startstop_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rustbill/paymentd/internal/startstop"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A loop starts once at a time, stops by cancellation and waits for the
// function to return, is a no-op to stop twice, and starts again.
func TestLoopStartsOnceStopsOnceAndRestarts(t *testing.T) {
	t.Parallel()
	var l startstop.Loop
	require.False(t, l.Stop(), "stopping a loop that never ran does nothing")
	var runs, returned atomic.Int32
	run := func(ctx context.Context, _ <-chan struct{}) {
		runs.Add(1)
		<-ctx.Done()
		returned.Add(1)
	}
	require.NoError(t, l.Start(context.Background(), run))
	require.True(t, l.Running())
	require.ErrorIs(t, l.Start(context.Background(), run), startstop.ErrStarted)
	require.True(t, l.Stop())
	require.EqualValues(t, 1, returned.Load(), "Stop waited for the function to return")
	require.False(t, l.Running())
	require.False(t, l.Stop(), "a second Stop does nothing")

	require.NoError(t, l.Start(context.Background(), run), "a stopped loop starts again")
	require.True(t, l.Stop())
	require.EqualValues(t, 2, runs.Load())
}

// Drain signals first and cancels only after the function returned; the
// parent context's cancellation also ends the loop.
func TestDrainSignalsBeforeItCancels(t *testing.T) {
	t.Parallel()
	var l startstop.Loop
	var cancelledBeforeReturn atomic.Bool
	require.NoError(t, l.Start(context.Background(), func(ctx context.Context, stopping <-chan struct{}) {
		<-stopping
		cancelledBeforeReturn.Store(ctx.Err() != nil)
	}))
	require.True(t, l.Drain())
	require.False(t, cancelledBeforeReturn.Load(), "the context was still live while the loop drained")

	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	require.NoError(t, l.Start(ctx, func(ctx context.Context, _ <-chan struct{}) { <-ctx.Done(); close(ended) }))
	cancel()
	<-ended
	require.True(t, l.Stop(), "the loop still counts as started until stopped")
}

// Concurrent Stops: one stops, the others find nothing, none blocks.
func TestConcurrentStopsStopOnce(t *testing.T) {
	t.Parallel()
	var l startstop.Loop
	require.NoError(t, l.Start(context.Background(), func(ctx context.Context, _ <-chan struct{}) { <-ctx.Done() }))
	var wg sync.WaitGroup
	var stopped atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l.Stop() {
				stopped.Add(1)
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 1, stopped.Load())
}
