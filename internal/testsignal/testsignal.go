// Package testsignal lets a test wait for what a background loop did (a
// round finished, an attempt ended) instead of sleeping and hoping the loop
// ran meanwhile. A test that sleeps and then asserts that nothing happened
// passes without testing anything on a machine slow enough that the loop
// never ran during the sleep; waiting for a signal makes "nothing happened"
// mean "nothing happened in the rounds that ran".
//
// A loop holds a *Signal, nil in the service, and every method returns at
// once on a nil Signal: Begin and Done do nothing, so production pays one
// nil check per round; Count and Mark answer 0; a wait fails the test at
// once, since no loop counts into a signal it was never given (a test that
// forgot to set it learns so instead of waiting out Timeout). Tests set
// it through the loop's options before it starts. The package imports
// neither testing nor anything of the module: production code links it.
package testsignal

import (
	"cmp"
	"sync"
	"time"
)

// Timeout is how long the waits wait before they fail the test: long enough
// for a loaded CI machine, short enough that a loop that stopped fails in
// the test's own words instead of go test's ten-minute panic.
const Timeout = 30 * time.Second

// TB is the part of testing.TB the waits use.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Signal counts what a loop did. A round of a loop calls Begin when it
// starts and Done when it ends; a thing that has no start worth marking (an
// attempt's end, a stop that reached a query) calls Done alone. The zero
// value is ready; a nil *Signal is off.
type Signal struct {
	// timeout replaces Timeout when set (the package's own test).
	timeout time.Duration

	mu    sync.Mutex
	begun int
	done  int
	// changed is closed and replaced at every Done, waking the waits.
	changed chan struct{}
}

// New returns a signal for a test to hand to a loop.
func New() *Signal { return &Signal{} }

// Begin marks the start of a round. Nil: nothing.
func (s *Signal) Begin() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.begun++
	s.mu.Unlock()
}

// Done marks the end of a round, or one more occurrence. Nil: nothing.
func (s *Signal) Done() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.done++
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	s.mu.Unlock()
}

// Count is how many times Done was called. Nil: 0.
func (s *Signal) Count() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// Wait waits until Done has been called n times in all, and fails the test
// after Timeout (nil: at once).
func (s *Signal) Wait(t TB, n int, what string) {
	t.Helper()
	s.waitFor(t, n, what)
}

// Mark is a point in a signal's rounds (see Mark and WaitAfter).
type Mark int

// Mark returns the point after which WaitAfter counts rounds: the round
// under way now, if any, is before it. Nil: 0.
func (s *Signal) Mark() Mark {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return Mark(max(s.begun, s.done))
}

// WaitAfter waits until n rounds begun after m have ended, and fails the
// test after Timeout. The round under way at the mark does not count: it
// may have looked at the database before the test changed it. The loop's
// rounds must run one after another (each loop here has one goroutine). A
// signal whose loop never calls Begin counts n Dones after the mark.
func (s *Signal) WaitAfter(t TB, m Mark, n int, what string) {
	t.Helper()
	s.waitFor(t, int(m)+n, what)
}

// WaitNext is WaitAfter from now: n whole rounds begun after the call.
func (s *Signal) WaitNext(t TB, n int, what string) {
	t.Helper()
	s.WaitAfter(t, s.Mark(), n, what)
}

func (s *Signal) waitFor(t TB, target int, what string) {
	t.Helper()
	if s == nil {
		t.Fatalf("waited for %s on a nil signal: no loop counts into it", what)
		return
	}
	limit := cmp.Or(s.timeout, Timeout)
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if s.done >= target {
			s.mu.Unlock()
			return
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed, done := s.changed, s.done
		s.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("waited %s for %s: %d of %d seen", limit, what, done, target)
			return
		}
	}
}
