package order

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/paging"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/timerange"
)

// NewInvoice is an invoice to issue: exactly one of OrderID and CustomerID.
type NewInvoice struct {
	// OrderID bills an order: the invoice takes its customer and currency.
	OrderID *uuid.UUID
	// CustomerID bills a customer for no order.
	CustomerID *uuid.UUID
	// Amount must be greater than 0. It need not match what is unpaid of
	// the order: an invoice may bill extras or a part.
	Amount money.Amount
	// Currency empty takes the order's currency, or the customer's balance
	// currency; it must be one of [billing].currencies, and for an order's
	// invoice the order's currency.
	Currency    string
	Description string
	// DueAt must be in the future.
	DueAt time.Time
}

// CreateInvoice issues an invoice (admin): status issued, issued now, with
// the next number of its year's series (TakeInvoiceNumber) and one line,
// its description and amount. An order's invoice may not be created for an
// order that ended (cancelled, refunded, terminated, completed).
func (s *Service) CreateInvoice(ctx context.Context, in NewInvoice) (store.Invoice, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return store.Invoice{}, err
	}
	if (in.OrderID == nil) == (in.CustomerID == nil) {
		return store.Invoice{}, apperr.New(apperr.InvalidArgument, "exactly one of order_id and customer_id is required")
	}
	if in.Amount.Sign() <= 0 {
		return store.Invoice{}, apperr.New(apperr.InvalidArgument, "amount must be greater than 0")
	}
	now := s.now()
	if !in.DueAt.After(now) {
		return store.Invoice{}, apperr.New(apperr.InvalidArgument, "due_at must be in the future")
	}
	if err := timerange.CheckAhead("due_at", in.DueAt, now); err != nil {
		return store.Invoice{}, err
	}
	id := uuid.New()
	due := store.Timestamp(in.DueAt)
	var out store.Invoice
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		customerID, currency, err := s.invoiceTarget(ctx, tx, in)
		if err != nil {
			return err
		}
		number, err := TakeInvoiceNumber(ctx, tx, now, s.loc)
		if err != nil {
			return err
		}
		inv, err := store.InsertInvoice(ctx, tx, store.NewInvoice{
			ID: id, CustomerID: customerID, OrderID: in.OrderID, Number: number,
			Status: string(InvoiceIssued), Amount: in.Amount, Currency: currency,
			Description: in.Description, IssuedAt: &now, DueAt: &due, CreatedAt: now,
			Lines: []store.NewInvoiceLine{{Description: in.Description, Quantity: 1, UnitAmount: in.Amount}},
		})
		if err != nil {
			return err
		}
		out = inv
		return audit.Write(ctx, tx, audit.Of(p), now, ActionInvoiceCreate, entityInvoice, inv.ID.String(), nil, InvoiceSnapshot(inv))
	})
	if err != nil {
		return store.Invoice{}, err
	}
	s.log.InfoContext(ctx, "invoice issued", "invoice_id", out.ID, "customer_id", out.CustomerID,
		"amount", out.Amount.String(), "currency", out.Currency, "principal", p.String())
	return out, nil
}

// invoiceTarget decides whom an invoice bills and in which currency. An
// order is locked, so it cannot be cancelled between the check and the
// insert.
func (s *Service) invoiceTarget(ctx context.Context, tx pgx.Tx, in NewInvoice) (uuid.UUID, string, error) {
	var customerID uuid.UUID
	var currency string
	if in.OrderID != nil {
		o, err := store.Q(tx).GetOrderForUpdate(ctx, *in.OrderID)
		if err != nil {
			return uuid.Nil, "", store.NotFound(err, "order %s not found", *in.OrderID)
		}
		if Status(o.Status).IsFinal() {
			// An order that ended takes no more money (a payment of the
			// invoice would be refused, or captured to be returned).
			return uuid.Nil, "", apperr.New(apperr.InvalidArgument, "order %s is %s", o.ID, o.Status)
		}
		if in.Currency != "" && in.Currency != o.Currency {
			return uuid.Nil, "", apperr.New(apperr.InvalidArgument, "an invoice of order %s must be in the order's currency %s", o.ID, o.Currency)
		}
		customerID, currency = o.CustomerID, o.Currency
	} else {
		acct, err := store.GetBalanceAccount(ctx, tx, *in.CustomerID)
		if err != nil {
			return uuid.Nil, "", store.NotFound(err, "customer %s not found", *in.CustomerID)
		}
		customerID, currency = acct.CustomerID, acct.Currency
		if in.Currency != "" {
			currency = in.Currency
		}
	}
	return customerID, currency, s.checkCurrency(currency)
}

// TakeInvoiceNumber takes the next number of the series of an invoice
// issued at issued, in tx, the transaction that issues it: INV-<year of
// issue in the billing time zone loc (nil: UTC)>-<the number, 6 digits or
// more>, 1, 2, 3, ... in each year. The series' counter row stays locked
// until tx ends, so the numbers have no gap and no duplicate: a rollback
// gives its number back (docs/decisions.md, "invoice numbers").
func TakeInvoiceNumber(ctx context.Context, tx pgx.Tx, issued time.Time, loc *time.Location) (string, error) {
	numbers, err := TakeInvoiceNumbers(ctx, tx, issued, loc, 1)
	if err != nil {
		return "", err
	}
	return numbers[0], nil
}

