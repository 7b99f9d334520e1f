package order_test

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
)

// Invoices issued at once each take the next number of the year's series:
// 1 to N, none twice, none skipped.
func TestConcurrentIssuesNumberInvoicesOneToNWithoutAGap(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 24
	year := time.Now().UTC().Year()
	numbers := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			inv, err := b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{CustomerID: &b.bob, Amount: money.MustParse("1.00"), DueAt: future()})
			errs[i] = err
			if err == nil {
				numbers[i] = *inv.Number
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	sort.Strings(numbers)
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("INV-%d-%06d", year, i+1)
	}
	require.Equal(t, want, numbers)
}

// The number is taken in the transaction that issues the invoice: an issue
// that rolls back gives its number back, so the next issue takes it and
// the series has no gap.
func TestARolledBackIssueLeavesNoGapInTheNumbers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	year := time.Now().UTC().Year()
	number := func(n int) string { return fmt.Sprintf("INV-%d-%06d", year, n) }
	issue := func() (store.Invoice, error) {
		return b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{CustomerID: &b.bob, Amount: money.MustParse("2.00"), Description: "setup", DueAt: future()})
	}

	first, err := issue()
	require.NoError(t, err)
	require.Equal(t, number(1), *first.Number)

	// A row that already holds the next number makes the next issue fail
	// after it took the number (invoices_number_key), and roll back.
	b.exec(t, `WITH i AS (INSERT INTO invoices (customer_id, number, status, amount, currency)
		VALUES ($1, $2, 'issued', 1.00, 'CNY') RETURNING *)
		INSERT INTO invoice_lines (invoice_id, position, description, unit_amount, amount) SELECT id, 1, '', amount, amount FROM i`, b.bob, number(2))
	_, err = issue()
	require.ErrorIs(t, err, store.ErrConflict)
	b.exec(t, `DELETE FROM invoices WHERE number = $1`, number(2))

	// So does any transaction that took a number and rolled back.
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }() // also when an assertion below fails
	taken, err := order.TakeInvoiceNumber(ctx, tx, time.Now(), nil)
	require.NoError(t, err)
	require.Equal(t, number(2), taken, "the failed issue gave its number back")
	require.NoError(t, tx.Rollback(ctx))

	second, err := issue()
	require.NoError(t, err)
	require.Equal(t, number(2), *second.Number, "the numbers given back are taken again: no gap")
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM invoices`))
}

// The series is the year of issue in the billing time zone, and a
// cancelled invoice keeps its number: the next one is not given it again.
func TestTheSeriesIsTheYearOfIssueInTheBillingTimeZone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	// 23:30 UTC on New Year's Eve is 00:30 on New Year's Day in Berlin.
	at := time.Date(2030, 12, 31, 23, 30, 0, 0, time.UTC)
	issueAt := func(loc *time.Location) store.Invoice {
		t.Helper()
		svc := order.NewService(b.pool, currencies, nil, func() time.Time { return at }, slog.New(slog.DiscardHandler))
		svc.SetLocation(loc)
		inv, err := svc.CreateInvoice(b.asAdmin, order.NewInvoice{CustomerID: &b.bob, Amount: money.MustParse("3.00"), DueAt: at.Add(24 * time.Hour)})
		require.NoError(t, err)
		return inv
	}
	require.Equal(t, "INV-2031-000001", *issueAt(berlin).Number)
	utc := issueAt(nil)
	require.Equal(t, "INV-2030-000001", *utc.Number, "nil is UTC")

	svc := order.NewService(b.pool, currencies, nil, func() time.Time { return at }, slog.New(slog.DiscardHandler))
	cancelled, err := svc.CancelInvoice(b.asAdmin, utc.ID)
	require.NoError(t, err)
	require.Equal(t, "INV-2030-000001", *cancelled.Number, "a cancelled invoice keeps its number")
	require.Equal(t, "INV-2030-000002", *issueAt(nil).Number, "and its number is not given again")
	require.Equal(t, "INV-2031-000002", *issueAt(berlin).Number)
}

// A manual invoice has one line: its description and amount, no period.
func TestAManualInvoiceHasOneLineFromItsDescription(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inv, err := b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{CustomerID: &b.bob, Amount: money.MustParse("12.34"), Description: "migration help", DueAt: future()})
	require.NoError(t, err)
	_, lines, err := b.svc.GetInvoice(b.asBob, inv.ID)
	require.NoError(t, err)
	require.Len(t, lines, 1)
	l := lines[0]
	require.Equal(t, []any{int32(1), "migration help", int32(1), "12.34", "12.34"},
		[]any{l.Position, l.Description, l.Quantity, l.UnitAmount.String(), l.Amount.String()})
	require.Nil(t, l.PeriodStart)
	require.Nil(t, l.PeriodEnd)

	byID, err := b.svc.Lines(b.asBob, []store.Invoice{inv})
	require.NoError(t, err)
	require.Equal(t, lines, byID[inv.ID])
}
