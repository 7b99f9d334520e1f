package testsignal

import "time"

// NewWithin is New with its waits failing after d instead of Timeout.
func NewWithin(d time.Duration) *Signal { return &Signal{timeout: d} }
