package testkit

import "context"

// ExpiresOn returns a caller's context whose deadline passes at the first
// value on event (a request reached its server, a handler started): what a
// passed deadline does to work that is under way, without racing a short
// real deadline against a machine too busy to start the work in time. Its
// Err is context.DeadlineExceeded once passed; it has no Deadline time, so
// nothing sends the server a timeout of its own.
func ExpiresOn[T any](event <-chan T) context.Context {
	c := &eventDeadline{Context: context.Background(), done: make(chan struct{})}
	go func() {
		<-event
		close(c.done)
	}()
	return c
}

// eventDeadline is ExpiresOn's context. It wraps Background, not a test's
// context: context.Cause and the contexts derived from it must see its
// error, not look through it to a parent's cancellation.
type eventDeadline struct {
	context.Context
	done chan struct{}
}

func (c *eventDeadline) Done() <-chan struct{} { return c.done }

func (c *eventDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
