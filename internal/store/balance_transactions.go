package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// Balance transaction types (balance_transactions_type_check).
const (
	BalanceRecharge     = "recharge"
	BalancePayment      = "payment"
	BalanceRefund       = "refund"
	BalanceManualAdjust = "manual_adjust"
)

// BalanceTransaction is a row of the append-only balance ledger.
type BalanceTransaction struct {
	ID            uuid.UUID
	CustomerID    uuid.UUID
	Type          string
	Amount        money.Amount
	BalanceBefore money.Amount
	BalanceAfter  money.Amount
	PaymentID     *uuid.UUID
	RefundID      *uuid.UUID
	CreatedBy     *uuid.UUID
	Description   string
	CreatedAt     time.Time
}

// PostBalance is the one write of a customer's balance: it moves the
// balance from t.BalanceBefore to t.BalanceAfter and appends t (its ID is
// ignored) to the ledger, in one statement. Call it with the customer row
// locked (LockBalanceAccount) and the move decided on t.BalanceBefore:
// ErrNotFound, nothing written, when the balance is no longer that;
// ErrCheckViolation when the balance would go below -credit_limit, or for a
// zero amount, a wrong sign for the type, or after ≠ before + amount.
// internal/balance is its one caller.
func PostBalance(ctx context.Context, db DB, t BalanceTransaction) (BalanceTransaction, error) {
	r, err := dbsqlc.New(db).PostBalance(ctx, postBalanceParams(t))
	if err != nil {
		return BalanceTransaction{}, MapError(err)
	}
	return BalanceTransaction(r), nil
}

// PostBalanceLater is PostBalance that, in a pipelined transaction
// (WithPipelinedTx), waits to go with the next statement that is sent;
// its Get answers as PostBalance would.
func PostBalanceLater(ctx context.Context, db DB, t BalanceTransaction) *Later[BalanceTransaction] {
	params := postBalanceParams(t)
	return laterRow(ctx, db, func(q *dbsqlc.Queries) (BalanceTransaction, error) {
		r, err := q.PostBalance(ctx, params)
		return BalanceTransaction(r), err
	})
}

func postBalanceParams(t BalanceTransaction) dbsqlc.PostBalanceParams {
	return dbsqlc.PostBalanceParams{
		CustomerID:    t.CustomerID,
		Type:          t.Type,
		Amount:        t.Amount,
		BalanceBefore: t.BalanceBefore,
		BalanceAfter:  t.BalanceAfter,
		PaymentID:     t.PaymentID,
		RefundID:      t.RefundID,
		CreatedBy:     t.CreatedBy,
		Description:   t.Description,
		CreatedAt:     t.CreatedAt,
	}
}

// ListCustomerBalanceTransactions returns one page of the customer's ledger,
// newest first.
func ListCustomerBalanceTransactions(ctx context.Context, db DB, customerID uuid.UUID, page Page) ([]BalanceTransaction, error) {
	rows, err := dbsqlc.New(db).ListCustomerBalanceTransactions(ctx, dbsqlc.ListCustomerBalanceTransactionsParams{
		CustomerID: customerID, RowLimit: page.Limit, RowOffset: page.Offset,
	})
	if err != nil {
		return nil, MapError(err)
	}
	out := make([]BalanceTransaction, len(rows))
	for i, r := range rows {
		out[i] = BalanceTransaction(r)
	}
	return out, nil
}
