package order

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
)

// Audit actions written by this package (audit_log.action). The payment
// rows it writes (a balance payment, the pending payments an order's move
// fails) use audit.ActionPaymentCreate and audit.ActionPaymentFail, shared
// with internal/payment; the balance's entries are internal/balance's.
const (
	ActionProductCreate = "product.create"
	ActionProductUpdate = "product.update"
	ActionOrderCreate   = "order.create"
	ActionOrderCancel   = "order.cancel"
	ActionOrderPay      = "order.pay_with_balance"
	// UpdateProduct's apply_to_existing_orders: an order's later periods
	// moved to the product's new cycle and price.
	ActionOrderBillingChange = "order.billing_change"
	// A recurring order's renewal turned off or on, and a period extended
	// by hand.
	ActionOrderRenewal = "order.renewal"
	ActionOrderExtend  = "order.extend"
	// A period whose renewal invoice was cancelled, reissued with a new
	// invoice once renewal was turned back on.
	ActionOrderPeriodReissue = "order.period_reissue"
	// The transitions' own (order.Transition).
	ActionOrderPaid         = "order.paid"
	ActionOrderProvisioning = "order.provisioning"
	ActionOrderActivate     = "order.activate"
	ActionOrderRefund       = "order.refund"
	ActionOrderSuspend      = "order.suspend"
	ActionOrderResume       = "order.resume"
	ActionOrderComplete     = "order.complete"
	ActionOrderTerminate    = "order.terminate"
	ActionInvoiceCreate     = "invoice.create"
	ActionInvoiceCancel     = "invoice.cancel"
	// The invoice transitions' (InvoiceTransition) besides the cancel.
	ActionInvoicePay     = "invoice.pay"
	ActionInvoiceOverdue = "invoice.overdue"
)

// Entity types (audit_log.entity_type).
const (
	entityOrder   = "order"
	entityProduct = "product"
	entityInvoice = "invoice"
	entityPayment = "payment"
)

// Failure reasons of the pending payments an operation fails
// (payments.failure_reason).
const (
	failedByOrderCancel   = "order cancelled"
	failedByBalancePay    = "order paid with balance"
	failedByInvoiceCancel = "invoice cancelled"
)

// The audit snapshots: the fields of an entity that an operation can change,
// with snake_case names. Each entity has one (internal/audit replays a
// history field by field); the payment's and the invoice's are exported for
// internal/payment, which writes their rows too.

type orderState struct {
	ID           uuid.UUID    `json:"id"`
	CustomerID   uuid.UUID    `json:"customer_id"`
	Status       string       `json:"status"`
	TotalAmount  money.Amount `json:"total_amount"`
	Currency     string       `json:"currency"`
	PaidAt       *time.Time   `json:"paid_at,omitempty"`
	CancelledAt  *time.Time   `json:"cancelled_at,omitempty"`
	CancelReason string       `json:"cancel_reason,omitempty"`
	BillingCycle string       `json:"billing_cycle"`
	// RenewalPrice is absent for a one_time order.
	RenewalPrice  *money.Amount `json:"renewal_price,omitempty"`
	Renews        bool          `json:"renews"`
	SuspendReason string        `json:"suspend_reason,omitempty"`
	PaidUntil     *time.Time    `json:"paid_until,omitempty"`
	// Note is an admin's reason for the change, in the "after" snapshot of
	// a manual suspension, resumption or extension.
	Note string `json:"note,omitempty"`
	// EndCredit is what an ending now did with the unused share, in the
	// "after" snapshot of its termination (EndService).
	EndCredit *EndCreditNote `json:"end_credit,omitempty"`
}

func orderSnapshot(o store.Order) orderState {
	return orderState{
		ID: o.ID, CustomerID: o.CustomerID, Status: o.Status, TotalAmount: o.TotalAmount,
		Currency: o.Currency, PaidAt: o.PaidAt, CancelledAt: o.CancelledAt, CancelReason: o.CancelReason,
		BillingCycle: o.BillingCycle, RenewalPrice: nullAmountPtr(o.RenewalPrice),
		Renews: o.Renews, SuspendReason: o.SuspendReason, PaidUntil: o.PaidUntil,
	}
}

// nullAmountPtr is n's amount, nil when n is NULL.
func nullAmountPtr(n money.NullAmount) *money.Amount {
	if !n.Valid {
		return nil
	}
	return &n.Amount
}

