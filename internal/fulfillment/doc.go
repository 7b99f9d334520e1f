// Package fulfillment turns paid orders into running services: the event
// handlers of order_paid, order_provisioned and order_cancelled, and the
// payment timeout scan, all run by the event_worker leader
// (internal/event).
//
//	order_paid ─▶ order paid → provisioning, instance row (provisioning)
//	              │
//	              ├─ Provisioner.Provision (the product's provider plugin)
//	              │     ok ──▶ one tx: instance running, order active,
//	              │            order_provisioned {order_id, instance_id}
//	              │     error ──▶ retried; on the last attempt, or at once
//	              │            for ErrRefused, one tx: instance error, order
//	              │            cancelled (provisioning_failed), pending
//	              │            payments failed, order_cancelled {refund_due}
//	              └─ order not paid/provisioning: nothing to do
//
//	order_provisioned ─▶ notify the customer and the admins
//	order_cancelled   ─▶ Refunder.RefundOrder once when refund_due
//	                     (marked by an order.auto_refund audit row), notify
//	every minute      ─▶ pending orders older than the payment timeout:
//	                     cancelled (timeout), order_cancelled {refund_due: false}
//
// The handlers depend on small interfaces — Provisioner, Refunder,
// Notifier, plugin.Plugins — so the payment domain, the plugin registry and
// the notification channels can change behind them. They follow the
// idempotency rule of internal/event: read the order under its row lock
// and do nothing when the work is done. Every transaction of a handler is
// the event's fenced one (event.Event.Tx): an attempt that outlived its
// claim, or whose node lost the event_worker role, commits nothing. The
// refund (the payment domain's own transactions, idempotent per order) and
// the note that it happened are the exceptions, on purpose: money that
// moved is recorded whichever attempt moved it.
//
// Provisioning happens outside any transaction (a slow provider holds no
// lock); the provider must be idempotent on the order (http_provider's API
// is: a repeated POST for an order returns its instance), so a retry after
// a lost answer never makes a second machine.
package fulfillment
