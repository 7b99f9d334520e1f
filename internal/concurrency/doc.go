// Package concurrency bounds how many requests one instance handles at once
// ([server].max_concurrency, default 30). It is the first layer of the
// middleware stack, so everything behind it — rate limiting, credential
// checks, password hashing, database calls — runs for at most N requests.
//
// Requests above the bound are not rejected: the API contract (docs/api.md,
// "Limits") asks that they wait, in arrival order, for a slot. A short burst
// then costs latency instead of errors, and the database pool (20 connections by
// default) is never asked for more than the service can use.
//
// A wait ends, though. A queued request leaves the queue without a slot the
// moment its context ends, and is counted
// (paymentd_concurrency_queue_left_total, by reason):
//
//   - deadline_exceeded: the client's own deadline passed. connect-go
//     applies grpc-timeout and connect-timeout-ms only inside the handler,
//     so this layer reads them itself (ClientTimeout) and answers
//     DeadlineExceeded in the client's protocol — someone may still read.
//   - canceled: the client went away (connection closed, stream reset).
//     Nothing is written: there is no one left to answer.
//   - queue_timeout: [server].queue_timeout_ms passed (0, the default,
//     waits as the API contract asks). Answered ResourceExhausted with
//     Retry-After, for operators who prefer failing fast to latency.
//
// Either way the request was never served, so nothing was half-written.
//
//	arrive ──▶ slot free and nobody queued? ──yes──▶ in flight ──▶ handler ──▶ release
//	              │ no                                   ▲                        │
//	              ▼                                      │                        │
//	           waiting (FIFO) ── a slot is released ─────┘ ◀──────────────────────┘
//	              │
//	              ├── client deadline ──▶ DeadlineExceeded (no slot taken)
//	              ├── queue timeout   ──▶ ResourceExhausted, Retry-After
//	              └── client gone     ──▶ dropped (nothing written)
//
// The queue is golang.org/x/sync/semaphore.Weighted with weight 1 per
// request: its waiters are a FIFO list and it honours the context while
// waiting. /health is answered before this layer (see internal/server), so
// a liveness probe never queues.
package concurrency
