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

// LedgerEntry is a balance_transactions row.
type LedgerEntry = dbsqlc.BalanceTransaction

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

// ChargeBalance sets a customer's balance from before to after. Call it with
// the row locked by LockBalanceAccount. ErrNotFound when the balance is not
// before (the lock was not held); ErrCheckViolation when after is below
// -credit_limit.
func ChargeBalance(ctx context.Context, db DB, customerID uuid.UUID, before, after money.Amount, at time.Time) error {
	_, err := dbsqlc.New(db).ChargeCustomerBalance(ctx, dbsqlc.ChargeCustomerBalanceParams{
		ID: customerID, BalanceBefore: before, BalanceAfter: after, UpdatedAt: at,
	})
	return MapError(err)
}

// BalancePaymentEntry is the ledger row of a balance payment.
type BalancePaymentEntry struct {
	CustomerID uuid.UUID
	PaymentID  uuid.UUID
	// Amount is negative: the balance goes down by the payment's amount.
	Amount        money.Amount
	BalanceBefore money.Amount
	BalanceAfter  money.Amount
	Description   string
	CreatedAt     time.Time
}

// InsertBalancePaymentEntry appends a type payment row to the ledger. A second
// row for the same payment fails with ErrConflict
// (balance_transactions_payment_id_key).
func InsertBalancePaymentEntry(ctx context.Context, db DB, e BalancePaymentEntry) (LedgerEntry, error) {
	row, err := dbsqlc.New(db).InsertBalancePaymentEntry(ctx, dbsqlc.InsertBalancePaymentEntryParams{
		CustomerID:    e.CustomerID,
		Amount:        e.Amount,
		BalanceBefore: e.BalanceBefore,
		BalanceAfter:  e.BalanceAfter,
		PaymentID:     &e.PaymentID,
		Description:   e.Description,
		CreatedAt:     e.CreatedAt,
	})
	return row, MapError(err)
}

// NewBalancePayment is a payment of an order from the customer's balance.
type NewBalancePayment struct {
	OrderID    uuid.UUID
	CustomerID uuid.UUID
	Amount     money.Amount
	Currency   string
	PaidAt     time.Time
}

// InsertBalancePayment records a successful balance payment (method balance,
// no gateway interface, paid_at set). The customer and currency must be the
// order's (payments_order_fkey).
func InsertBalancePayment(ctx context.Context, db DB, p NewBalancePayment) (Payment, error) {
	row, err := dbsqlc.New(db).InsertBalancePayment(ctx, dbsqlc.InsertBalancePaymentParams{
		OrderID:    &p.OrderID,
		CustomerID: p.CustomerID,
		Amount:     p.Amount,
		Currency:   p.Currency,
		PaidAt:     &p.PaidAt,
	})
	return row, MapError(err)
}
