// Package concurrency bounds how many requests one instance handles at once
// ([server].max_concurrency, default 30). It is the first layer of the
// middleware stack, so everything behind it — rate limiting, credential
// checks, password hashing, database calls — runs for at most N requests.
//
// Requests above the bound are not rejected: the specification asks that they
// wait, in arrival order, for a slot. A short burst then costs latency instead
// of errors, and the database pool (20 connections by default) is never asked
// for more than the service can use. A waiting request whose client goes away
// (its context is done: the connection closed, the HTTP/2 stream was reset)
// leaves the queue without taking a slot and without an answer — there is no
// one left to answer.
//
//	arrive ──▶ slot free and nobody queued? ──yes──▶ in flight ──▶ handler ──▶ release
//	              │ no                                   ▲                        │
//	              ▼                                      │                        │
//	           waiting (FIFO) ── a slot is released ─────┘ ◀──────────────────────┘
//	              │
//	              └── client gone ──▶ dropped (no slot taken, nothing written)
//
// The queue is golang.org/x/sync/semaphore.Weighted with weight 1 per
// request: its waiters are a FIFO list and it honours the context while
// waiting. /health is answered before this layer (see internal/server), so
// a liveness probe never queues.
package concurrency
