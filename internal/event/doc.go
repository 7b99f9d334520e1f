// Package event consumes the transactional event queue (the events table)
// and administers it (billing.event.EventAdminService).
//
// A business change and its event are written in one transaction
// (store.AppendEvent); once it has committed, the instance's
// cluster.Wakeup sends NOTIFY paymentd_events (store.WakeAfterCommit; an
// insert paymentd did not make is notified by the insert trigger at
// commit). The Worker consumes only while this instance holds the
// event_worker leader role (internal/cluster): it claims on every wake-up
// (NOTIFY, a finished event, a free slot) and at least every
// [events].poll_interval.
//
//	           claim (FOR UPDATE SKIP LOCKED): due, oldest first,
//	           no other event of its order processing or older pending
//	┌─────────┐ ─────────────────────────────────────▶ ┌────────────┐ ── success ──▶ done
//	│ pending │                                         │ processing │
//	└─────────┘ ◀─ failed attempt (error, panic,     ── └────────────┘
//	  ▲    ▲       timeout): run_at = now + backoff        │     │
//	  │    └──── worker stopped (shutdown, lost            │     │ failed last attempt,
//	  │          leadership): handed back, not counted ────┘     │ or a Permanent error
//	  │                                                          ▼
//	  └────────────────── admin RetryEvent (attempts reset) ── failed
//
// A processing event whose claim (locked_until = claim + HandlerTimeout +
// LockGrace) has passed belonged to a worker that died or a handler that
// hung: it is reclaimed — pending again, or failed when that was its last
// attempt.
//
// # Claims and fences
//
// Every claim gets a fresh token (events.claim_token). An attempt that
// outlives its claim — its handler ignored the cancelled context, its
// worker lost the event_worker role — must neither decide its event nor
// commit work once another attempt may run, so:
//
//   - every statement that ends an attempt (done, failed, handed back)
//     names (id, claim_token): a stale attempt's outcome is discarded;
//   - handlers write through Event.Tx, whose transaction starts with the
//     claim fence (store.WithClaimTx; it travels with BEGIN and the first
//     statement, one round trip): the token must still be the event's, its lease
//     unexpired on the database clock, and the claiming node must hold an
//     unexpired lease of the worker's leader role; the event row stays
//     share-locked until the commit, so the reclaim cannot slip in between
//     (it skips locked rows). A deposed leader therefore commits nothing,
//     and claims nothing either (the claim checks the same lease);
//   - within one process the worker never claims an event of an order for
//     which one of its handler goroutines still runs, of this leadership
//     session or an earlier one: a hung handler's order waits until it
//     returns (other orders go on), so two attempts of one order never
//     overlap here. Across processes the fence above is what counts.
//
// Stop, and the loss of the role, cancel running handlers and wait
// LockGrace for them; one that ignores its context is abandoned (logged)
// and keeps its slot and its order until it returns.
//
// # Order of events
//
// The claim never takes an event whose order has another event processing,
// or an older one (created_at, id) still pending. Events of one order thus
// run strictly one at a time and in order; a failed event no longer holds
// its order back. Different orders run side by side, up to
// [events].concurrency at once, at most [events].batch_size claimed per
// round.
//
// # Batches
//
// A handler that implements BatchHandler gets the events of its type that
// one claim round took together (up to [events].batch_size, each of a
// different order), in one goroutine holding their slots, instead of one
// goroutine per event: it writes through TxAll, one transaction for the
// batch whose fence checks every claim in one statement
// (store.WithClaimsTx) and commits only while all of them hold, and
// completes the events there in one statement (CompleteAll). The claims of
// one round are taken by one statement with one lease, so they expire,
// and go with the leader role, together: a batch that lost one claim has
// lost them all or is about to, and commits nothing; its events go back
// as a single lost claim's do (handed back, the lost one's outcome
// discarded). Each event keeps its own outcome: HandleBatch answers one
// error per event, and a failed one is failed alone, recorded as a
// single attempt's is. The order_paid and order_provisioned handlers
// batch (internal/fulfillment); the rest run one event at a time.
//
// # Handlers and the idempotency rule
//
// A Handler is registered per event type. It runs at least once per event
// — a retry after a failure, a reclaim after a crash, an admin's retry —
// so every handler is written to be idempotent by design:
//
//	A handler first reads the current state of what it acts on (the
//	order, under its row lock) and does nothing when the work is already
//	done. Every write it makes is either guarded by the state it expects
//	(UPDATE … WHERE status = 'paid') or unique (one instance per order,
//	one notification per event, channel and recipient); a side effect
//	outside the database (a provider call, a refund) is idempotent at its
//	destination or leaves a durable mark that it happened.
//
// A handler must return when its context ends (HandlerTimeout, shutdown),
// and writes through Event.Tx (see Claims and fences).
// An error, a panic or the timeout fail the attempt; Permanent fails the
// event at once. Periodic tasks (the payment timeout scan) run on the
// leader as well (Worker.Every).
//
// Retries back off exponentially (Backoff: base doubled per attempt,
// capped, with jitter).
package event
