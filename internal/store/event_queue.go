package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// Event statuses (events_status_check).
const (
	EventPending    = "pending"
	EventProcessing = "processing"
	EventDone       = "done"
	EventFailed     = "failed"
)

// Claim is one attempt at an event as the worker holds it: the event id,
// the node that claimed it and the attempt number. Finishing an attempt
// names all three, so a worker whose claim expired and was taken over can
// no longer change the event.
type Claim struct {
	ID       uuid.UUID
	Node     string
	Attempts int32
}

// ClaimOf is the claim behind an event row returned by ClaimEvents.
func ClaimOf(e Event) Claim {
	var node string
	if e.LockedBy != nil {
		node = *e.LockedBy
	}
	return Claim{ID: e.ID, Node: node, Attempts: e.Attempts}
}

// ReclaimedEvent is a processing event whose claim had expired, as
// ReclaimExpiredEvents left it (pending, or failed after its last attempt).
type ReclaimedEvent = dbsqlc.ReclaimExpiredEventsRow

// ClaimEvents claims up to limit due pending events for node, oldest first,
// until lease from now (database clock), never two of one order and never
// one whose order has an older event unfinished (see event_worker.sql).
//
// The claim must walk events_pending_idx in order and stop after limit
// eligible events, however large the backlog. PostgreSQL picks that plan
// when it knows the backlog is large; right after a burst, with statistics
// that still say the queue is empty, it reads every pending event and
// sorts them instead, once per claim. Sorting is therefore switched off
// for the claim's transaction (SET LOCAL), which leaves the ordered index
// scan as the only plan.
func ClaimEvents(ctx context.Context, db DB, node string, limit int, lease time.Duration) ([]Event, error) {
	var rows []Event
	err := WithTx(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL enable_sort = off"); err != nil {
			return MapError(err)
		}
		var err error
		rows, err = dbsqlc.New(tx).ClaimEvents(ctx, dbsqlc.ClaimEventsParams{Node: node, Lease: lease, MaxEvents: int32(limit)})
		return MapError(err)
	})
	return rows, err
}

// ReclaimExpiredEvents returns processing events whose claim expired to
// pending (failed when that attempt was the maxAttempts-th).
func ReclaimExpiredEvents(ctx context.Context, db DB, maxAttempts int) ([]ReclaimedEvent, error) {
	rows, err := dbsqlc.New(db).ReclaimExpiredEvents(ctx, int32(maxAttempts))
	return rows, MapError(err)
}

// CompleteEvent marks the claimed event done. ErrNotFound when the claim
// was lost.
func CompleteEvent(ctx context.Context, db DB, c Claim) error {
	n, err := dbsqlc.New(db).CompleteEvent(ctx, dbsqlc.CompleteEventParams{ID: c.ID, Node: c.Node, Attempts: c.Attempts})
	if err != nil {
		return MapError(err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// FailEventAttempt records a failed attempt with lastError: the event is
// pending again after backoff, or failed when the attempt was the
// maxAttempts-th. It returns the new status; ErrNotFound when the claim was
// lost.
func FailEventAttempt(ctx context.Context, db DB, c Claim, maxAttempts int, backoff time.Duration, lastError string) (string, error) {
	st, err := dbsqlc.New(db).FailEventAttempt(ctx, dbsqlc.FailEventAttemptParams{
		MaxAttempts: int32(maxAttempts), Backoff: backoff, LastError: lastError,
		ID: c.ID, Node: c.Node, Attempts: c.Attempts,
	})
	return st, MapError(err)
}

// ReleaseEvent hands a claimed event back without counting the attempt (the
// worker stopped while it ran). ErrNotFound when the claim was lost.
func ReleaseEvent(ctx context.Context, db DB, c Claim) error {
	n, err := dbsqlc.New(db).ReleaseEvent(ctx, dbsqlc.ReleaseEventParams{ID: c.ID, Node: c.Node, Attempts: c.Attempts})
	if err != nil {
		return MapError(err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// GetEvent reads one event; ErrNotFound when there is none.
func GetEvent(ctx context.Context, db DB, id uuid.UUID) (Event, error) {
	e, err := dbsqlc.New(db).GetEvent(ctx, id)
	return e, MapError(err)
}

// EventFilter selects events; nil fields do not filter.
type EventFilter struct {
	Status    *string
	EventType *string
	OrderID   *uuid.UUID
}

// ListEvents returns one page of events, newest first, and the number of
// events matching f.
func ListEvents(ctx context.Context, db DB, f EventFilter, p Page) ([]Event, int64, error) {
	q := dbsqlc.New(db)
	total, err := q.CountEvents(ctx, dbsqlc.CountEventsParams{Status: f.Status, EventType: f.EventType, OrderID: f.OrderID})
	if err != nil {
		return nil, 0, MapError(err)
	}
	if total == 0 || p.Offset >= total {
		return nil, total, nil
	}
	rows, err := q.ListEvents(ctx, dbsqlc.ListEventsParams{
		Status: f.Status, EventType: f.EventType, OrderID: f.OrderID, RowLimit: p.Limit, RowOffset: p.Offset,
	})
	return rows, total, MapError(err)
}

// RetryFailedEvent puts a failed event back to pending, due at once, with
// its attempts reset. ErrNotFound when the event does not exist or is not
// failed.
func RetryFailedEvent(ctx context.Context, db DB, id uuid.UUID) (Event, error) {
	e, err := dbsqlc.New(db).RetryFailedEvent(ctx, id)
	return e, MapError(err)
}

// PendingOrdersCreatedBefore returns up to limit ids of pending orders
// created before cutoff, oldest first.
func PendingOrdersCreatedBefore(ctx context.Context, db DB, cutoff time.Time, limit int) ([]uuid.UUID, error) {
	ids, err := dbsqlc.New(db).ListPendingOrdersCreatedBefore(ctx, dbsqlc.ListPendingOrdersCreatedBeforeParams{Cutoff: cutoff, RowLimit: int32(limit)})
	return ids, MapError(err)
}
