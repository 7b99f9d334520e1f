// Package ratelimit bounds login and registration attempts per client IP
// ([rate_limit]: login_per_sec default 5, register_per_sec default 1), so
// that guessing passwords or mass-creating accounts from one address is slow
// whatever the number of instances.
//
// The counters live in the shared Redis when [redis].enabled is set, so the
// limit holds for the cluster, not per instance; without Redis, or while it is
// down, each instance counts in its own memory (the API contract's degraded
// mode: docs/api.md, "Limits") and requests keep being answered:
//
//	request ─▶ procedure has a rule? ──no──▶ next layer
//	               │ yes: key = procedure + client IP (IPv6: its /64)
//	               ▼
//	           Fallback ─ cache available? ─yes─▶ Redis (Lua) ─ok─▶ decision
//	               │ no                              │ error: cache.ReportError
//	               ▼                                 ▼ (one warning per outage)
//	           Memory ◀──────────────────────────────┘
//	               │
//	               ▼
//	allowed ─▶ next layer    refused ─▶ ResourceExhausted in the client's own
//	                                    protocol (Connect, gRPC, gRPC-Web) or
//	                                    HTTP 429; Retry-After and RetryInfo
//
// Both limiters use the same algorithm, GCRA (the generic cell rate
// algorithm, a token bucket kept as one timestamp): a key may make perSec
// requests at once (burst = perSec) and then one every 1/perSec seconds. It
// needs one value per key and no sliding window, refills smoothly (no double
// burst at a window edge as with fixed windows), and gives an exact
// Retry-After. Each key's state is a "theoretical arrival time" (TAT):
//
//	interval = 1s / perSec, window = interval × perSec (= 1s)
//	tat      = max(stored TAT, now)
//	allow if tat + interval − window ≤ now, then store tat + interval
//	refuse otherwise, retry after (tat + interval − window) − now
//
// A stored TAT at or before now means a full bucket, the same as no entry:
// that is what lets Memory forget idle keys and Redis expire them.
//
// The layer sits after the concurrency limit and before the credential
// layers: a refused attempt costs neither a password hash nor a database
// call, and the request body is never read.
//
// PasswordBudget counts in the same limiters, per Rate (a count per period:
// GCRA with interval period/count and a burst of count): the password
// attempts of every address together, and per account named. The identity
// service asks it before any hash, once it has the account's name from the
// request (identity.PasswordLimiter).
package ratelimit