// PaymentState is the one audit snapshot of a payment: every audit_log row
// of entity "payment" holds it, whichever package writes the row, so the
// payment's history replays to one shape (internal/audit). order writes
// some of those rows (a balance payment, the pending payments a move
// fails) and internal/payment, which imports order, the others: the shape
// lives here, below both. A column added to payments that an operation
// can change belongs here.
type PaymentState struct {
	ID               uuid.UUID     `json:"id"`
	OrderID          *uuid.UUID    `json:"order_id,omitempty"`
	InvoiceID        *uuid.UUID    `json:"invoice_id,omitempty"`
	CustomerID       uuid.UUID     `json:"customer_id"`
	Method           string        `json:"method"`
	GatewayInterface *uuid.UUID    `json:"gateway_interface_id,omitempty"`
	Amount           money.Amount  `json:"amount"`
	RefundedAmount   money.Amount  `json:"refunded_amount"`
	Currency         string        `json:"currency"`
	Status           string        `json:"status"`
	GatewayPaymentID string        `json:"gateway_payment_id,omitempty"`
	GatewayTxID      string        `json:"gateway_tx_id,omitempty"`
	PaidAt           *time.Time    `json:"paid_at,omitempty"`
	FailureReason    string        `json:"failure_reason,omitempty"`
	CapturedAmount   *money.Amount `json:"captured_amount,omitempty"`
	CapturedAt       *time.Time    `json:"captured_at,omitempty"`
}

// PaymentSnapshot is p as its audit rows hold it (PaymentState); a payment
// without captured money leaves captured_amount out.
func PaymentSnapshot(p store.Payment) PaymentState {
	st := PaymentState{
		ID: p.ID, OrderID: p.OrderID, InvoiceID: p.InvoiceID, CustomerID: p.CustomerID,
		Method: p.Method, GatewayInterface: p.GatewayInterfaceID, Amount: p.Amount,
		RefundedAmount: p.RefundedAmount, Currency: p.Currency, Status: p.Status,
		GatewayPaymentID: p.GatewayPaymentID, GatewayTxID: p.GatewayTxID,
		PaidAt: p.PaidAt, FailureReason: p.FailureReason, CapturedAt: p.CapturedAt,
	}
	if p.CapturedAmount.Sign() > 0 {
		st.CapturedAmount = &p.CapturedAmount
	}
	return st
}

type productState struct {
	ID             uuid.UUID    `json:"id"`
	Name           string       `json:"name"`
	Price          money.Amount `json:"price"`
	Currency       string       `json:"currency"`
	BillingCycle   string       `json:"billing_cycle"`
	ProviderPlugin *string      `json:"provider_plugin,omitempty"`
	// ProviderConfigKeys names the keys of provider_config, never their
	// values: it holds the provider's token.
	ProviderConfigKeys []string `json:"provider_config_keys,omitempty"`
	Enabled            bool     `json:"enabled"`
}

func productSnapshot(p store.Product) productState {
	var cfg map[string]json.RawMessage
	_ = json.Unmarshal(p.ProviderConfig, &cfg) // not an object: no keys
	return productState{ID: p.ID, Name: p.Name, Price: p.Price, Currency: p.Currency, BillingCycle: p.BillingCycle, ProviderPlugin: p.ProviderPlugin,
		ProviderConfigKeys: slices.Sorted(maps.Keys(cfg)), Enabled: p.Enabled}
}

// InvoiceState is the one audit snapshot of an invoice, for every
// audit_log row of entity "invoice": order writes an invoice's creation
// and every move of its status (InvoiceTransition), whoever calls it. A
// column added to invoices that an operation can change belongs here.
type InvoiceState struct {
	ID         uuid.UUID    `json:"id"`
	CustomerID uuid.UUID    `json:"customer_id"`
	OrderID    *uuid.UUID   `json:"order_id,omitempty"`
	Number     *string      `json:"number,omitempty"`
	Status     string       `json:"status"`
	Amount     money.Amount `json:"amount"`
	PaidAmount money.Amount `json:"paid_amount"`
	Currency   string       `json:"currency"`
	DueAt      *time.Time   `json:"due_at,omitempty"`
	PaidAt     *time.Time   `json:"paid_at,omitempty"`
}

// InvoiceSnapshot is i as its audit rows hold it (InvoiceState).
func InvoiceSnapshot(i store.Invoice) InvoiceState {
	return InvoiceState{
		ID: i.ID, CustomerID: i.CustomerID, OrderID: i.OrderID, Number: i.Number, Status: i.Status,
		Amount: i.Amount, PaidAmount: i.PaidAmount, Currency: i.Currency, DueAt: i.DueAt, PaidAt: i.PaidAt,
	}
}

// AuditFailedPayments records pending → failed for each payment in failed
// (an order's move, an invoice paid or cancelled, the settlement's
// invoice paid in full): one payment.fail row each.
func AuditFailedPayments(ctx context.Context, db store.DB, by audit.Actor, at time.Time, failed []store.Payment) error {
	for _, pay := range failed {
		before := PaymentSnapshot(pay)
		before.Status, before.FailureReason = "pending", ""
		if err := audit.Write(ctx, db, by, at, audit.ActionPaymentFail, entityPayment, pay.ID.String(), before, PaymentSnapshot(pay)); err != nil {
			return err
		}
	}
	return nil
}