// TakeInvoiceNumbers is TakeInvoiceNumber for n invoices issued at once
// (n ≥ 1): the next n numbers of the series, in order.
func TakeInvoiceNumbers(ctx context.Context, tx pgx.Tx, issued time.Time, loc *time.Location, n int) ([]string, error) {
	if loc == nil {
		loc = time.UTC
	}
	series := "INV-" + strconv.Itoa(issued.In(loc).Year())
	last, err := store.Q(tx).TakeInvoiceNumbers(ctx, store.TakeInvoiceNumbersParams{Series: series, Count: int64(n), UpdatedAt: issued})
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%06d", series, last-int64(n-1-i))
	}
	return out, nil
}

// GetInvoice returns one invoice and its lines: admins any, customers
// their own.
func (s *Service) GetInvoice(ctx context.Context, id uuid.UUID) (store.Invoice, []store.InvoiceLine, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return store.Invoice{}, nil, err
	}
	inv, err := store.Q(s.db).GetInvoice(ctx, id)
	hidden := apperr.New(apperr.NotFound, "invoice %s not found", id)
	if err := auth.Owned(p, inv.CustomerID, err, hidden, hidden); err != nil {
		return store.Invoice{}, nil, err
	}
	lines, err := store.InvoiceLines(ctx, s.db, []uuid.UUID{id})
	if err != nil {
		return store.Invoice{}, nil, err
	}
	return inv, lines[id], nil
}

// Lines returns the lines of invoices, by invoice id.
func (s *Service) Lines(ctx context.Context, invoices []store.Invoice) (map[uuid.UUID][]store.InvoiceLine, error) {
	ids := make([]uuid.UUID, len(invoices))
	for i, inv := range invoices {
		ids[i] = inv.ID
	}
	return store.InvoiceLines(ctx, s.db, ids)
}

// ListInvoices returns a page of invoices, newest first. Customers see only
// their own.
func (s *Service) ListInvoices(ctx context.Context, f store.InvoiceFilter, page, size uint32) ([]store.Invoice, paging.Page, error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return nil, paging.Page{}, err
	}
	pg, err := paging.Normalize(page, size)
	if err != nil {
		return nil, paging.Page{}, err
	}
	if f.CustomerID, err = scope(p, f.CustomerID); err != nil {
		return nil, paging.Page{}, err
	}
	rows, total, err := store.ListInvoices(ctx, s.db, f, pg.Limit(), pg.Offset())
	if err != nil {
		return nil, paging.Page{}, err
	}
	return rows, pg.WithTotal(total), nil
}

// CancelInvoice cancels an invoice nothing has been paid on (admin), and
// fails its pending payments, in one transaction. A paid, partly paid or
// already cancelled invoice is InvalidArgument.
func (s *Service) CancelInvoice(ctx context.Context, id uuid.UUID) (store.Invoice, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return store.Invoice{}, err
	}
	var out store.Invoice
	var failed []store.Payment
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		inv, err := store.Q(tx).GetInvoice(ctx, id)
		if err != nil {
			return store.NotFound(err, "invoice %s not found", id)
		}
		// The order first (a renewal invoice's cancel changes it), then
		// the invoice: the lock order of every writer.
		if inv.OrderID != nil {
			if _, err := store.Q(tx).GetOrderForUpdate(ctx, *inv.OrderID); err != nil {
				return store.BugIfNotFound(err, "lock the invoice's order")
			}
		}
		if inv, err = store.Q(tx).GetInvoiceForUpdate(ctx, id); err != nil {
			return store.BugIfNotFound(err, "lock invoice")
		}
		from := InvoiceStatus(inv.Status)
		switch {
		case from == InvoicePaid:
			return apperr.New(apperr.InvalidArgument, "invoice %s is paid and cannot be cancelled", id)
		case from == InvoiceCancelled:
			return apperr.New(apperr.InvalidArgument, "invoice %s is already cancelled", id)
		case !inv.PaidAmount.IsZero():
			return apperr.New(apperr.InvalidArgument, "invoice %s is partly paid (%s); refund it first", id, inv.PaidAmount)
		case !CanTransitionInvoice(from, InvoiceCancelled):
			return apperr.New(apperr.InvalidArgument, "invoice %s is %s and cannot be cancelled", id, inv.Status)
		}
		moved, err := InvoiceTransition(ctx, tx, inv, InvoiceMove{
			To: InvoiceCancelled, By: audit.Of(p), At: s.now(), FailReason: failedByInvoiceCancel,
		})
		if err != nil {
			return err
		}
		out, failed = moved.Invoice, moved.FailedPayments
		return nil
	})
	if err != nil {
		return store.Invoice{}, err
	}
	s.log.InfoContext(ctx, "invoice cancelled", "invoice_id", id, "failed_payments", len(failed), "principal", p.String())
	return out, nil
}

// renewalDescription is the description and the one line of the renewal
// invoice of period seq (start to end) of o: its dates in the billing time
// zone loc (nil: UTC).
func renewalDescription(o store.Order, seq int32, start, end time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	return fmt.Sprintf("%s: period %d, %s to %s", renewalSubject(o), seq, start.In(loc).Format(time.DateOnly), end.In(loc).Format(time.DateOnly))
}

// renewalSubject names what a renewal invoice renews: the order's
// description, or its id.
func renewalSubject(o store.Order) string {
	if o.Description != "" {
		return "Renewal of " + o.Description
	}
	return "Renewal of order " + o.ID.String()
}
