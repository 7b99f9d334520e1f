package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// Refund is a refunds row.
type Refund = dbsqlc.Refund

// Refund statuses (refunds_status_check).
const (
	RefundPending   = "pending"
	RefundSucceeded = "succeeded"
	RefundFailed    = "failed"
)

// RefundError is a refund's error wherever it is shown (the API, the CSV
// export, the audit log): its stored text when it failed, else empty. The
// refunds.error column holds every outcome's text (a gateway's "退款成功"
// too); error means failure everywhere, and the text of any outcome is
// shown as the refund's message.
func RefundError(status, text string) string {
	if status != RefundFailed {
		return ""
	}
	return text
}

// Refund destinations (refunds_destination_check).
const (
	RefundToGateway = "gateway"
	RefundToBalance = "balance"
)

// NewRefund is a refund to insert.
type NewRefund struct {
	PaymentID uuid.UUID
	Amount    money.Amount
	// Status is RefundPending (a reservation) or RefundSucceeded.
	Status string
	// Destination is RefundToGateway (the default) or RefundToBalance.
	Destination string
	Reason      string
	// RequestedBy is the admin; nil for the system.
	RequestedBy *uuid.UUID
	CreatedAt   time.Time
}

// InsertRefund inserts a refund row.
func InsertRefund(ctx context.Context, db DB, r NewRefund) (Refund, error) {
	if r.Destination == "" {
		r.Destination = RefundToGateway
	}
	row, err := dbsqlc.New(db).InsertRefund(ctx, dbsqlc.InsertRefundParams{
		PaymentID: r.PaymentID, Amount: r.Amount, Status: r.Status, Destination: r.Destination, Reason: r.Reason,
		RequestedBy: r.RequestedBy, CreatedAt: r.CreatedAt,
	})
	return row, MapError(err)
}

// ReservedRefundAmount is the sum of the payment's succeeded and pending
// refunds. Read it with the payment row locked.
func ReservedRefundAmount(ctx context.Context, db DB, paymentID uuid.UUID) (money.Amount, error) {
	a, err := dbsqlc.New(db).ReservedRefundAmount(ctx, paymentID)
	return a, MapError(err)
}

// FinishRefund moves a pending refund to status (RefundSucceeded or
// RefundFailed) with the gateway's refund id and error text. ErrNotFound
// when it is no longer pending.
func FinishRefund(ctx context.Context, db DB, id uuid.UUID, status, gatewayRefundID, errText string, at time.Time) (Refund, error) {
	row, err := dbsqlc.New(db).FinishRefund(ctx, dbsqlc.FinishRefundParams{
		ID: id, Status: status, GatewayRefundID: gatewayRefundID, Error: errText, UpdatedAt: at,
	})
	return row, MapError(err)
}

// NoteRefund keeps a pending refund pending and records why. ErrNotFound
// when it is no longer pending.
func NoteRefund(ctx context.Context, db DB, id uuid.UUID, gatewayRefundID, note string, at time.Time) (Refund, error) {
	row, err := dbsqlc.New(db).NoteRefund(ctx, dbsqlc.NoteRefundParams{
		ID: id, GatewayRefundID: gatewayRefundID, Error: note, UpdatedAt: at,
	})
	return row, MapError(err)
}

// AddRefundedAmount adds a succeeded refund to a successful payment, which
// becomes refunded when the refunds reach its amount. ErrNotFound when the
// payment is not success or the refund would exceed its amount.
func AddRefundedAmount(ctx context.Context, db DB, paymentID uuid.UUID, amount money.Amount, at time.Time) (Payment, error) {
	row, err := dbsqlc.New(db).AddRefundedAmount(ctx, dbsqlc.AddRefundedAmountParams{
		ID: paymentID, Amount: amount, UpdatedAt: at,
	})
	return row, MapError(err)
}

// ListPaymentRefunds returns a payment's refunds, oldest first.
func ListPaymentRefunds(ctx context.Context, db DB, paymentID uuid.UUID) ([]Refund, error) {
	rows, err := dbsqlc.New(db).ListPaymentRefunds(ctx, paymentID)
	return rows, MapError(err)
}

// GetRefund returns one refund. ErrNotFound when there is none.
func GetRefund(ctx context.Context, db DB, id uuid.UUID) (Refund, error) {
	row, err := dbsqlc.New(db).GetRefund(ctx, id)
	return row, MapError(err)
}
