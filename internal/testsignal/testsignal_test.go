package testsignal_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/testsignal"
)

// A nil signal is what the service runs with: every method returns at
// once. Begin and Done do nothing, Count and Mark answer 0, and a wait
// fails the test in its words rather than panicking or waiting out the
// timeout.
func TestANilSignalReturnsAtOnce(t *testing.T) {
	t.Parallel()
	var s *testsignal.Signal
	s.Begin()
	s.Done()
	require.Zero(t, s.Count())
	require.Zero(t, s.Mark())
	for name, wait := range map[string]func(testsignal.TB){
		"Wait":      func(f testsignal.TB) { s.Wait(f, 1, "a round") },
		"WaitNext":  func(f testsignal.TB) { s.WaitNext(f, 1, "a round") },
		"WaitAfter": func(f testsignal.TB) { s.WaitAfter(f, 0, 1, "a round") },
	} {
		var f fatal
		began := time.Now()
		wait(&f)
		require.Contains(t, f.msg, "waited for a round on a nil signal", name)
		require.Less(t, time.Since(began), testsignal.Timeout/2, name)
	}
}

// A wait does not count the round under way at its mark: that one may have
// read the state before the test changed it.
func TestWaitAfterSkipsTheRoundUnderWayAtTheMark(t *testing.T) {
	t.Parallel()
	s := testsignal.NewWithin(20 * time.Millisecond)
	s.Begin() // a round under way
	m := s.Mark()
	s.Done() // it ends: not enough
	s.Begin()
	var f fatal
	s.WaitAfter(&f, m, 1, "a round")
	require.Contains(t, f.msg, "1 of 2 seen", "the round under way at the mark was counted")
	s.Done()
	s.WaitAfter(t, m, 1, "a round")
	require.Equal(t, 2, s.Count())
}

func TestWaitCountsEveryDone(t *testing.T) {
	t.Parallel()
	s := testsignal.New()
	go func() {
		for range 3 {
			s.Done()
		}
	}()
	s.Wait(t, 3, "three")
	s.WaitNext(t, 0, "nothing more")
	// The mark comes before the Done it waits for: a WaitNext after `go
	// s.Done()` could take its mark after that Done and wait for another.
	m := s.Mark()
	go s.Done()
	s.WaitAfter(t, m, 1, "one more, without Begin")
	require.Equal(t, 4, s.Count())
}

// fatal records a wait's failure instead of ending the test.
type fatal struct{ msg string }

func (f *fatal) Helper() {}
func (f *fatal) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

func TestAWaitThatSeesNothingFailsTheTestInItsWords(t *testing.T) {
	t.Parallel()
	s := testsignal.NewWithin(50 * time.Millisecond)
	var f fatal
	s.Wait(&f, 1, "the loop's first round")
	require.Contains(t, f.msg, "for the loop's first round: 0 of 1 seen")
	require.Contains(t, f.msg, "waited 50ms")
}
