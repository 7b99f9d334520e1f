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
)

// Entity types (audit_log.entity_type).
const (
	entityOrder    = "order"
	entityProduct  = "product"
	entityInvoice  = "invoice"
	entityPayment  = "payment"
	entityCustomer = "customer"
)

// Failure reasons of the pending payments an operation fails
// (payments.failure_reason).
const (
	failedByOrderCancel   = "order cancelled"
	failedByBalancePay    = "order paid with balance"
	failedByInvoiceCancel = "invoice cancelled"
)

// The audit snapshots: the fields of an entity that an operation can change,
// with snake_case names.

type orderState struct {
	ID           uuid.UUID    `json:"id"`
	CustomerID   uuid.UUID    `json:"customer_id"`
	Status       string       `json:"status"`
	TotalAmount  money.Amount `json:"total_amount"`
	Currency     string       `json:"currency"`
	PaidAt       *time.Time   `json:"paid_at,omitempty"`
	CancelledAt  *time.Time   `json:"cancelled_at,omitempty"`
	CancelReason string       `json:"cancel_reason,omitempty"`
}

func orderSnapshot(o store.Order) orderState {
	return orderState{
		ID: o.ID, CustomerID: o.CustomerID, Status: o.Status, TotalAmount: o.TotalAmount,
		Currency: o.Currency, PaidAt: o.PaidAt, CancelledAt: o.CancelledAt, CancelReason: o.CancelReason,
	}
}

type paymentState struct {
	ID            uuid.UUID    `json:"id"`
	OrderID       *uuid.UUID   `json:"order_id,omitempty"`
	InvoiceID     *uuid.UUID   `json:"invoice_id,omitempty"`
	CustomerID    uuid.UUID    `json:"customer_id"`
	Method        string       `json:"method"`
	Amount        money.Amount `json:"amount"`
	Currency      string       `json:"currency"`
	Status        string       `json:"status"`
	PaidAt        *time.Time   `json:"paid_at,omitempty"`
	FailureReason string       `json:"failure_reason,omitempty"`
}

func paymentSnapshot(p store.Payment) paymentState {
	return paymentState{
		ID: p.ID, OrderID: p.OrderID, InvoiceID: p.InvoiceID, CustomerID: p.CustomerID,
		Method: p.Method, Amount: p.Amount, Currency: p.Currency, Status: p.Status,
		PaidAt: p.PaidAt, FailureReason: p.FailureReason,
	}
}

type productState struct {
	ID             uuid.UUID    `json:"id"`
	Name           string       `json:"name"`
	Price          money.Amount `json:"price"`
	Currency       string       `json:"currency"`
	ProviderPlugin *string      `json:"provider_plugin,omitempty"`
	// ProviderConfigKeys names the keys of provider_config, never their
	// values: it holds the provider's token.
	ProviderConfigKeys []string `json:"provider_config_keys,omitempty"`
	Enabled            bool     `json:"enabled"`
}

func productSnapshot(p store.Product) productState {
	var cfg map[string]json.RawMessage
	_ = json.Unmarshal(p.ProviderConfig, &cfg) // not an object: no keys
	return productState{ID: p.ID, Name: p.Name, Price: p.Price, Currency: p.Currency, ProviderPlugin: p.ProviderPlugin,
		ProviderConfigKeys: slices.Sorted(maps.Keys(cfg)), Enabled: p.Enabled}
}

type invoiceState struct {
	ID         uuid.UUID    `json:"id"`
	CustomerID uuid.UUID    `json:"customer_id"`
	OrderID    *uuid.UUID   `json:"order_id,omitempty"`
	Number     *string      `json:"number,omitempty"`
	Status     string       `json:"status"`
	Amount     money.Amount `json:"amount"`
	PaidAmount money.Amount `json:"paid_amount"`
	Currency   string       `json:"currency"`
	DueAt      *time.Time   `json:"due_at,omitempty"`
}

func invoiceSnapshot(i store.Invoice) invoiceState {
	return invoiceState{
		ID: i.ID, CustomerID: i.CustomerID, OrderID: i.OrderID, Number: i.Number, Status: i.Status,
		Amount: i.Amount, PaidAmount: i.PaidAmount, Currency: i.Currency, DueAt: i.DueAt,
	}
}

// AuditFailedPayments records pending → failed for each payment in failed
// (an order's move, an invoice paid or cancelled, the settlement's
// invoice paid in full): one payment.fail row each.
func AuditFailedPayments(ctx context.Context, db store.DB, by audit.Actor, at time.Time, failed []store.Payment) error {
	for _, pay := range failed {
		before := paymentSnapshot(pay)
		before.Status, before.FailureReason = "pending", ""
		if err := audit.Write(ctx, db, by, at, audit.ActionPaymentFail, entityPayment, pay.ID.String(), before, paymentSnapshot(pay)); err != nil {
			return err
		}
	}
	return nil
}
