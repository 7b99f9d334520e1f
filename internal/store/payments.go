package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// Payment is a payments row.
type Payment = dbsqlc.Payment

// PaymentFilter selects payments; nil fields do not filter.
type PaymentFilter struct {
	// CustomerID scopes the list to one customer (set for every customer caller).
	CustomerID         *uuid.UUID
	OrderID            *uuid.UUID
	InvoiceID          *uuid.UUID
	GatewayInterfaceID *uuid.UUID
	Status             *string
	// ToReturn keeps the payments whose captured money is not returned in
	// full (captured_amount > refunded_amount).
	ToReturn bool
	// IDRange keeps the payments whose id is in [IDRange[0], IDRange[1]]:
	// an id prefix, such as a bank transfer's reference, as a range the
	// primary key's index answers.
	IDRange *[2]uuid.UUID
}

// idRange is the query's id_from and id_to.
func (f PaymentFilter) idRange() (from, to *uuid.UUID) {
	if f.IDRange == nil {
		return nil, nil
	}
	return &f.IDRange[0], &f.IDRange[1]
}

// ListPayments returns one page of payments, newest first (created_at DESC,
// id DESC), and the number of payments matching f.
func ListPayments(ctx context.Context, db DB, f PaymentFilter, limit, offset int64) ([]Payment, int64, error) {
	q := dbsqlc.New(db)
	from, to := f.idRange()
	return countThenList(func() (int64, error) {
		return q.CountPayments(ctx, dbsqlc.CountPaymentsParams{
			CustomerID: f.CustomerID, OrderID: f.OrderID, InvoiceID: f.InvoiceID,
			GatewayInterfaceID: f.GatewayInterfaceID, Status: f.Status, ToReturn: f.ToReturn,
			IDFrom: from, IDTo: to,
		})
	}, offset,
		func() ([]Payment, error) {
			return q.ListPayments(ctx, dbsqlc.ListPaymentsParams{
				CustomerID: f.CustomerID, OrderID: f.OrderID, InvoiceID: f.InvoiceID,
				GatewayInterfaceID: f.GatewayInterfaceID, Status: f.Status, ToReturn: f.ToReturn,
				IDFrom: from, IDTo: to, RowLimit: limit, RowOffset: offset,
			})
		})
}
