package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// Order is an orders row.
type Order = dbsqlc.Order

// NewOrder is what InsertOrder writes; the order starts pending.
type NewOrder struct {
	// ID is the caller's when secrets in Item are encrypted bound to it;
	// nil: the database generates one.
	ID          *uuid.UUID
	CustomerID  uuid.UUID
	ProductID   *uuid.UUID
	TotalAmount money.Amount
	Currency    string
	Description string
	// Item is the JSON snapshot of what was bought; nil writes {}.
	Item      []byte
	CreatedAt time.Time
}

// OrderFilter selects orders; nil fields do not filter.
type OrderFilter struct {
	// CustomerID scopes the list to one customer (set for every customer caller).
	CustomerID *uuid.UUID
	Status     *string
}

// InsertOrder creates a pending order.
func InsertOrder(ctx context.Context, db DB, o NewOrder) (Order, error) {
	item := o.Item
	if item == nil {
		item = []byte("{}")
	}
	row, err := dbsqlc.New(db).InsertOrder(ctx, dbsqlc.InsertOrderParams{
		ID:          o.ID,
		CustomerID:  o.CustomerID,
		ProductID:   o.ProductID,
		TotalAmount: o.TotalAmount,
		Currency:    o.Currency,
		Description: o.Description,
		Item:        item,
		CreatedAt:   o.CreatedAt,
	})
	return row, MapError(err)
}

// GetOrder reads one order; ErrNotFound when there is none.
func GetOrder(ctx context.Context, db DB, id uuid.UUID) (Order, error) {
	o, err := dbsqlc.New(db).GetOrder(ctx, id)
	return o, MapError(err)
}

// GetOrderForUpdate reads one order and locks its row until db's transaction
// ends; ErrNotFound when there is none.
func GetOrderForUpdate(ctx context.Context, db DB, id uuid.UUID) (Order, error) {
	o, err := dbsqlc.New(db).GetOrderForUpdate(ctx, id)
	return o, MapError(err)
}

// ListOrders returns one page of orders, newest first (created_at DESC, id
// DESC), and the number of orders matching f.
func ListOrders(ctx context.Context, db DB, f OrderFilter, limit, offset int64) ([]Order, int64, error) {
	q := dbsqlc.New(db)
	return countThenList(func() (int64, error) {
		return q.CountOrders(ctx, dbsqlc.CountOrdersParams{CustomerID: f.CustomerID, Status: f.Status})
	}, offset,
		func() ([]Order, error) {
			return q.ListOrders(ctx, dbsqlc.ListOrdersParams{
				CustomerID: f.CustomerID, Status: f.Status, RowLimit: limit, RowOffset: offset,
			})
		})
}

// SetOrderStatus moves an order from status from to status to, setting
// paid_at when paidAt is not nil. ErrNotFound when the order does not exist
// or is no longer in from: a transition decided on a stale read is never
// applied.
func SetOrderStatus(ctx context.Context, db DB, id uuid.UUID, from, to string, paidAt *time.Time, at time.Time) (Order, error) {
	o, err := dbsqlc.New(db).SetOrderStatus(ctx, dbsqlc.SetOrderStatusParams{
		ID: id, FromStatus: from, ToStatus: to, PaidAt: paidAt, UpdatedAt: at,
	})
	return o, MapError(err)
}

// FailPendingOrderPayments moves every pending payment of an order to failed
// with reason, and returns them. Call it with the order row locked.
func FailPendingOrderPayments(ctx context.Context, db DB, orderID uuid.UUID, reason string, at time.Time) ([]Payment, error) {
	rows, err := dbsqlc.New(db).FailPendingOrderPayments(ctx, dbsqlc.FailPendingOrderPaymentsParams{
		OrderID: &orderID, FailureReason: reason, UpdatedAt: at,
	})
	return rows, MapError(err)
}

// SetOrderStatusFailingPayments is SetOrderStatus and
// FailPendingOrderOnlyPayments (an order paid: the other pending payments
// for the order itself fail) in one round trip. Call it with the order row
// locked.
func SetOrderStatusFailingPayments(ctx context.Context, tx pgx.Tx, id uuid.UUID, from, to string, paidAt *time.Time, at time.Time, failReason string) (Order, []Payment, error) {
	var o Order
	var failed []Payment
	var oErr, fErr error
	err := inOneBatch(ctx, tx, func(q *dbsqlc.Queries) {
		o, oErr = q.SetOrderStatus(ctx, dbsqlc.SetOrderStatusParams{ID: id, FromStatus: from, ToStatus: to, PaidAt: paidAt, UpdatedAt: at})
		failed, fErr = q.FailPendingOrderOnlyPayments(ctx, dbsqlc.FailPendingOrderOnlyPaymentsParams{OrderID: &id, FailureReason: failReason, UpdatedAt: at})
	})
	if err := firstError(oErr, fErr, err); err != nil {
		return Order{}, nil, MapError(err)
	}
	return o, failed, nil
}

// CancelOrderFailingPayments moves an order from status from to cancelled
// with reason (timeout, provisioning_failed, customer or admin) and fails
// its pending payments with failReason (FailPendingOrderPayments), in one
// round trip. ErrNotFound when the order does not exist or is no longer in
// from. Call it with the order row locked.
func CancelOrderFailingPayments(ctx context.Context, tx pgx.Tx, id uuid.UUID, from, reason string, at time.Time, failReason string) (Order, []Payment, error) {
	var o Order
	var failed []Payment
	var oErr, fErr error
	err := inOneBatch(ctx, tx, func(q *dbsqlc.Queries) {
		o, oErr = q.CancelOrder(ctx, dbsqlc.CancelOrderParams{ID: id, FromStatus: from, CancelReason: reason, CancelledAt: &at})
		failed, fErr = q.FailPendingOrderPayments(ctx, dbsqlc.FailPendingOrderPaymentsParams{OrderID: &id, FailureReason: failReason, UpdatedAt: at})
	})
	if err := firstError(oErr, fErr, err); err != nil {
		return Order{}, nil, MapError(err)
	}
	return o, failed, nil
}
