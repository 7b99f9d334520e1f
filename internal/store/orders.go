package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The parameters of the queries run through Q.
type (
	LockOrdersToRepriceParams = dbsqlc.LockOrdersToRepriceParams
	SetOrderBillingParams     = dbsqlc.SetOrderBillingParams
	SetOrderStatusParams      = dbsqlc.SetOrderStatusParams
	MoveOrdersParams          = dbsqlc.MoveOrdersParams
	SuspendOrderParams        = dbsqlc.SuspendOrderParams
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
	// BillingCycle is the product's cycle at order time; "" is one_time.
	BillingCycle string
	// RenewalPrice is the price of each later period; NULL (not Valid) for
	// a one_time order.
	RenewalPrice money.NullAmount
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
	cycle := o.BillingCycle
	if cycle == "" {
		cycle = OneTime
	}
	row, err := dbsqlc.New(db).InsertOrder(ctx, dbsqlc.InsertOrderParams{
		ID:           o.ID,
		CustomerID:   o.CustomerID,
		ProductID:    o.ProductID,
		TotalAmount:  o.TotalAmount,
		Currency:     o.Currency,
		Description:  o.Description,
		Item:         item,
		BillingCycle: cycle,
		RenewalPrice: o.RenewalPrice,
		CreatedAt:    o.CreatedAt,
	})
	return row, MapError(err)
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

// OneTime is the billing cycle of a product bought once, the column
// default of products.billing_cycle and orders.billing_cycle.
const OneTime = "one_time"

// OrderBilling is what an order's later periods are billed at: the cycle
// and the price of each period (not Valid for one_time).
type OrderBilling struct {
	BillingCycle string
	RenewalPrice money.NullAmount
}

// SetOrderStatusFailingPayments is SetOrderStatus and FailPendingPayments
// of the order's own payments (an order paid: the other pending payments
// for the order itself fail; its invoices' are left alone, an invoice may
// bill extras) in one round trip. Call it with the order row
// locked.
func SetOrderStatusFailingPayments(ctx context.Context, tx pgx.Tx, id uuid.UUID, from, to string, paidAt *time.Time, at time.Time, failReason string) (Order, []Payment, error) {
	var o Order
	var failed []Payment
	var oErr, fErr error
	err := inOneBatch(ctx, tx, func(q *dbsqlc.Queries) {
		o, oErr = q.SetOrderStatus(ctx, dbsqlc.SetOrderStatusParams{ID: id, FromStatus: from, ToStatus: to, PaidAt: paidAt, UpdatedAt: at})
		failed, fErr = q.FailPendingPayments(ctx, pendingParams(PendingOf{OrderID: &id, OrderOnly: true}, failReason, at))
	})
	if err := firstError(oErr, fErr, err); err != nil {
		return Order{}, nil, MapError(err)
	}
	return o, failed, nil
}

// CancelOrderFailingPayments moves an order from status from to cancelled
// with reason (timeout, provisioning_failed, customer or admin) and fails
// its pending payments with failReason (FailPendingPayments), in one
// round trip. ErrNotFound when the order does not exist or is no longer in
// from. Call it with the order row locked.
func CancelOrderFailingPayments(ctx context.Context, tx pgx.Tx, id uuid.UUID, from, reason string, at time.Time, failReason string) (Order, []Payment, error) {
	var o Order
	var failed []Payment
	var oErr, fErr error
	err := inOneBatch(ctx, tx, func(q *dbsqlc.Queries) {
		o, oErr = q.CancelOrder(ctx, dbsqlc.CancelOrderParams{ID: id, FromStatus: from, CancelReason: reason, CancelledAt: &at})
		failed, fErr = q.FailPendingPayments(ctx, pendingParams(PendingOf{OrderID: &id}, failReason, at))
	})
	if err := firstError(oErr, fErr, err); err != nil {
		return Order{}, nil, MapError(err)
	}
	return o, failed, nil
}
