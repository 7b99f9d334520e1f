package startstop

import (
	"context"
	"errors"
	"sync"
)

// ErrStarted is Start on a loop that runs.
var ErrStarted = errors.New("already started")

// Loop runs one background function. The zero value is stopped.
type Loop struct {
	mu       sync.Mutex
	cancel   context.CancelFunc
	stopping chan struct{}
	done     chan struct{}
}

// Start runs run in a goroutine with a context that ctx's cancellation and
// Stop both end; stopping is closed when Drain begins (a loop that does not
// drain can ignore it). Start on a running loop is ErrStarted.
func (l *Loop) Start(ctx context.Context, run func(ctx context.Context, stopping <-chan struct{})) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done != nil {
		return ErrStarted
	}
	ctx, cancel := context.WithCancel(ctx)
	stopping, done := make(chan struct{}), make(chan struct{})
	l.cancel, l.stopping, l.done = cancel, stopping, done
	go func() {
		defer close(done)
		defer cancel()
		run(ctx, stopping)
	}()
	return nil
}

// Running reports whether the loop has been started and not stopped.
func (l *Loop) Running() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done != nil
}

// Stop cancels the loop's context and waits for run to return. It reports
// whether the loop was running: a second Stop, or a Stop before Start,
// does nothing and reports false.
func (l *Loop) Stop() bool {
	cancel, _, done := l.take()
	if done == nil {
		return false
	}
	cancel()
	<-done
	return true
}

// Drain closes stopping, waits for run to return and only then cancels its
// context: the loop finishes what it has at its own pace (it bounds that
// itself). It reports whether the loop was running.
func (l *Loop) Drain() bool {
	cancel, stopping, done := l.take()
	if done == nil {
		return false
	}
	close(stopping)
	<-done
	cancel()
	return true
}

// take hands the running loop's handles to one stopper and marks the loop
// stopped, so that a concurrent or later Stop finds nothing to stop.
func (l *Loop) take() (context.CancelFunc, chan struct{}, chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cancel, stopping, done := l.cancel, l.stopping, l.done
	l.cancel, l.stopping, l.done = nil, nil, nil
	return cancel, stopping, done
}
