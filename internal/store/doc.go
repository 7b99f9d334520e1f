// Package store is the only door to PostgreSQL.
//
// The SQL lives in sql/: the goose migrations (sql/migrations, the schema) and
// the sqlc queries (sql/queries), from which sqlc generates the subpackage
// dbsqlc. Only this package and its subpackages import dbsqlc; everything
// above calls store.
//
// Callers run a generated query through Q(db) (queries.go), which maps its
// errors; a hand-written function here is left only where it converts types,
// joins queries in one round trip (batches, pipelined transactions) or
// holds one of the rules below.
//
// Three rules make the layer safe for money:
//
//  1. Every store function, and Q, takes its executor (a DB: the pool or a
//     pgx.Tx) as an argument, so a business write and the event it queues
//     share one transaction.
//  2. WithTx owns begin, commit and rollback. The rollback runs even when the
//     request's context is already cancelled, and a transaction whose context
//     was cancelled is rolled back rather than committed.
//  3. Errors are translated here, once (in Q for a generated query, in the
//     function for the others): MapError turns pgx.ErrNoRows into
//     ErrNotFound and constraint violations into ErrConflict,
//     ErrCheckViolation, ... wrapped in an *Error that names the constraint.
//     No SQL text and no row values ever reach an error message. Above the
//     store, NotFound names a miss for the caller ("payment … not found")
//     and BugIfNotFound makes a miss that the locks held rule out Internal;
//     both live here, beside ErrNotFound, so no domain package writes the
//     mapping again.
//
// Timestamp is a time as a timestamptz column keeps it (UTC, microseconds):
// every clock reading that is written goes through it, so a row read back
// compares equal to what was written.
//
// Money columns are NUMERIC(12,2), which rounds a value with more decimals
// instead of rejecting it; money.Amount never carries more than two, which is
// why amounts cross this layer only as money.Amount.
package store
