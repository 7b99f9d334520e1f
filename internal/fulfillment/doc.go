// Package fulfillment turns paid orders into running services and keeps
// the provider in step with them: the event handlers of order_paid,
// order_provisioned, order_cancelled and order_refunded, of the renewal
// cycle's service_suspended, service_resumed, service_terminated and
// service_renewed, and the payment timeout scan, all run by the
// event_worker leader (internal/event).
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
//	order_refunded    ─▶ a live instance terminated at the provider, notify
//	every minute      ─▶ pending orders older than the payment timeout:
//	                     cancelled (timeout), order_cancelled {refund_due: false}
//
//	service_suspended ┐    order (row locked) and its instance: the status
//	service_resumed   ├─▶  the order's status calls for NOW, whatever the
//	service_terminated┘    event says
//	                         suspended             → instance suspended
//	                         active                → instance running
//	                         terminated, completed → instance terminated
//	                       │
//	                       ├─ no instance, instance there already, or not
//	                       │  live (terminated is final): notify, done
//	                       ├─ Provisioner.Suspend / Unsuspend / Terminate
//	                       │     ok ──▶ one tx: instance status + audit row
//	                       │            (instance.suspended, .resumed,
//	                       │            .terminated), notify, done
//	                       │     error ──▶ retried with the queue's backoff
//	service_renewed   ─▶ notify only (a resumption has its own
//	                     service_resumed)
//
// order_paid and order_provisioned are also handled in batches, the events
// of one claim round together (HandleOrderPaidBatch,
// HandleOrderProvisionedBatch; internal/event's BatchHandler): the steps
// above, one transaction per step for the whole batch, the provider called
// for each order side by side between them; what does not fit the batch's
// plain path (a retry, a product without provider, a provider's failure)
// goes through the per-event handler.
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
// moved is recorded whichever attempt moved it; so is order_refunded's
// record that the provider ended an instance (order_paid makes it too,
// after its event is done). The service_* handlers record the instance's
// new status in the event's fenced transaction: an attempt that loses its
// claim leaves it to the next, which asks the (idempotent) provider again.
//
// Provisioning happens outside any transaction (a slow provider holds no
// lock); the provider must be idempotent on the order (http_provider's API
// is: a repeated POST for an order returns its instance), so a retry after
// a lost answer never makes a second machine.
//
// The service_* handlers converge rather than replay: an event may be
// retried, or handled after a later move of its order (events of an order
// run in order, but a retry waits out its backoff while the order moves
// on), so each reads the order's current status and brings the instance
// there. A stale service_suspended of an order resumed since suspends
// nothing; the events of moves committed together end where the last move
// leads whichever runs first. The provider's actions are idempotent (an
// instance already suspended answers suspend with success), so a retry
// after a lost answer does no harm. Resuming acts on a suspended instance
// only: one the customer stopped stays stopped. Every event's notices are
// queued once (one row per event, channel and recipient), a stale one's
// too: the move it tells of did happen.
package fulfillment
