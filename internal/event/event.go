package event

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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

	// claim is the worker's claim of this attempt (nil for an Event built
	// by hand, e.g. in a test that calls a handler directly), and
	// leaderRole the lease role its transactions check; see Tx.
	claim      *store.Claim
	leaderRole string
	// attempt is shared by the copies of this Event a handler makes: it
	// tells the worker that the handler completed the event itself
	// (Complete, committed by Tx).
	attempt *attemptState
}

// attemptState is what one attempt's Event copies share.
type attemptState struct {
	completing bool // Complete ran in the transaction now open
	completed  bool // ... and that transaction committed
}

// ErrClaimLost is returned by Tx when this attempt no longer holds its
// claim (it ran out, the event was reclaimed, or this node lost the leader
// role): nothing of the transaction was committed, and the handler should
// return (the worker discards the attempt's outcome).
var ErrClaimLost = store.ErrClaimLost

// Tx runs fn in a transaction on db that commits only while this attempt
// holds its claim (store.WithClaimTx): the transaction starts with the
// claim fence, which checks that the claim is still the event's and
// unexpired (and that this node still holds the worker's leader role) and
// keeps the event row share-locked until the commit, so the claim cannot be
// reclaimed in between. The fence travels with BEGIN and fn's first
// statement in one round trip. A handler that outlives its claim — it
// ignored its cancelled context, its worker lost leadership — thus commits
// nothing after another attempt may have started: its statements return
// ErrClaimLost, and so does Tx. Handlers write through Tx; a write outside
// it must be idempotent and harmless when repeated (a side effect
// elsewhere, a note that one happened).
func (e Event) Tx(ctx context.Context, db store.DB, fn func(tx pgx.Tx) error) error {
	if e.attempt != nil {
		e.attempt.completing = false
	}
	var err error
	if e.claim != nil {
		err = store.WithClaimTx(ctx, db, *e.claim, e.leaderRole, fn)
	} else {
		err = store.WithTx(ctx, db, fn)
	}
	if e.attempt != nil {
		e.attempt.completed = e.attempt.completed || (err == nil && e.attempt.completing)
		e.attempt.completing = false
	}
	return err
}

// Complete marks the event done inside tx, the handler's last transaction
// (call it from the function given to Tx, as its last write): the event is
// done exactly when that transaction commits, and the worker spares the
// commit of its own it would otherwise make. A handler that completes its
// event must return nil. Outside a worker's attempt (no claim) it does
// nothing.
func (e Event) Complete(ctx context.Context, tx pgx.Tx) error {
	if e.claim == nil || e.attempt == nil {
		return nil
	}
	if err := store.CompleteEvent(ctx, tx, *e.claim); err != nil {
		return err
	}
	e.attempt.completing = true
	return nil
}

// TxAll is Tx for the events of one batch (BatchHandler): one
// transaction whose fence checks every event's claim in one statement
// (store.WithClaimsTx) and that commits only while all of them hold;
// ErrClaimLost otherwise, with nothing committed. CompleteAll, called in
// fn, completes them in the same commit.
func TxAll(ctx context.Context, db store.DB, events []Event, fn func(tx pgx.Tx) error) error {
	if len(events) == 1 {
		return events[0].Tx(ctx, db, fn)
	}
	claims := make([]store.Claim, 0, len(events))
	for _, e := range events {
		if e.attempt != nil {
			e.attempt.completing = false
		}
		if e.claim != nil {
			claims = append(claims, *e.claim)
		}
	}
	var err error
	switch {
	case len(claims) == 0:
		err = store.WithTx(ctx, db, fn)
	case len(claims) == len(events):
		err = store.WithClaimsTx(ctx, db, claims, events[0].leaderRole, fn)
	default:
		return errors.New("event: a batch mixes claimed events and events built by hand")
	}
	for _, e := range events {
		if e.attempt != nil {
			e.attempt.completed = e.attempt.completed || (err == nil && e.attempt.completing)
			e.attempt.completing = false
		}
	}
	return err
}

// CompleteAll marks the events of a batch done inside tx, the batch's
// last transaction (TxAll), in one statement: Complete for many. Events
// without a claim (built by hand) are skipped.
func CompleteAll(ctx context.Context, tx pgx.Tx, events []Event) error {
	claims := make([]store.Claim, 0, len(events))
	for _, e := range events {
		if e.claim != nil && e.attempt != nil {
			claims = append(claims, *e.claim)
		}
	}
	if len(claims) == 0 {
		return nil
	}
	if err := store.CompleteEvents(ctx, tx, claims); err != nil {
		return err
	}
	for _, e := range events {
		if e.claim != nil && e.attempt != nil {
			e.attempt.completing = true
		}
	}
	return nil
}

// completed reports whether the handler completed the event itself.
func (e Event) completed() bool { return e.attempt != nil && e.attempt.completed }

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
		attempt: &attemptState{},
	}
}

// Handler handles the events of one type. It runs at least once per event
// and maybe more often (a retry after a failure, a reclaim after a crash),
// so it must be idempotent; see the package doc for the rule. It must
// return when ctx is done, and write through Event.Tx, so that an attempt
// that outlived its claim commits nothing. An error (or a panic) fails the attempt: the
// event is retried after a backoff, and failed after the last attempt. A
// Permanent error fails the event at once.
type Handler interface {
	Handle(ctx context.Context, e Event) error
}

// BatchHandler is a Handler that also handles several events of its type
// at once: the worker hands it the events of its type that one claim round
// took (two or more, each of a different order, since a claim never takes
// two events of one order), so that their transactions, and the
// statements in them, are one per batch instead of one per event.
// HandleBatch returns one error per event, in order, with Handle's
// meaning: nil is success (the event is done, completed by the handler in
// its batch transaction — TxAll and CompleteAll — or else by the worker),
// an error fails that event's attempt alone. It writes through TxAll (or
// each event's Tx), so that nothing commits once a claim is lost. A
// batch handler may hand any event to Handle, which must stay correct on
// its own: it is the path of a batch of one, and of whatever the batch
// path leaves aside.
type BatchHandler interface {
	Handler
	HandleBatch(ctx context.Context, events []Event) []error
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
