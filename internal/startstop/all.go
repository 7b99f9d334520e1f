package startstop

import "context"

// Service is what StartAll and StopAll start and stop: every background
// service of the module (Loop's users) has this shape.
type Service interface {
	Start(ctx context.Context) error
	Stop()
}

// StartAll starts services in order, each after the one it may depend on
// (a listener before what it wakes, a lease before the work it gates). When
// one fails to start, those already started are stopped, last first, and
// its error is returned: nothing is left running half-started.
func StartAll(ctx context.Context, services ...Service) error {
	for i, s := range services {
		if err := s.Start(ctx); err != nil {
			StopAll(services[:i]...)
			return err
		}
	}
	return nil
}

// StopAll stops services in the reverse of their start order, so that each
// stops while what it depends on still runs (a worker drains before the
// lease it works under is resigned).
func StopAll(services ...Service) {
	for i := len(services) - 1; i >= 0; i-- {
		services[i].Stop()
	}
}
