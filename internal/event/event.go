package event

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store"
)

// Event is one attempt at an event as a handler sees it.
type Event struct {
	ID      uuid.UUID
	Type    string
	OrderID uuid.UUID
	Payload json.RawMessage
	// Attempt is the number of this attempt, 1 for the first.
	Attempt int
	// MaxAttempts is [events].max_attempts: the attempt of that number is
	// the last one; when it fails the event is failed for good.
	MaxAttempts int
	CreatedAt   time.Time
}

// LastAttempt reports whether a failure of this attempt fails the event for
// good. A handler with a fallback for "it will never work" (cancel the
// order instead of provisioning it) takes it on the last attempt.
func (e Event) LastAttempt() bool { return e.Attempt >= e.MaxAttempts }

// Decode unmarshals the payload into v.
func (e Event) Decode(v any) error { return json.Unmarshal(e.Payload, v) }

func fromRow(r store.Event, maxAttempts int) Event {
	return Event{
		ID: r.ID, Type: r.EventType, OrderID: r.OrderID, Payload: json.RawMessage(r.Payload),
		Attempt: int(r.Attempts), MaxAttempts: maxAttempts, CreatedAt: r.CreatedAt,
	}
}

// Handler handles the events of one type. It runs at least once per event
// and maybe more often (a retry after a failure, a reclaim after a crash),
// so it must be idempotent; see the package doc for the rule. It must
// return when ctx is done. An error (or a panic) fails the attempt: the
// event is retried after a backoff, and failed after the last attempt. A
// Permanent error fails the event at once.
type Handler interface {
	Handle(ctx context.Context, e Event) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, e Event) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, e Event) error { return f(ctx, e) }

// Permanent marks err as one that no retry can fix (a malformed payload):
// the event is failed at once instead of after its last attempt.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}
