// Package order is the order domain: the product catalogue (catalog.go)
// and the provider settings a product carries and an order freezes, their
// secrets sealed to the one that owns them (provider_config.go), customer
// orders (orders.go) and their life cycle, payment of an order from the
// customer's prepaid balance, and invoices. Its Connect handlers are in
// orderrpc.
//
// # Order states
//
// The transitions of docs/decisions.md ("order transitions"), kept as a table in
// status.go (CanTransition); every pair is tested:
//
//	                callback,                        worker takes
//	                bank transfer                    order_paid
//	 pending ─────────────────────────▶ paid ───────────────────────┐
//	  │   │                              │                          ▼
//	  │   └─────── balance payment ──────┼──────────────────▶ provisioning
//	  │                                  │                     │         │
//	  │ 24 h timeout,                    │ admin full          │         │ provisioned
//	  │ customer or admin                ▼ refund              │         ▼
//	  │ cancel                       refunded ◀── admin full ──┼──── active ◀──▶ suspended
//	  │                                           refund       │     │    │          │
//	  ▼                                                        │     │    ▼          │
//	cancelled ◀──── provisioning failed (automatic refund) ────┘     │  completed    │
//	                                                                 ▼               │
//	                                                             terminated ◀────────┘
//
// A full refund also ends a provisioning order (provisioning → refunded,
// not drawn). cancelled, refunded, completed and terminated are final.
// Customers and admins cancel pending orders only (CancelOrder);
// provisioning → cancelled belongs to the event worker.
//
// # One writer
//
// Transition (transition.go) is the only code that writes orders.status,
// whoever moves the order (this package, internal/payment's settlement and
// refunds, internal/fulfillment's worker): it checks the table, writes the
// order and its audit row, fails the pending payments a move to paid or
// cancelled leaves without purpose, and queues the event the move implies
// (order_paid, order_provisioned, order_cancelled, order_refunded).
//
// Invoices: draft → issued → paid | overdue | cancelled, overdue → paid |
// cancelled, draft → cancelled (CanTransitionInvoice). CreateInvoice issues
// at once; CancelInvoice refuses paid, partly paid and cancelled invoices.
//
// # Balance payment
//
// PayWithBalance is one transaction. It locks the customer row, then the
// order row, decides on the current balance, and writes everything or
// nothing: the balance (never below −credit_limit), a ledger row (type
// payment, negative amount, balance before and after), a successful payment
// record (method balance), the order pending → provisioning, failure of the
// order's pending gateway payments, the order_paid event, and audit_log rows
// for the balance, the payment and the order.
//
// Lock order, for everyone who locks more than one of these rows: customer,
// then order, then its payments or invoices. The customer row is locked FOR
// NO KEY UPDATE, so inserts that only refer to the customer (an invoice by
// whoever holds the order) never wait for it. Two balance payments of one
// customer therefore queue on the customer row and can never overspend; a
// cancel and a payment of one order queue on the order row.
//
// An order of amount 0.00 (a free product) has no payment record, because
// payments.amount must be greater than 0: PayWithBalance moves it to
// provisioning without touching the balance, and queues order_paid with
// payment_id null and amount "0.00".
//
// # Events and audit
//
// Every state change queues its event in the same transaction
// (order_cancelled {order_id, reason, refund_due}, order_paid {order_id,
// payment_id, amount, currency, method}) and writes audit_log rows naming
// the caller (admin, customer, or the API key it used) with the entity
// before and after.
package order
