// Package retention deletes what paymentd no longer needs, so that the
// tables that grow with business do not grow forever, and never what a
// question about money needs.
//
// What goes, and when (Options; [retention] in the configuration):
//
//	done events          EventDays after they finished (default 30), except
//	                     order_paid: the ledger check's record of which
//	                     payment paid each order, kept for good
//	sent notifications   NotificationDays after they were sent (default 90)
//	audit_log            whole UTC months, AuditMonths after the month
//	                     ended (default 84, seven years; never fewer than
//	                     MinAuditMonths, 12; KeepForever keeps all)
//
// Pending, processing and failed events, pending and failed notifications,
// and payments, refunds, invoices, orders and the balance ledger
// (balance_transactions) are never deleted. The trends' change rows need no
// retention: payment_trends_fold deletes each in the transaction that adds
// it to the rollup (keeping a folded change would count it twice).
//
// A Purger runs one round every Interval while Active says so (internal/app
// passes the event_worker elector's IsLeader: one instance purges), in the
// shape of every leader's housekeeping (startstop.Periodic):
//
//	stopped ──Start──▶ running ──Stop──▶ stopped
//	                     │ at start, then every Interval, while Active:
//	                     ▼
//	  audit months: create this one and MonthsAhead more ─▶ drop those past
//	  retention ─▶ sent notifications ─▶ done events, each in statements of
//	  at most BatchSize rows (one transaction each)
//
// audit_log is partitioned by month (migration 00009), so a month goes
// with one DROP TABLE, however many rows it holds; its default partition
// takes rows of a month that has no partition yet, so an insert never
// fails, and they move to their month when it is created. Events and
// notifications are deleted in bounded statements that walk their
// created_at index from the oldest row, so a run holds few locks at a time
// and passes each row it keeps once.
package retention
