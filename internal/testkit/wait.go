package testkit

import (
	"testing"
	"time"
)

// WaitTimeout is how long WaitOrTimeout waits: long enough for a loaded CI
// machine, short enough that a hang fails in the test's own words instead of
// go test's ten-minute panic.
const WaitTimeout = 10 * time.Second

// WaitOrTimeout receives one value from ch, or fails the test after
// WaitTimeout, saying what it waited for.
func WaitOrTimeout[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return WaitOrTimeoutFor(t, ch, WaitTimeout, what)
}

// WaitOrTimeoutFor is WaitOrTimeout with its own limit.
func WaitOrTimeoutFor[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("waited %s for %s", d, what)
		var zero T
		return zero
	}
}
