package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
)

// inTx runs the statements in one transaction and returns the error of the
// first that fails, or the commit's (where the deferred sum check runs),
// mapped by the store.
func (b *bundle) inTx(t *testing.T, stmts ...func(tx pgx.Tx) error) error {
	t.Helper()
	return store.WithTx(context.Background(), b.pool, func(tx pgx.Tx) error {
		for _, s := range stmts {
			if err := s(tx); err != nil {
				return store.MapError(err)
			}
		}
		return nil
	})
}

func (b *bundle) newInvoice(id uuid.UUID, number, amount string) func(tx pgx.Tx) error {
	return func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), `INSERT INTO invoices (id, customer_id, number, status, amount, currency, description)
			VALUES ($1, $2, $3, 'issued', $4, 'CNY', 'hosting')`, id, b.customerID, number, money.MustParse(amount))
		return err
	}
}

func line(id uuid.UUID, pos int, amount string) func(tx pgx.Tx) error {
	return func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), `INSERT INTO invoice_lines (invoice_id, position, description, quantity, unit_amount, amount)
			VALUES ($1, $2, 'line', 1, $3, $3)`, id, pos, money.MustParse(amount))
		return err
	}
}

func exec(sql string, args ...any) func(tx pgx.Tx) error {
	return func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), sql, args...)
		return err
	}
}

func requireSumRefused(t *testing.T, err error, msg string) {
	t.Helper()
	require.ErrorIs(t, err, store.ErrCheckViolation, msg)
	require.Equal(t, "invoice_lines_sum_check", store.ConstraintOf(err), msg)
}

