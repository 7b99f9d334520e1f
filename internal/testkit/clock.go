package testkit

import (
	"sync"
	"time"
)

// Clock is a settable time source: pass its Now where a package takes a
// clock, and move it with Set and Advance. It is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// Epoch is the instant NewClock starts at: a fixed date, so that tests do
// not depend on the day they run.
var Epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// NewClock returns a clock at Epoch.
func NewClock() *Clock { return NewClockAt(Epoch) }

// NewClockAt returns a clock at at.
func NewClockAt(at time.Time) *Clock { return &Clock{t: at} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to at.
func (c *Clock) Set(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = at
}

// Advance moves the clock by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}
