// Package cluster coordinates the paymentd instances that share one
// database: leader roles on the lease table, node heartbeats, and the one
// LISTEN connection per instance that wakes them.
//
// # Leader roles
//
// A role (migration, billing, event_worker) is a row of leader_leases
// with a holder, a term (holder, elected_at) and an expiry, all on the
// DATABASE clock: instance clocks never have to agree. (internal/migrate
// holds the migration role's row only during a run, and guards the first
// migrations, which create this table, with an advisory lock.) An Elector
// campaigns for one role:
//
//	            AttemptElect succeeded (row free or expired)
//	follower ─────────────────────────────────────────────▶ leader ──┐
//	   ▲                                                      │      │ ReElect its own term
//	   │  ReElect found no row (expired, taken over), or      │ ◀────┘ every RenewInterval
//	   │  no renew confirmed before the trust window closed,  │
//	   └──── or Stop(): resign (DELETE + NOTIFY) ─────────────┘
//
// A follower bids again the moment the holder's lease runs out (it asks
// LeaderLeaseRemaining how long that is), at the latest every
// RenewInterval, and at once on NOTIFY paymentd_leadership.
//
// The trust window. A leader acts as leader only until
//
//	local monotonic time the last successful renew was SENT + TTL − Margin
//
// The database computed that renew's expiry as its own now() + TTL, and its
// now() is no earlier than the moment the request left, so the window closes
// at least Margin before the lease can expire and another instance can take
// over; Margin absorbs clock-rate differences and the time the work needs to
// stop. Each renew runs with that window as its deadline, so a leader whose
// database hangs steps down on time instead of waiting for an answer.
// IsLeader checks the window on every call.
//
// Start(ctx) / Stop(): cancelling ctx stops the elector the way a crash
// does — subscribers learn it is no longer leader, but the lease is not
// given back and runs out after at most one TTL. Stop() is the graceful
// stop: it resigns the held term (DELETE … and NOTIFY paymentd_leadership in
// one transaction), so a follower takes the role over within milliseconds.
// Subscribers receive every leadership change on a channel that always
// holds the latest state.
//
// # Heartbeats
//
// Every instance upserts its nodes row (id, hostname, version, started_at,
// heartbeat_at = now()) every HeartbeatInterval; a node whose heartbeat is
// older than NodeLostAfter is reported lost (ListNodes, and a log line when
// a node turns lost or comes back). A node that stops cleanly deletes its
// row; rows silent for ForgetAfter are removed.
//
// # Notifications
//
// A Listener holds one dedicated connection (outside the pool) with LISTEN
// on paymentd_events (a Wakeup after an event's commit, or the events
// insert trigger), paymentd_leadership
// (resignations) and paymentd_notifications (queued notifications), and
// wakes subscribers of a channel. It reconnects with backoff when the
// connection is lost, pings it when it has been quiet for HealthInterval (a
// half-open TCP connection is noticed too), and wakes every subscriber after
// each (re)connect, since notifications sent meanwhile were lost. A wake-up
// is only a hint: every consumer also polls.
//
// A Wakeup sends NOTIFY paymentd_events for this instance's transactions
// that queued events, once they have committed, several as one: a NOTIFY
// sent inside them would hold a database-wide lock through their commits.
//
// Every service has the same shape: Start(ctx) error, Stop(), an injected
// clock where time matters, and one log line per state change.
package cluster
