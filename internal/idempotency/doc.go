// Package idempotency lets a client retry a money procedure without moving
// the money twice, as Stripe's Idempotency-Key header does.
//
// A client that sends RefundPayment and gets DEADLINE_EXCEEDED cannot tell
// whether the refund happened: the server goes on with a refund after its
// caller has left, so that it completes and is recorded. Retrying without a
// key would refund again. With a key (request metadata Idempotency-Key, any
// printable ASCII of 1 to 255 characters, a UUID v4 in practice) the first
// call's outcome is kept for 24 hours and every later call with the same
// key gets it back:
//
//	call with key K ──▶ claim (principal, K) ─┬─ claimed: run the procedure,
//	                                          │  detached from the caller, and
//	                                          │  keep its outcome ──▶ answer
//	                                          └─ taken ─┬─ other request: InvalidArgument
//	                                                    ├─ done: the kept outcome
//	                                                    │  (header Idempotent-Replayed: true)
//	                                                    ├─ running: wait for it (up to
//	                                                    │  MaxWait), else Aborted
//	                                                    └─ running past RunTimeout (its
//	                                                       instance died): FailedPrecondition
//
// What is kept: the response, or the error's code and message. Every error
// is kept except the three codes that promise nothing changed and ask the
// client to retry — Unavailable, ResourceExhausted and Aborted: for those
// the key is given back, so the retry runs. A refusal (InvalidArgument,
// FailedPrecondition, NotFound, …) is kept like an answer: send a corrected
// request under a new key. Requests that fail validation or authorization
// never reach the store (the interceptor sits inside both).
//
// Keys belong to the account that sent them: an admin (by session or by any
// of their API keys) or a customer; another account's key of the same text
// is another key. The request is compared by a SHA-256 of its procedure and
// its deterministic protobuf encoding.
//
// With a key the procedure runs on a context detached from the caller's
// cancellation (bounded by RunTimeout), so that what is kept is what
// happened, never "canceled" because the first caller gave up.
//
// Only the procedures the interceptor is given take keys (the ones that
// move money: CreatePayment, RefundPayment, ConfirmBankTransfer,
// AdjustBalance, PayWithBalance, ResolveRefund); on any other the header
// is ignored, as a read needs none.
//
// An expired key is ignored at once, and the Sweeper deletes it later: a
// background service (startstop.Periodic) that internal/app runs while the
// instance leads event_worker, every 10 minutes, a thousand keys per
// statement.
package idempotency
