// Package replica sends the heavy reads to a streaming standby
// ([db].replica_url) while it is close enough behind the primary, and to
// the primary otherwise.
//
// The heavy reads are the CSV exports, GetPaymentTrends, GetPaymentStats
// and an admin's ListPayments: reports, whose answer may be a few seconds
// old. Nothing that decides on money reads a replica: creating, settling
// and refunding payments, balances, the reconciler, the billing run,
// idempotency keys, sessions and keys all keep the primary (docs/decisions.md,
// "read replica").
//
// A Watcher asks the replica every second how far behind it is
// (ReplicaLag in sql/queries/replica.sql):
//
//	check ok, a standby, lag ≤ MaxLag   ─▶ usable: Reads is the replica
//	lag > MaxLag, lag unknown,          ─▶ not usable: Reads is the primary
//	not a standby, check failed
//	last check older than 3 intervals   ─▶ not usable (a check that hangs)
//
// It logs a line when the verdict changes, never every second, and the
// metrics show it (paymentd_db_replica_in_use, paymentd_db_replica_lag_seconds).
// A read that began on the replica finishes there: an export keeps the
// database it started on for all of its pages.
package replica
