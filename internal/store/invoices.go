package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The parameters of the queries run through Q.
type (
	LockDueInvoicesParams    = dbsqlc.LockDueInvoicesParams
	SetInvoiceStatusParams   = dbsqlc.SetInvoiceStatusParams
	TakeInvoiceNumbersParams = dbsqlc.TakeInvoiceNumbersParams
)

// Invoice is an invoices row.
type Invoice = dbsqlc.Invoice

// InvoiceLine is an invoice_lines row.
type InvoiceLine = dbsqlc.InvoiceLine

// NewInvoiceLine is one line InsertInvoice writes with its invoice.
type NewInvoiceLine struct {
	Description string
	// PeriodStart and PeriodEnd are the period the line bills: both or
	// neither, the end after the start (invoice_lines_period_check).
	PeriodStart, PeriodEnd *time.Time
	// Quantity is at least 1; the line's amount is Quantity × UnitAmount,
	// which may be negative (a credit).
	Quantity   int32
	UnitAmount money.Amount
}

// Amount is the line's amount, Quantity × UnitAmount.
func (l NewInvoiceLine) Amount() (money.Amount, error) {
	if l.Quantity < 1 {
		return money.Amount{}, fmt.Errorf("store: invoice line %q has quantity %d; at least 1", l.Description, l.Quantity)
	}
	c := l.UnitAmount.Cents()
	if p := c * int64(l.Quantity); p/int64(l.Quantity) == c {
		return money.FromCents(p)
	}
	return money.Amount{}, fmt.Errorf("store: invoice line %q: %d × %s is out of range", l.Description, l.Quantity, l.UnitAmount)
}

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
	// Lines are what the invoice bills, numbered 1, 2, ... in this order;
	// their amounts must sum to Amount (invoice_lines_sum_check, at commit).
	Lines []NewInvoiceLine
}

// InvoiceFilter selects invoices; nil fields do not filter.
type InvoiceFilter struct {
	// CustomerID scopes the list to one customer (set for every customer caller).
	CustomerID *uuid.UUID
	OrderID    *uuid.UUID
	Status     *string
}

// InsertInvoice creates an invoice and its lines in tx: the database checks
// at commit that the lines sum to the amount (invoice_lines_sum_check), so
// both must be in one transaction. A duplicate number fails with
// ErrConflict (constraint invoices_number_key). Lines that do not sum to
// the amount fail here, before the database's check would at commit.
func InsertInvoice(ctx context.Context, tx pgx.Tx, in NewInvoice) (Invoice, error) {
	if err := checkLinesSum(in); err != nil {
		return Invoice{}, err
	}
	var number *string
	if in.Number != "" {
		number = &in.Number
	}
	q := dbsqlc.New(tx)
	row, err := q.InsertInvoice(ctx, dbsqlc.InsertInvoiceParams{
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
	if err != nil {
		return Invoice{}, MapError(err)
	}
	// The lines answer nothing: on a pipelined transaction they go with
	// the next statement that does.
	lines := dbsqlc.New(later(tx))
	for i, l := range in.Lines {
		amount, err := l.Amount()
		if err != nil {
			return Invoice{}, err
		}
		if err := lines.InsertInvoiceLine(ctx, dbsqlc.InsertInvoiceLineParams{
			InvoiceID: row.ID, Position: int32(i + 1), Description: l.Description,
			PeriodStart: l.PeriodStart, PeriodEnd: l.PeriodEnd,
			Quantity: l.Quantity, UnitAmount: l.UnitAmount, Amount: amount, CreatedAt: in.CreatedAt,
		}); err != nil {
			return Invoice{}, MapError(err)
		}
	}
	return row, nil
}

// NewRenewalInvoice is one invoice of InsertRenewalInvoices: a recurring
// order's, issued, numbered and due, with one line for the period it bills
// at its amount.
type NewRenewalInvoice struct {
	ID, CustomerID, OrderID uuid.UUID
	Number                  string
	Amount                  money.Amount
	Currency, Description   string
	// DueAt is when the period starts.
	DueAt, PeriodStart, PeriodEnd time.Time
}

// InsertRenewalInvoices writes the invoices ins, issued at issued, and
// their lines in two statements (the lines go with the next statement that
// answers, on a pipelined transaction), and answers the rows in the order
// of ins.
func InsertRenewalInvoices(ctx context.Context, tx pgx.Tx, issued time.Time, ins []NewRenewalInvoice) ([]Invoice, error) {
	inv := dbsqlc.InsertRenewalInvoicesParams{IssuedAt: issued}
	lines := dbsqlc.InsertRenewalInvoiceLinesParams{CreatedAt: issued}
	for _, in := range ins {
		amount := in.Amount.String()
		inv.Ids = append(inv.Ids, in.ID)
		inv.CustomerIds = append(inv.CustomerIds, in.CustomerID)
		inv.OrderIds = append(inv.OrderIds, in.OrderID)
		inv.Numbers = append(inv.Numbers, in.Number)
		inv.Amounts = append(inv.Amounts, amount)
		inv.Currencies = append(inv.Currencies, in.Currency)
		inv.Descriptions = append(inv.Descriptions, in.Description)
		inv.DueAts = append(inv.DueAts, in.DueAt)
		lines.InvoiceIds = append(lines.InvoiceIds, in.ID)
		lines.Descriptions = append(lines.Descriptions, in.Description)
		lines.PeriodStarts = append(lines.PeriodStarts, in.PeriodStart)
		lines.PeriodEnds = append(lines.PeriodEnds, in.PeriodEnd)
		lines.Amounts = append(lines.Amounts, amount)
	}
	rows, err := dbsqlc.New(tx).InsertRenewalInvoices(ctx, inv)
	if err != nil {
		return nil, MapError(err)
	}
	if len(rows) != len(ins) {
		return nil, fmt.Errorf("store: %d renewal invoices written of %d", len(rows), len(ins))
	}
	byID := ByKey(rows, func(r Invoice) uuid.UUID { return r.ID })
	out := make([]Invoice, len(ins))
	for i, in := range ins {
		out[i] = byID[in.ID]
	}
	if err := dbsqlc.New(later(tx)).InsertRenewalInvoiceLines(ctx, lines); err != nil {
		return nil, MapError(err)
	}
	return out, nil
}

// checkLinesSum refuses an invoice without lines or whose lines do not sum
// to its amount: a bug of the caller, which the database would refuse at
// commit (invoice_lines_sum_check) without saying which caller.
func checkLinesSum(in NewInvoice) error {
	if len(in.Lines) == 0 {
		return fmt.Errorf("store: invoice %s has no lines", in.ID)
	}
	sum := money.Zero()
	for _, l := range in.Lines {
		a, err := l.Amount()
		if err != nil {
			return err
		}
		if sum, err = sum.Add(a); err != nil {
			return err
		}
	}
	if sum.Cmp(in.Amount) != 0 {
		return fmt.Errorf("store: invoice %s of %s has lines summing to %s", in.ID, in.Amount, sum)
	}
	return nil
}

// InvoiceLines returns the lines of the given invoices, by invoice id, each
// invoice's in position order.
func InvoiceLines(ctx context.Context, db DB, ids []uuid.UUID) (map[uuid.UUID][]InvoiceLine, error) {
	out := make(map[uuid.UUID][]InvoiceLine, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := dbsqlc.New(db).ListInvoiceLines(ctx, ids)
	if err != nil {
		return nil, MapError(err)
	}
	for _, l := range rows {
		out[l.InvoiceID] = append(out[l.InvoiceID], l)
	}
	return out, nil
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
