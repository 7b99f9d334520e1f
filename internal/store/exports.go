package store

import (
	"cmp"
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// ExportPageRows is how many rows one page of an export reads.
const ExportPageRows = 1000

// ExportPayment is one row of the payments export; ExportPaymentFilter
// selects them (a created_at range and the list's filters; nil: no filter).
type (
	ExportPayment = dbsqlc.ExportPaymentsPageRow
	ExportRefund  = dbsqlc.ExportRefundsPageRow
	ExportInvoice = dbsqlc.ExportInvoicesPageRow
)

// ExportInvoiceFilter selects the invoices of an export.
type ExportInvoiceFilter struct {
	CreatedFrom, CreatedTo time.Time
	CustomerID             *uuid.UUID
	OrderID                *uuid.UUID
	Status                 *string
}

// ExportPaymentFilter selects the payments of an export.
type ExportPaymentFilter struct {
	CreatedFrom, CreatedTo time.Time
	CustomerID             *uuid.UUID
	OrderID                *uuid.UUID
	InvoiceID              *uuid.UUID
	GatewayInterfaceID     *uuid.UUID
	Status                 *string
	// ToReturn keeps the payments whose captured money is not returned in
	// full.
	ToReturn bool
}

// ExportRefundFilter selects the refunds of an export.
type ExportRefundFilter struct {
	CreatedFrom, CreatedTo time.Time
	PaymentID              *uuid.UUID
	CustomerID             *uuid.UUID
	Status                 *string
}

// EachExportPayment calls fn with every payment f selects, oldest first
// (created_at, then id). It reads them in keyset pages of pageRows
// (ExportPageRows when 0), each page a statement of its own after the last
// row of the one before: a pooled connection is held only while a page is
// read, never while fn runs, and memory holds one page, not the export.
// Each page is its own snapshot: a payment created during the export
// after the page that would hold it was read is included, and one a later
// page holds is read as it is then. fn's error stops the read and is
// returned as it is.
func EachExportPayment(ctx context.Context, db DB, f ExportPaymentFilter, pageRows int, fn func(ExportPayment) error) error {
	p := dbsqlc.ExportPaymentsPageParams{
		CreatedFrom: f.CreatedFrom, CreatedTo: f.CreatedTo,
		CustomerID: f.CustomerID, OrderID: f.OrderID, InvoiceID: f.InvoiceID,
		GatewayInterfaceID: f.GatewayInterfaceID, Status: f.Status, ToReturn: f.ToReturn,
	}
	return eachPage(pageRows, func(after keyset, rows int32) ([]ExportPayment, error) {
		p.AfterCreatedAt, p.AfterID, p.PageRows = cmp.Or(after.at, f.CreatedFrom), after.id, rows
		return dbsqlc.New(db).ExportPaymentsPage(ctx, p)
	}, func(r ExportPayment) keyset { return keyset{r.CreatedAt, &r.ID} }, fn)
}

// EachExportRefund is EachExportPayment for refunds.
func EachExportRefund(ctx context.Context, db DB, f ExportRefundFilter, pageRows int, fn func(ExportRefund) error) error {
	p := dbsqlc.ExportRefundsPageParams{
		CreatedFrom: f.CreatedFrom, CreatedTo: f.CreatedTo,
		PaymentID: f.PaymentID, CustomerID: f.CustomerID, Status: f.Status,
	}
	return eachPage(pageRows, func(after keyset, rows int32) ([]ExportRefund, error) {
		p.AfterCreatedAt, p.AfterID, p.PageRows = cmp.Or(after.at, f.CreatedFrom), after.id, rows
		return dbsqlc.New(db).ExportRefundsPage(ctx, p)
	}, func(r ExportRefund) keyset { return keyset{r.CreatedAt, &r.ID} }, fn)
}

// EachExportInvoice is EachExportPayment for invoices. With lines, each
// page's lines are read with it (one more statement on the same page's
// turn, no connection held while fn runs), and fn gets each invoice's
// lines in position order; without, nil.
func EachExportInvoice(ctx context.Context, db DB, f ExportInvoiceFilter, pageRows int, lines bool, fn func(ExportInvoice, []InvoiceLine) error) error {
	p := dbsqlc.ExportInvoicesPageParams{
		CreatedFrom: f.CreatedFrom, CreatedTo: f.CreatedTo,
		CustomerID: f.CustomerID, OrderID: f.OrderID, Status: f.Status,
	}
	type withLines struct {
		inv   ExportInvoice
		lines []InvoiceLine
	}
	return eachPage(pageRows, func(after keyset, rows int32) ([]withLines, error) {
		p.AfterCreatedAt, p.AfterID, p.PageRows = cmp.Or(after.at, f.CreatedFrom), after.id, rows
		got, err := dbsqlc.New(db).ExportInvoicesPage(ctx, p)
		if err != nil {
			return nil, err
		}
		out := make([]withLines, len(got))
		ids := make([]uuid.UUID, len(got))
		for i, inv := range got {
			out[i].inv, ids[i] = inv, inv.ID
		}
		if lines {
			byInvoice, err := InvoiceLines(ctx, db, ids)
			if err != nil {
				return nil, err
			}
			for i := range out {
				out[i].lines = byInvoice[out[i].inv.ID]
			}
		}
		return out, nil
	}, func(r withLines) keyset { return keyset{r.inv.CreatedAt, &r.inv.ID} }, func(r withLines) error { return fn(r.inv, r.lines) })
}

// keyset is where a page starts: after the row of (at, id); the zero value
// is the first page.
type keyset struct {
	at time.Time
	id *uuid.UUID
}

// eachPage reads page after page and calls fn with each row, until a page
// comes back short.
func eachPage[R any](pageRows int, page func(keyset, int32) ([]R, error), key func(R) keyset, fn func(R) error) error {
	rows := int32(min(max(cmp.Or(pageRows, ExportPageRows), 1), 1<<20))
	var after keyset
	for {
		got, err := page(after, rows)
		if err != nil {
			return MapError(err)
		}
		for _, r := range got {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(got) < int(rows) {
			return nil
		}
		after = key(got[len(got)-1])
	}
}
