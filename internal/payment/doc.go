// Package payment is the payment domain: payment records for orders and
// invoices, gateway callbacks applied exactly once, status queries, bank
// transfer confirmations and refunds. Its transport is
// internal/payment/paymentrpc; the background service that repairs lost
// callbacks, internal/payment/reconcile.
//
//	           callback / query / reconcile / confirm
//	pending ─────────────────────────────────────────▶ success ──(refunds reach amount)──▶ refunded
//	   │                                                  │
//	   └──(gateway reports failed, order or invoice       └── partial refund: stays success,
//	       cancelled or paid otherwise)──▶ failed             refunded_amount grows
//
// success, failed and refunded are never left by a callback. A failed
// payment may hold captured money (the gateway took it after all): refunds
// return it while the payment stays failed.
//
// # Creating a payment
//
// CreatePayment checks the order or invoice and the gateway interface,
// returns the pending payment of the same (order, invoice, interface) when
// there is one, and otherwise generates the payment id, calls the plugin's
// create_payment with it (no transaction open across the network call), and
// then inserts the row with that id. A plugin failure leaves no row; a
// gateway order whose row was never inserted has never been shown to
// anyone, and a notification for it names an unknown payment (NotFound).
//
// # Settling: one code path
//
// Callbacks (HandleCallback and the /callbacks route), QueryPaymentStatus,
// the Reconciler and ConfirmBankTransfer all end in settle, one transaction
// in named steps: lock (the order, the invoice and the payment — in that
// order, after internal/order's customer → order), decide (pure, on the
// locked rows), then apply — to the payment, applyToInvoice, applyToOrder. The
// optimistic lock (UPDATE … WHERE status = 'pending') makes a settlement
// apply once; concurrent deliveries queue on the row locks and the later
// ones see a Duplicate. What cannot be applied but may mean money moved
// (another amount, another gateway order number) is answered
// InvalidArgument and recorded once in audit_log as payment.anomaly for an
// admin. Money that arrived for a payment that can no longer take it (a
// success for a failed payment, or for one whose order or invoice closed)
// is captured on the failed payment, to be returned with RefundPayment.
//
// A settled payment pays its invoice (paid_amount grows, paid when full)
// and its order (pending → paid through order.Transition, directly or once
// its invoice is paid in full), fails the other pending payments of what it paid, and queues
// order_paid {order_id, payment_id, amount, currency, method: "gateway"} in
// the same transaction.
//
// # Refunds
//
// A refund is reserved (a pending refunds row, decided with the payment row
// locked), sent to the gateway outside any transaction, and its outcome
// written in a second transaction. An unknown outcome stays pending and
// keeps its amount reserved until an admin has checked the gateway: a
// refund is never retried blindly. A balance payment's refund credits the
// balance in one transaction.
//
// # Order rules
//
// This package moves no order itself: the order moves its money causes
// (pending → paid when a payment settles it; paid, provisioning or active →
// refunded on a full refund) are asked of order.Transition, the one writer
// of orders.status, which checks internal/order's table, writes the audit
// rows and queues the event the move implies (order_paid, with the payload
// order.OrderPaidPayload; order_refunded). payment imports order; order
// never imports payment.
package payment
