package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// BalanceAccount is the part of a customer row a balance payment decides on.
type BalanceAccount struct {
	CustomerID  uuid.UUID
	Currency    string
	Balance     money.Amount
	CreditLimit money.Amount
	DisabledAt  *time.Time
}

// GetBalanceAccount reads a customer's balance facts without locking;
// ErrNotFound when there is no such customer.
func GetBalanceAccount(ctx context.Context, db DB, customerID uuid.UUID) (BalanceAccount, error) {
	r, err := dbsqlc.New(db).GetOrderCustomerAccount(ctx, customerID)
	if err != nil {
		return BalanceAccount{}, MapError(err)
	}
	return BalanceAccount{CustomerID: r.ID, Currency: r.Currency, Balance: r.Balance, CreditLimit: r.CreditLimit, DisabledAt: r.DisabledAt}, nil
}

// LockBalanceAccount reads a customer's balance facts and locks the customer
// row (FOR NO KEY UPDATE) until db's transaction ends, so that every balance
// change of the customer is decided on the current balance, one at a time,
// while inserts that only refer to the customer are not held up.
// ErrNotFound when there is no such customer.
func LockBalanceAccount(ctx context.Context, db DB, customerID uuid.UUID) (BalanceAccount, error) {
	r, err := dbsqlc.New(db).LockOrderCustomerAccount(ctx, customerID)
	if err != nil {
		return BalanceAccount{}, MapError(err)
	}
	return BalanceAccount{CustomerID: r.ID, Currency: r.Currency, Balance: r.Balance, CreditLimit: r.CreditLimit, DisabledAt: r.DisabledAt}, nil
}

// NewBalancePayment is a payment of an order from the customer's balance.
type NewBalancePayment struct {
	// OrderID is the order paid; uuid.Nil for a payment of InvoiceID alone.
	OrderID    uuid.UUID
	InvoiceID  *uuid.UUID
	CustomerID uuid.UUID
	Amount     money.Amount
	Currency   string
	PaidAt     time.Time
}

// InsertBalancePayment records a successful balance payment (method balance,
// no gateway interface, paid_at set). The customer and currency must be the
// order's (payments_order_fkey).
func InsertBalancePayment(ctx context.Context, db DB, p NewBalancePayment) (Payment, error) {
	orderID := &p.OrderID
	if p.OrderID == uuid.Nil {
		orderID = nil
	}
	row, err := dbsqlc.New(db).InsertBalancePayment(ctx, dbsqlc.InsertBalancePaymentParams{
		OrderID:    orderID,
		InvoiceID:  p.InvoiceID,
		CustomerID: p.CustomerID,
		Amount:     p.Amount,
		Currency:   p.Currency,
		PaidAt:     &p.PaidAt,
	})
	return row, MapError(err)
}
