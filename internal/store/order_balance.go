package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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

// LockForBalancePayment locks, in one round trip, the customer of an order
// (LockBalanceAccount, found through the order) and then the order
// (GetOrderForUpdate): the lock order of every balance change, customer
// first. ErrNotFound when there is no such order. In a pipelined
// transaction (WithPipelinedTx) BEGIN and whatever waits go with it.
func LockForBalancePayment(ctx context.Context, tx pgx.Tx, orderID uuid.UUID) (BalanceAccount, Order, error) {
	accts, os, err := LockForBalancePayments(ctx, tx, []uuid.UUID{orderID})
	if err != nil {
		return BalanceAccount{}, Order{}, err
	}
	if len(os) == 0 {
		return BalanceAccount{}, Order{}, ErrNotFound
	}
	return accts[os[0].CustomerID], os[0], nil
}

// LockForBalancePayments is LockForBalancePayment for several orders (the
// billing run's batch), in one round trip: their customers, each once, in
// id order, then the orders, in id order, so that two batches, or a batch
// and a single payment, cannot deadlock. It answers the accounts by
// customer id and the orders found, in id order; an order that does not
// exist is missing.
func LockForBalancePayments(ctx context.Context, tx pgx.Tx, orderIDs []uuid.UUID) (map[uuid.UUID]BalanceAccount, []Order, error) {
	var rows []dbsqlc.LockCustomerAccountsOfOrdersRow
	var os []Order
	var acctErr, oErr error
	err := inOneBatch(ctx, tx, func(q *dbsqlc.Queries) {
		rows, acctErr = q.LockCustomerAccountsOfOrders(ctx, orderIDs)
		os, oErr = q.LockOrdersForUpdate(ctx, orderIDs)
	})
	if err := firstError(acctErr, oErr, err); err != nil {
		return nil, nil, MapError(err)
	}
	accts := make(map[uuid.UUID]BalanceAccount, len(rows))
	for _, r := range rows {
		accts[r.ID] = BalanceAccount{CustomerID: r.ID, Currency: r.Currency, Balance: r.Balance, CreditLimit: r.CreditLimit, DisabledAt: r.DisabledAt}
	}
	return accts, os, nil
}

// NewBalancePayment is a payment of an order from the customer's balance.
type NewBalancePayment struct {
	// ID is the payment's id; uuid.Nil draws a random one (what the
	// column's default would).
	ID uuid.UUID
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
	row, err := dbsqlc.New(db).InsertBalancePayment(ctx, balancePaymentParams(p))
	return row, MapError(err)
}

// InsertBalancePaymentLater is InsertBalancePayment that, in a pipelined
// transaction (WithPipelinedTx), waits to go with the next statement that
// is sent; give it p.ID to name the payment in that statement.
func InsertBalancePaymentLater(ctx context.Context, db DB, p NewBalancePayment) *Later[Payment] {
	params := balancePaymentParams(p)
	return laterRow(ctx, db, func(q *dbsqlc.Queries) (Payment, error) {
		return q.InsertBalancePayment(ctx, params)
	})
}

func balancePaymentParams(p NewBalancePayment) dbsqlc.InsertBalancePaymentParams {
	orderID := &p.OrderID
	if p.OrderID == uuid.Nil {
		orderID = nil
	}
	if p.ID == uuid.Nil {
		p.ID = uuid.New()
	}
	return dbsqlc.InsertBalancePaymentParams{
		ID:         p.ID,
		OrderID:    orderID,
		InvoiceID:  p.InvoiceID,
		CustomerID: p.CustomerID,
		Amount:     p.Amount,
		Currency:   p.Currency,
		PaidAt:     &p.PaidAt,
	}
}
