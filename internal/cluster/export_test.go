package cluster

import "time"

// WithStopGrace returns o with the time a query on the wire gets after a
// stop set to d: a test that holds such a query up and lets it go must not
// race the one second the service gives it.
func WithStopGrace(o ElectorOptions, d time.Duration) ElectorOptions {
	o.stopGrace = d
	return o
}
