// Package audit writes the append-only audit log (audit_log): who (an
// Actor) did what (an Action) to which entity, with the entity before and
// after as JSON. Every package that changes money, orders, credentials or
// plugins records the change through Write, in the transaction of the
// change, so a row exists exactly when the change committed.
//
// A change's row holds what changed (Write reduces the two snapshots to
// the fields that changed, went or came; the entity's first row holds it
// whole, so its state at any row is its history applied in order); a note
// (Note: an anomaly) keeps both sides whole.
//
// What goes into before and after is the writer's snapshot of the entity,
// which must never hold a secret (passwords, keys, tokens, merchant keys:
// configs are masked first).
package audit
