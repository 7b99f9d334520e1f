// Package ledger checks that the money in the database adds up: payments,
// refunds, orders, invoices, events and the customers' balance ledger agree
// with each other. It is the model of Jepsen's bank test applied to
// paymentd — totals conserved, nothing negative, nothing doubled — and is
// run by `paymentd verify`, at the end of the cluster, fault and soak tests,
// and by anyone who wonders whether an incident lost money.
//
// Verify runs every check of sql/queries/ledger.sql in one REPEATABLE READ,
// READ ONLY transaction, so all of them see the same snapshot while the
// service keeps running, and reports every violation with the ids of the
// rows involved:
//
//	money_scale              an amount with more than two decimals
//	negative_amount          a payment, refund or invoice amount ≤ 0, an
//	                         order total < 0, a balance below −credit_limit
//	payment_refunds          refunded_amount ≠ sum of succeeded refunds, or
//	                         succeeded (+ pending) refunds above the amount,
//	                         or a refund on a payment that was never paid
//	                         (and whose money was not captured), or captured
//	                         money returned beyond what was captured
//	payment_status           refunded ⇎ paid and refunded_amount = amount;
//	                         paid_at ⇎ success/refunded; failed_at ⇎ failed;
//	                         captured money on a payment that is not failed,
//	                         not all of its amount, or without captured_at;
//	                         an unknown status or method
//	order_paid_twice         two order_paid events, or two settled payments
//	                         of its own, for one order
//	order_paid_missing       a paid order (paid_at) without order_paid, or a
//	                         settled payment of its own on an order never paid
//	order_paid_unexpected    order_paid for an order that was never paid
//	order_paid_payment       order_paid naming a payment that is missing,
//	                         not settled, of another order or amount
//	order_unpaid             a paid/provisioning/active order of amount > 0
//	                         without a settled payment
//	order_payment_amount     a payment of an order (without invoice) for
//	                         another amount or currency than the order's
//	invoice_paid_amount      paid_amount ≠ sum of the settled payments, or
//	                         status paid ⇎ paid in full
//	balance_arithmetic       balance_after ≠ balance_before + amount
//	balance_chain            a row not starting where the customer's
//	                         previous one ended (the first at 0.00), or
//	                         customers.balance ≠ the last balance_after
//	balance_payment          a balance payment without exactly one ledger
//	                         row of minus its amount, or a stray one
//	balance_refund           a refund row not matching one succeeded refund
//	                         to the balance, such a refund without exactly
//	                         one, or a balance payment refunded elsewhere
//	balance_recharge         a recharge not matching a settled payment
//	event_status             an event outside pending/processing/done/failed
//	event_stuck              processing past its claim (a dead worker's
//	                         event) for over a minute under a leader of
//	                         the event worker's role that has not
//	                         reclaimed it
//	order_provisioned_twice  two order_provisioned events or instances
//
// Failed events and pending refunds are not violations — they are visible
// to admins and waiting for one — but the report counts them. So is a
// processing event past its claim while no leader holds the event worker's
// role (every node stopped, a restored dump not yet served): the next
// leader reclaims it first, and the report names how many wait.
package ledger
