package order

import (
	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/money"
)

// Event types of the queue (events.event_type).
const (
	EventOrderPaid        = "order_paid"
	EventOrderProvisioned = "order_provisioned"
	EventOrderCancelled   = "order_cancelled"
	EventOrderRefunded    = "order_refunded"
)

// Reasons an order is cancelled (orders.cancel_reason and the
// order_cancelled payload).
const (
	CancelReasonTimeout            = "timeout"
	CancelReasonProvisioningFailed = "provisioning_failed"
	CancelReasonCustomer           = "customer"
	CancelReasonAdmin              = "admin"
)

// Payment methods named in the order_paid payload.
const (
	MethodBalance = "balance"
	MethodGateway = "gateway"
)

// OrderPaidPayload is the JSON body of an order_paid event (DESIGN.md,
// "event payloads"). PaymentID is null when the order was paid without a
// payment record (an order of amount 0.00); Amount is a string with two
// decimals.
type OrderPaidPayload struct {
	OrderID   uuid.UUID    `json:"order_id"`
	PaymentID *uuid.UUID   `json:"payment_id"`
	Amount    money.Amount `json:"amount"`
	Currency  string       `json:"currency"`
	Method    string       `json:"method"`
}

// OrderCancelledPayload is the JSON body of an order_cancelled event.
// RefundDue tells the worker whether money has to go back (false for an
// order cancelled while pending: nothing was paid).
type OrderCancelledPayload struct {
	OrderID   uuid.UUID `json:"order_id"`
	Reason    string    `json:"reason"`
	RefundDue bool      `json:"refund_due"`
}

// OrderRefundedPayload is the JSON body of an order_refunded event: the
// order's money went back in full (PaymentID's refunds reached its amount;
// RefundID is the one that completed it), so its service ends. InstanceID
// is the order's instance when it has one (its handler terminates it at the
// provider), null otherwise.
type OrderRefundedPayload struct {
	OrderID    uuid.UUID  `json:"order_id"`
	PaymentID  uuid.UUID  `json:"payment_id"`
	RefundID   uuid.UUID  `json:"refund_id"`
	InstanceID *uuid.UUID `json:"instance_id"`
}

// OrderProvisionedPayload is the JSON body of an order_provisioned event.
// InstanceID is null for a product with nothing to provision (no provider
// plugin).
type OrderProvisionedPayload struct {
	OrderID    uuid.UUID  `json:"order_id"`
	InstanceID *uuid.UUID `json:"instance_id"`
}
