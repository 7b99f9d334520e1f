package order

import (
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/money"
)

// Event types of the queue (events.event_type) that orders produce:
// internal/event names every type once (event.Types).
const (
	EventOrderPaid        = event.TypeOrderPaid
	EventOrderProvisioned = event.TypeOrderProvisioned
	EventOrderCancelled   = event.TypeOrderCancelled
	EventOrderRefunded    = event.TypeOrderRefunded

	EventServiceRenewed    = event.TypeServiceRenewed
	EventServiceSuspended  = event.TypeServiceSuspended
	EventServiceResumed    = event.TypeServiceResumed
	EventServiceTerminated = event.TypeServiceTerminated
)

// Why a service is suspended (orders.suspend_reason and the
// service_suspended payload): an unpaid renewal invoice, an admin, or a
// payment's open dispute (chargeback). Paying the invoice resumes an overdue
// suspension only; a dispute's is lifted when the dispute is won (or lost
// in part), or by an admin.
const (
	SuspendReasonOverdue = "overdue"
	SuspendReasonAdmin   = "admin"
	SuspendReasonDispute = "dispute"
)

// Why a service ended (the service_terminated payload): its renewal
// invoice went unpaid, its renewal was turned off and its period ran out,
// an admin ended it, or the customer or an admin ended it now, before its
// paid end (EndService).
const (
	EndReasonUnpaid     = "unpaid"
	EndReasonNotRenewed = "not_renewed"
	EndReasonAdmin      = "admin"
	EndReasonEndedNow   = "ended_now"
)

// ServicePayload is the JSON body of service_suspended, service_resumed and
// service_terminated: the order's service is to be suspended, resumed or
// ended at its provider. InstanceID is the order's instance, null when the
// product has nothing to provision. Reason is a SuspendReason for a
// suspension, an EndReason for an end, empty for a resumption.
type ServicePayload struct {
	OrderID    uuid.UUID  `json:"order_id"`
	InstanceID *uuid.UUID `json:"instance_id"`
	Reason     string     `json:"reason"`
	// CreditMode, Credited and Currency: for a service ended now
	// (reason ended_now), what of the unused share the customer gets and
	// how (none, balance, gateway); absent otherwise.
	CreditMode string        `json:"credit_mode,omitempty"`
	Credited   *money.Amount `json:"credited,omitempty"`
	Currency   string        `json:"currency,omitempty"`
}

// ServiceRenewedPayload is the JSON body of a service_renewed event: the
// renewal invoice of period Period was paid, and the service runs until
// EndsAt. Resumed is true when the payment resumed a service suspended for
// non-payment (a service_resumed event follows it).
type ServiceRenewedPayload struct {
	OrderID   uuid.UUID    `json:"order_id"`
	InvoiceID uuid.UUID    `json:"invoice_id"`
	Period    int32        `json:"period"`
	StartsAt  time.Time    `json:"starts_at"`
	EndsAt    time.Time    `json:"ends_at"`
	Amount    money.Amount `json:"amount"`
	Currency  string       `json:"currency"`
	Resumed   bool         `json:"resumed"`
}

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

// OrderPaidPayload is the JSON body of an order_paid event (docs/decisions.md,
// "event payloads"). PaymentID is null when the order was paid without a payment
// record (an order of amount 0.00); Amount is a string with two decimals.
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

// The kinds of renewal_reminder: the renewal invoice was issued (and not
// paid from the balance at once), is due in a few days, or is overdue.
const (
	ReminderIssued  = "issued"
	ReminderDueSoon = "due_soon"
	ReminderOverdue = "overdue"
)

// RenewalReminderPayload is the JSON body of a renewal_reminder event: a
// notice to the customer about the unpaid renewal invoice of period
// Period. Days is how many days before (due_soon) or after (overdue) the
// due time it is sent.
type RenewalReminderPayload struct {
	OrderID   uuid.UUID    `json:"order_id"`
	InvoiceID uuid.UUID    `json:"invoice_id"`
	Period    int32        `json:"period"`
	Kind      string       `json:"kind"`
	Days      int          `json:"days"`
	DueAt     time.Time    `json:"due_at"`
	Amount    money.Amount `json:"amount"`
	Currency  string       `json:"currency"`
}
