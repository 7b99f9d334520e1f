package store

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The parameters of the queries run through Q.
type (
	FailEventAttemptParams               = dbsqlc.FailEventAttemptParams
	ListPendingOrdersCreatedBeforeParams = dbsqlc.ListPendingOrdersCreatedBeforeParams
)

// Event statuses (events_status_check).
const (
	EventPending    = "pending"
	EventProcessing = "processing"
	EventDone       = "done"
	EventFailed     = "failed"
)

// Claim is one attempt at an event as the worker holds it: the event id
// and the claim's token (events.claim_token, new for every claim), plus the
// node and attempt number for the logs. Finishing an attempt, and every
// transaction of its handler (WithClaimTx), names the token, so an attempt
// whose claim expired and was reclaimed can no longer change the event.
type Claim struct {
	ID       uuid.UUID
	Token    uuid.UUID
	Node     string
	Attempts int32
}

// ClaimOf is the claim behind an event row returned by ClaimEvents.
func ClaimOf(e Event) Claim {
	c := Claim{ID: e.ID, Attempts: e.Attempts}
	if e.LockedBy != nil {
		c.Node = *e.LockedBy
	}
	if e.ClaimToken != nil {
		c.Token = *e.ClaimToken
	}
	return c
}

// ErrClaimLost: the attempt no longer holds its event's claim — the claim
// ran out and was (or is about to be) reclaimed, or, with a leader role
// named, the claiming node lost that role. Its transaction must not commit.
var ErrClaimLost = errors.New("the event's claim was lost: this attempt may no longer commit")

// ReclaimedEvent is a processing event whose claim had expired, as
// ReclaimExpiredEvents left it (pending, or failed after its last attempt).
type ReclaimedEvent = dbsqlc.ReclaimExpiredEventsRow

// ClaimEvents claims up to limit due pending events for node, oldest first,
// until lease from now (database clock), never two of one order, never one
// whose order has an older event unfinished, and never one of the orders in
// busy (those this process still runs a handler for; see event_worker.sql).
// With leaderRole, it claims nothing unless node holds an unexpired lease
// of that role.
//
// The claim must walk events_pending_idx in order and stop after limit
// eligible events, however large the backlog. PostgreSQL picks that plan
// when it knows the backlog is large; right after a burst, with statistics
// that still say the queue is empty, it reads every pending event and
// sorts them instead, once per claim. Sorting is therefore switched off
// for the claim's transaction (SET LOCAL), which leaves the ordered index
// scan as the only plan.
//
// One round trip: the SET LOCAL and the claim go in one batch, which the
// server runs as one implicit transaction (one Sync), so the setting holds
// for the claim and no further, and the claim commits at that Sync. (On a
// pgx.Tx, as in a test, the batch runs in that transaction and the setting
// lasts until it ends.)
func ClaimEvents(ctx context.Context, db DB, node string, limit int, lease time.Duration, busy []uuid.UUID, leaderRole string) ([]Event, error) {
	if busy == nil {
		busy = []uuid.UUID{} // ALL over an empty array is true; over NULL it is NULL
	}
	var role *string
	if leaderRole != "" {
		role = &leaderRole
	}
	var claim statement
	if _, err := dbsqlc.New(&claim).ClaimEvents(ctx, dbsqlc.ClaimEventsParams{
		Node: node, Lease: lease, BusyOrders: busy, LeaderRole: role, MaxEvents: int32(limit),
	}); !errors.Is(err, errCaptured) {
		return nil, errors.Join(errors.New("store: the generated claim sent no statement"), err)
	}
	b := &pgx.Batch{}
	b.Queue("SET LOCAL enable_sort = off")
	b.Queue(claim.sql, claim.args...)
	br := db.SendBatch(ctx, b)
	defer func() { _ = br.Close() }()
	if _, err := br.Exec(); err != nil {
		return nil, MapError(err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, MapError(err)
	}
	claimed, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Event])
	if err != nil {
		return nil, MapError(err)
	}
	if err := br.Close(); err != nil { // the implicit transaction's commit
		return nil, MapError(err)
	}
	return claimed, nil
}

