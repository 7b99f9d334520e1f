package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The parameters of the queries run through Q.
type (
	LockDueInvoicesParams  = dbsqlc.LockDueInvoicesParams
	SetInvoiceStatusParams = dbsqlc.SetInvoiceStatusParams
)

// Invoice is an invoices row.
type Invoice = dbsqlc.Invoice

// NewInvoice is what InsertInvoice writes.
type NewInvoice struct {
	// ID is chosen by the caller, which derives the invoice number from it.
	ID         uuid.UUID
	CustomerID uuid.UUID
	// OrderID, when set, must name an order of CustomerID in Currency
	// (invoices_order_fkey: ErrForeignKeyViolation otherwise).
	OrderID     *uuid.UUID
	Number      string
	Status      string
	Amount      money.Amount
	Currency    string
	Description string
	IssuedAt    *time.Time
	DueAt       *time.Time
	CreatedAt   time.Time
}

// InvoiceFilter selects invoices; nil fields do not filter.
type InvoiceFilter struct {
	// CustomerID scopes the list to one customer (set for every customer caller).
	CustomerID *uuid.UUID
	OrderID    *uuid.UUID
	Status     *string
}

// InsertInvoice creates an invoice. A duplicate number fails with ErrConflict
// (constraint invoices_number_key).
func InsertInvoice(ctx context.Context, db DB, in NewInvoice) (Invoice, error) {
	var number *string
	if in.Number != "" {
		number = &in.Number
	}
	row, err := dbsqlc.New(db).InsertInvoice(ctx, dbsqlc.InsertInvoiceParams{
		ID:          in.ID,
		CustomerID:  in.CustomerID,
		OrderID:     in.OrderID,
		Number:      number,
		Status:      in.Status,
		Amount:      in.Amount,
		Currency:    in.Currency,
		Description: in.Description,
		IssuedAt:    in.IssuedAt,
		DueAt:       in.DueAt,
		CreatedAt:   in.CreatedAt,
	})
	return row, MapError(err)
}

// ListInvoices returns one page of invoices, newest first (created_at DESC,
// id DESC), and the number of invoices matching f.
func ListInvoices(ctx context.Context, db DB, f InvoiceFilter, limit, offset int64) ([]Invoice, int64, error) {
	q := dbsqlc.New(db)
	return countThenList(func() (int64, error) {
		return q.CountInvoices(ctx, dbsqlc.CountInvoicesParams{
			CustomerID: f.CustomerID, OrderID: f.OrderID, Status: f.Status,
		})
	}, offset,
		func() ([]Invoice, error) {
			return q.ListInvoices(ctx, dbsqlc.ListInvoicesParams{
				CustomerID: f.CustomerID, OrderID: f.OrderID, Status: f.Status,
				RowLimit: limit, RowOffset: offset,
			})
		})
}
