package payment

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
)

// Audit actions written by this package (audit_log.action). A payment's
// creation and failure are audit.ActionPaymentCreate and
// audit.ActionPaymentFail (internal/order writes them too); a refund to the
// balance is internal/balance's ActionRefund.
const (
	ActionPaymentSuccess = "payment.success"
	ActionPaymentConfirm = "payment.confirm_bank_transfer"
	ActionPaymentCapture = "payment.capture"
	ActionPaymentAnomaly = "payment.anomaly"
	ActionPaymentRefund  = "payment.refund"
	ActionRefundRequest  = "refund.request"
	ActionRefundSucceed  = "refund.succeed"
	ActionRefundFail     = "refund.fail"
	ActionRefundUnknown  = "refund.outcome_unknown"
	ActionRefundAccepted = "refund.accepted"
	ActionRefundResolve  = "refund.resolve"
	// ActionSavedMethodRemove: a customer (or an admin) removed a saved
	// payment method.
	ActionSavedMethodRemove = "saved_method.remove"
	// ActionAutoChargeSet: a customer (or an admin) turned the charging
	// of an order's renewals to its saved method off or on; before and
	// after are autoChargeState.
	ActionAutoChargeSet = "order.auto_charge"
)

// Entity types (audit_log.entity_type).
const (
	entityPayment     = "payment"
	entityInvoice     = "invoice"
	entityRefund      = "refund"
	entitySavedMethod = "saved_payment_method"
	entityOrder       = "order"
)

// The audit snapshots of the entities this package owns, with snake_case
// names. A payment's and an invoice's rows hold order.PaymentSnapshot and
// order.InvoiceSnapshot: internal/order writes rows of both entities too,
// and each entity has one shape.

type refundState struct {
	ID              uuid.UUID    `json:"id"`
	PaymentID       uuid.UUID    `json:"payment_id"`
	Amount          money.Amount `json:"amount"`
	Status          string       `json:"status"`
	GatewayRefundID string       `json:"gateway_refund_id,omitempty"`
	Reason          string       `json:"reason,omitempty"`
	RequestedBy     *uuid.UUID   `json:"requested_by,omitempty"`
	// Error is the text of a failure only (store.RefundError); Message
	// is the gateway's text of any outcome.
	Error   string `json:"error,omitempty"`
	Message string `json:"message,omitempty"`
}

func refundSnapshot(r store.Refund) refundState {
	return refundState{ID: r.ID, PaymentID: r.PaymentID, Amount: r.Amount, Status: r.Status, GatewayRefundID: r.GatewayRefundID, Reason: r.Reason, RequestedBy: r.RequestedBy, Error: store.RefundError(r.Status, r.Error), Message: r.Error}
}

// autoChargeState is an order's auto_charge in an ActionAutoChargeSet
// row.
type autoChargeState struct {
	AutoCharge bool `json:"auto_charge"`
}

// anomaly is something a gateway (or an admin) reported that this service
// will not apply, but that may mean money moved: a success for a failed
// payment, for a cancelled order, of another amount, under another gateway
// order number. It is kept in audit_log (action payment.anomaly) for an
// admin, once per distinct report: a gateway that retries its callback
// does not fill the log.
type anomaly struct {
	Kind             string `json:"kind"`
	Message          string `json:"message"`
	Source           string `json:"source"`
	GatewayPaymentID string `json:"gateway_payment_id,omitempty"`
	GatewayTxID      string `json:"gateway_tx_id,omitempty"`
	Amount           string `json:"amount,omitempty"`
	Currency         string `json:"currency,omitempty"`
	// RefundID, GatewayRefundID and RefundStatus name the refund a
	// gateway's refund notification is about, and what it says of it.
	RefundID        string `json:"refund_id,omitempty"`
	GatewayRefundID string `json:"gateway_refund_id,omitempty"`
	RefundStatus    string `json:"refund_status,omitempty"`
	// DisputeID and DisputeStatus name the gateway's dispute a dispute
	// notification is about, and its status.
	DisputeID     string `json:"dispute_id,omitempty"`
	DisputeStatus string `json:"dispute_status,omitempty"`
	Fingerprint   string `json:"fingerprint"`
}

// recordAnomaly writes a once in db's transaction (with the payment row
// locked, so two deliveries of one report cannot both write it) and logs it.
func (s *Service) recordAnomaly(ctx context.Context, db store.DB, a audit.Actor, at time.Time, pay store.Payment, an anomaly) error {
	key := an.Kind + "\x00" + an.GatewayPaymentID + "\x00" + an.GatewayTxID + "\x00" + an.Amount
	if an.Currency != "" {
		// Only then: the fingerprints of reports without a currency stay
		// what they were before currencies were reported.
		key += "\x00" + an.Currency
	}
	if an.RefundID != "" {
		// Likewise: a payment's reports keep their fingerprints.
		key += "\x00refund\x00" + an.RefundID + "\x00" + an.GatewayRefundID + "\x00" + an.RefundStatus
	}
	if an.DisputeID != "" {
		key += "\x00dispute\x00" + an.DisputeID + "\x00" + an.DisputeStatus
	}
	sum := sha256.Sum256([]byte(key))
	an.Fingerprint = hex.EncodeToString(sum[:16])
	s.log.ErrorContext(ctx, "payment anomaly: recorded for an admin", "payment_id", pay.ID, "kind", an.Kind,
		"source", an.Source, "message", an.Message, "gateway_payment_id", an.GatewayPaymentID, "amount", an.Amount)
	seen, err := store.PaymentAuditExists(ctx, db, pay.ID, ActionPaymentAnomaly, an.Fingerprint)
	if err != nil || seen {
		return err
	}
	return audit.Note(ctx, db, a, at, ActionPaymentAnomaly, entityPayment, pay.ID.String(), order.PaymentSnapshot(pay), an)
}
