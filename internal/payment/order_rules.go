package payment

import (
	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/money"
)

// internal/order imports this package (for paging), so this package cannot
// import internal/order. The few order and invoice rules a settlement or a
// refund needs are therefore mirrored here, and pinned to the order
// package's own table by TestOrderRulesAgreeWithTheOrderPackage: a change of
// order.CanTransition that this copy does not follow fails the build's tests.
// (The better fix is to move Page out of this package so the import can go
// the other way; that touches internal/order.)

// Order statuses this package reads or writes (orders.status).
const (
	orderPending  = "pending"
	orderPaid     = "paid"
	orderRefunded = "refunded"
)

// orderMoves are the order transitions this package makes, as
// order.CanTransition allows them: a settled gateway payment pays a pending
// order; a full refund refunds a paid or active one.
var orderMoves = map[[2]string]bool{
	{orderPending, orderPaid}:  true,
	{orderPaid, orderRefunded}: true,
	{"active", orderRefunded}:  true,
}

// orderMayMove reports whether an order may move from one status to
// another, for the moves this package makes (to paid, to refunded).
func orderMayMove(from, to string) bool { return orderMoves[[2]string{from, to}] }

// Invoice statuses (invoices.status).
const (
	invoiceIssued    = "issued"
	invoicePaid      = "paid"
	invoiceOverdue   = "overdue"
	invoiceCancelled = "cancelled"
)

// invoiceMayBePaid reports whether an invoice in status can still take a
// payment (order.CanTransitionInvoice(status, paid)).
func invoiceMayBePaid(status string) bool {
	return status == invoiceIssued || status == invoiceOverdue
}

// Event type and payment method of the order_paid event (order/events.go).
const (
	eventOrderPaid = "order_paid"
	methodGateway  = "gateway"
	methodBalance  = "balance"
)

// orderPaidPayload is the JSON body of an order_paid event, field for field
// order.OrderPaidPayload.
type orderPaidPayload struct {
	OrderID   uuid.UUID    `json:"order_id"`
	PaymentID *uuid.UUID   `json:"payment_id"`
	Amount    money.Amount `json:"amount"`
	Currency  string       `json:"currency"`
	Method    string       `json:"method"`
}
