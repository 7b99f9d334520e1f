package rpc

import (
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/store"
)

// PaymentRecord is the wire form of a payment: money with two decimals, RFC 3339
// UTC timestamps, empty strings for what is not set (paid_at while unpaid).
func PaymentRecord(p store.Payment) *paymentpb.PaymentRecord {
	return &paymentpb.PaymentRecord{
		Id:                 p.ID.String(),
		OrderId:            IDString(p.OrderID),
		InvoiceId:          IDString(p.InvoiceID),
		Amount:             p.Amount.String(),
		Currency:           p.Currency,
		GatewayInterfaceId: IDString(p.GatewayInterfaceID),
		GatewayPaymentId:   p.GatewayPaymentID,
		GatewayTxId:        p.GatewayTxID,
		Status:             p.Status,
		PaidAt:             TimePtr(p.PaidAt),
		CreatedAt:          TimePtr(&p.CreatedAt),
		UpdatedAt:          TimePtr(&p.UpdatedAt),
		RefundedAmount:     p.RefundedAmount.String(),
		CapturedAmount:     p.CapturedAmount.String(),
		CapturedAt:         TimePtr(p.CapturedAt),
		FailedAt:           TimePtr(p.FailedAt),
		FailureReason:      p.FailureReason,
	}
}
