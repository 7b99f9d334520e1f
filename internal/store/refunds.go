package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The parameters of the queries run through Q.
type (
	AddRefundedAmountParams = dbsqlc.AddRefundedAmountParams
	FinishRefundParams      = dbsqlc.FinishRefundParams
	NoteRefundParams        = dbsqlc.NoteRefundParams
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