// WithClaimTx runs fn in a transaction on db that commits only while c is
// its event's claim: the transaction starts with the claim fence
// (HoldEventClaim) — c's token is still the event's, its lease unexpired
// by the database clock, and, when leaderRole is not empty, c's node holds
// an unexpired lease of that role — which share-locks the event row until
// the transaction ends, so the claim cannot be reclaimed before the
// commit. ErrClaimLost when any of it does not hold: nothing of fn's
// transaction commits, whatever fn returns.
//
// The fence costs no round trip of its own: BEGIN, the fence and fn's
// first statement go in one batch (withPipelinedTx, whose other
// statements wait as in WithPipelinedTx: audit rows and events go with the
// next statement that answers, or with COMMIT). That first statement thus
// runs before the fence's answer is read; when the fence fails it is
// rolled back with the rest.
func WithClaimTx(ctx context.Context, db DB, c Claim, leaderRole string, fn func(tx pgx.Tx) error) error {
	var role *string
	if leaderRole != "" {
		role = &leaderRole
	}
	var fence statement
	if _, err := dbsqlc.New(&fence).HoldEventClaim(ctx, dbsqlc.HoldEventClaimParams{ID: c.ID, ClaimToken: &c.Token, LeaderRole: role}); !errors.Is(err, errCaptured) {
		return errors.Join(errors.New("store: the generated fence sent no statement"), err)
	}
	return withPipelinedTx(ctx, db, []prelude{{sql: fence.sql, args: fence.args, check: func(row pgx.Row) error {
		var id uuid.UUID
		err := row.Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrClaimLost
		}
		return MapError(err)
	}}}, fn)
}

// CompleteEvent marks the claimed event done. ErrNotFound when the claim
// was lost.
func CompleteEvent(ctx context.Context, db DB, c Claim) error {
	n, err := dbsqlc.New(db).CompleteEvent(ctx, dbsqlc.CompleteEventParams{ID: c.ID, ClaimToken: &c.Token})
	if err != nil {
		return MapError(err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// ReleaseEvent hands a claimed event back without counting the attempt (the
// worker stopped while it ran). ErrNotFound when the claim was lost.
func ReleaseEvent(ctx context.Context, db DB, c Claim) error {
	n, err := dbsqlc.New(db).ReleaseEvent(ctx, dbsqlc.ReleaseEventParams{ID: c.ID, ClaimToken: &c.Token})
	if err != nil {
		return MapError(err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
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
	return countThenList(func() (int64, error) {
		return q.CountEvents(ctx, dbsqlc.CountEventsParams{Status: f.Status, EventType: f.EventType, OrderID: f.OrderID})
	}, p.Offset,
		func() ([]Event, error) {
			return q.ListEvents(ctx, dbsqlc.ListEventsParams{
				Status: f.Status, EventType: f.EventType, OrderID: f.OrderID, RowLimit: p.Limit, RowOffset: p.Offset,
			})
		})
}

// WithClaimsTx is WithClaimTx for the claims of one batch: one fence
// statement (HoldEventClaims) checks every claim and share-locks every
// event row, and the transaction commits only when all of them hold —
// ErrClaimLost otherwise, with nothing of fn's transaction committed. The
// claims of one round are taken by one statement with one lease and run
// out together, so a batch whose one claim is lost has lost them all (or
// is about to); its events then go the way a single lost claim goes.
func WithClaimsTx(ctx context.Context, db DB, cs []Claim, leaderRole string, fn func(tx pgx.Tx) error) error {
	if len(cs) == 1 {
		return WithClaimTx(ctx, db, cs[0], leaderRole, fn)
	}
	var role *string
	if leaderRole != "" {
		role = &leaderRole
	}
	ids, tokens := claimArrays(cs)
	var fence statement
	if _, err := dbsqlc.New(&fence).HoldEventClaims(ctx, dbsqlc.HoldEventClaimsParams{
		Ids: ids, ClaimTokens: tokens, LeaderRole: role,
	}); !errors.Is(err, errCaptured) {
		return errors.Join(errors.New("store: the generated fence sent no statement"), err)
	}
	return withPipelinedTx(ctx, db, []prelude{{sql: fence.sql, args: fence.args, check: func(row pgx.Row) error {
		var held int32
		if err := row.Scan(&held); err != nil {
			return MapError(err)
		}
		if int(held) != len(cs) {
			return ErrClaimLost
		}
		return nil
	}}}, fn)
}

// CompleteEvents marks the claimed events of a batch done, in one
// statement. ErrNotFound when any of the claims was lost (the caller's
// transaction must then roll back: the fence of WithClaimsTx makes that
// impossible inside it).
func CompleteEvents(ctx context.Context, db DB, cs []Claim) error {
	ids, tokens := claimArrays(cs)
	n, err := dbsqlc.New(db).CompleteEvents(ctx, dbsqlc.CompleteEventsParams{Ids: ids, ClaimTokens: tokens})
	if err != nil {
		return MapError(err)
	}
	if n != int64(len(cs)) {
		return ErrNotFound
	}
	return nil
}

func claimArrays(cs []Claim) (ids, tokens []uuid.UUID) {
	ids, tokens = make([]uuid.UUID, len(cs)), make([]uuid.UUID, len(cs))
	for i, c := range cs {
		ids[i], tokens[i] = c.ID, c.Token
	}
	return ids, tokens
}