// The database checks, at the commit of each transaction that writes an
// invoice or its lines, that the invoice's amount is the sum of its lines:
// an invoice inserted before its lines passes, a credit line may be
// negative, and any commit that leaves them apart fails whole.
func TestAnInvoicesAmountIsTheSumOfItsLinesAtCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	lines := func(id uuid.UUID) int {
		return countRows(t, b, `SELECT count(*) FROM invoice_lines WHERE invoice_id = $1`, id)
	}

	ok := uuid.New()
	require.NoError(t, b.inTx(t, b.newInvoice(ok, "INV-2026-000001", "10.00"), line(ok, 1, "12.00"), line(ok, 2, "-2.00")),
		"the invoice first, then its lines, one of them a credit")
	require.Equal(t, 2, lines(ok))

	for _, c := range []struct {
		name  string
		lines []string
	}{
		{"a cent short", []string{"9.99"}},
		{"a cent over", []string{"10.01"}},
		{"a credit too many", []string{"10.00", "-0.01"}},
		{"no lines", nil},
	} {
		id := uuid.New()
		stmts := []func(pgx.Tx) error{b.newInvoice(id, "INV-2026-000002", "10.00")}
		for i, a := range c.lines {
			stmts = append(stmts, line(id, i+1, a))
		}
		requireSumRefused(t, b.inTx(t, stmts...), c.name)
		require.Zero(t, countRows(t, b, `SELECT count(*) FROM invoices WHERE id = $1`, id), "%s: nothing kept", c.name)
		require.Zero(t, lines(id), c.name)
	}

	// Later changes to a committed invoice are checked the same way.
	requireSumRefused(t, b.inTx(t, exec(`UPDATE invoice_lines SET unit_amount = 13.00, amount = 13.00 WHERE invoice_id = $1 AND position = 1`, ok)),
		"a line changed alone")
	requireSumRefused(t, b.inTx(t, exec(`DELETE FROM invoice_lines WHERE invoice_id = $1 AND position = 2`, ok)), "a line removed")
	requireSumRefused(t, b.inTx(t, exec(`UPDATE invoices SET amount = 11.00 WHERE id = $1`, ok)), "the amount changed alone")
	requireSumRefused(t, b.inTx(t, line(ok, 3, "0.50")), "a line added alone")
	other := uuid.New()
	requireSumRefused(t, b.inTx(t, b.newInvoice(other, "INV-2026-000003", "5.00"), line(other, 1, "5.00"),
		exec(`UPDATE invoice_lines SET invoice_id = $1 WHERE invoice_id = $2 AND position = 2`, other, ok)),
		"a line moved to another invoice leaves both wrong")
	require.NoError(t, b.inTx(t, line(ok, 3, "0.50"), exec(`UPDATE invoices SET amount = 10.50 WHERE id = $1`, ok)),
		"a line added with the amount it adds")

	var amount money.Amount
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT amount FROM invoices WHERE id = $1`, ok).Scan(&amount))
	require.Equal(t, "10.50", amount.String())
}

// v0.1.0 writes invoices without lines and may still be serving during a
// rolling upgrade: an invoice numbered its way that reaches its commit with
// no line gets the one line the migration gave the older invoices (the
// period when it bills one). An invoice numbered any other way does not.
func TestAnInvoiceOfTheReleaseWithoutLinesGetsItsOneLine(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(0, 1, 0)

	loose, renewal := uuid.New(), uuid.New()
	require.NoError(t, b.inTx(t, b.newInvoice(loose, "INV-20261129-0123456789AB", "15.00")))
	require.NoError(t, b.inTx(t,
		exec(`INSERT INTO invoices (id, customer_id, order_id, number, status, amount, currency, description)
			VALUES ($1, $2, $3, 'INV-20261129-ABCDEF012345', 'issued', 20.00, 'CNY', 'renewal')`, renewal, b.customerID, b.orderID),
		exec(`INSERT INTO service_periods (order_id, seq, starts_at, ends_at, anchor_at, anchor_months, invoice_id, status)
			VALUES ($1, 2, $2, $3, $2, 1, $4, 'unpaid')`, b.orderID, start, end, renewal)))

	got, err := store.InvoiceLines(ctx, b.pool, []uuid.UUID{loose, renewal})
	require.NoError(t, err)
	require.Len(t, got[loose], 1)
	l := got[loose][0]
	require.Equal(t, []any{int32(1), "hosting", int32(1), "15.00", "15.00"}, []any{l.Position, l.Description, l.Quantity, l.UnitAmount.String(), l.Amount.String()})
	require.Nil(t, l.PeriodStart)
	require.Nil(t, l.PeriodEnd)
	require.Len(t, got[renewal], 1)
	l = got[renewal][0]
	require.Equal(t, "20.00", l.Amount.String())
	require.True(t, start.Equal(*l.PeriodStart), "the period its service_periods row names")
	require.True(t, end.Equal(*l.PeriodEnd))

	requireSumRefused(t, b.inTx(t, b.newInvoice(uuid.New(), "INV-2026-000009", "15.00")), "this release's numbering gets no line made up")
}

// InsertInvoice writes the lines with the invoice and refuses lines that
// do not add up before the database would, saying which invoice.
func TestInsertInvoiceWritesItsLines(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Microsecond)
	end := at.AddDate(0, 1, 0)
	in := store.NewInvoice{
		ID: uuid.New(), CustomerID: b.customerID, Number: "INV-2026-000001", Status: "issued",
		Amount: money.MustParse("25.00"), Currency: "CNY", CreatedAt: at,
		Lines: []store.NewInvoiceLine{
			{Description: "VPS 4 GB", PeriodStart: &at, PeriodEnd: &end, Quantity: 3, UnitAmount: money.MustParse("10.00")},
			{Description: "unused VPS 2 GB", Quantity: 1, UnitAmount: money.MustParse("-5.00")},
		},
	}
	insert := func(in store.NewInvoice) error {
		return store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
			_, err := store.InsertInvoice(ctx, tx, in)
			return err
		})
	}
	require.NoError(t, insert(in))
	got, err := store.InvoiceLines(ctx, b.pool, []uuid.UUID{in.ID})
	require.NoError(t, err)
	require.Len(t, got[in.ID], 2)
	first, second := got[in.ID][0], got[in.ID][1]
	require.Equal(t, []any{int32(1), "VPS 4 GB", int32(3), "10.00", "30.00"}, []any{first.Position, first.Description, first.Quantity, first.UnitAmount.String(), first.Amount.String()})
	require.True(t, at.Equal(*first.PeriodStart))
	require.True(t, end.Equal(*first.PeriodEnd))
	require.Equal(t, []any{int32(2), "-5.00", "-5.00"}, []any{second.Position, second.UnitAmount.String(), second.Amount.String()})

	off := in
	off.ID, off.Number = uuid.New(), "INV-2026-000002"
	off.Amount = money.MustParse("25.01")
	require.ErrorContains(t, insert(off), "has lines summing to 25.00")
	none := in
	none.ID, none.Number, none.Lines = uuid.New(), "INV-2026-000003", nil
	require.ErrorContains(t, insert(none), "has no lines")
	require.Equal(t, 1, countRows(t, b, `SELECT count(*) FROM invoices WHERE number LIKE 'INV-2026-%'`))
}

func countRows(t *testing.T, b *bundle, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// A line's own figures agree: quantity at least 1, amount = quantity ×
// unit amount, and a period has both ends, the end after the start.
func TestAnInvoiceLinesOwnFiguresMustAgree(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name, constraint string
		quantity         int
		unit, amount     string
		periodStart, end *time.Time
	}{
		{"no quantity", "invoice_lines_quantity_check", 0, "5.00", "0.00", nil, nil},
		{"amount not quantity × unit", "invoice_lines_amount_check", 2, "5.00", "5.00", nil, nil},
		{"a start without an end", "invoice_lines_period_check", 1, "5.00", "5.00", &start, nil},
		{"an end before the start", "invoice_lines_period_check", 1, "5.00", "5.00", ptr(start.Add(time.Hour)), &start},
	} {
		id := uuid.New()
		err := b.inTx(t, b.newInvoice(id, "INV-2026-000001", "5.00"), exec(`INSERT INTO invoice_lines
			(invoice_id, position, description, period_start, period_end, quantity, unit_amount, amount)
			VALUES ($1, 1, 'x', $2, $3, $4, $5, $6)`, id, c.periodStart, c.end, c.quantity, money.MustParse(c.unit), money.MustParse(c.amount)))
		require.ErrorIs(t, err, store.ErrCheckViolation, c.name)
		require.Equal(t, c.constraint, store.ConstraintOf(err), c.name)
	}
	ok := uuid.New()
	require.NoError(t, b.inTx(t, b.newInvoice(ok, "INV-2026-000001", "15.00"), exec(`INSERT INTO invoice_lines
		(invoice_id, position, description, period_start, period_end, quantity, unit_amount, amount)
		VALUES ($1, 1, 'x', $2, $3, 3, 5.00, 15.00)`, ok, start, start.AddDate(0, 1, 0))), "the same rows, right")
}
