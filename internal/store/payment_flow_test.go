package store_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
)

// GetPendingGatewayPayment runs before every CreatePayment's plugin call:
// it must find exactly the pending payment of (order, invoice, interface),
// NULLs matching NULLs, and find it through an index: a sequential scan
// reads the whole payments table, which grows with every payment ever made.
func TestGetPendingGatewayPaymentFindsTheExactTargetThroughAnIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	// Thousands of other pending payments of interface A, each of an
	// order of its own, for the lookup to ignore.
	_, err := b.pool.Exec(ctx, `
		WITH o AS (
			INSERT INTO orders (customer_id, total_amount, currency)
			SELECT $1, 1.00, 'CNY' FROM generate_series(1, 3000)
			RETURNING id)
		INSERT INTO payments (order_id, customer_id, method, gateway_interface_id, amount, currency)
		SELECT id, $1, 'gateway', $2, 1.00, 'CNY' FROM o`, b.otherID, b.gatewayA)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `ANALYZE payments`)
	require.NoError(t, err)

	// One pending payment of each kind of target, all of interface A.
	ids := map[string]uuid.UUID{}
	for name, p := range map[string]struct{ o, i *uuid.UUID }{
		"order": {ptr(b.orderID), nil}, "order+invoice": {ptr(b.orderID), ptr(b.invoiceID)}, "invoice": {nil, ptr(b.invoiceID)},
	} {
		params := b.pendingPayment()
		params.OrderID, params.InvoiceID = p.o, p.i
		ins, err := b.q.InsertPayment(ctx, params)
		require.NoError(t, err, name)
		ids[name] = ins.ID
	}

	// A connection that remembers the SQL it was last asked to run, so
	// the test can ask PostgreSQL for the plan of exactly that statement.
	var last pgx.TraceQueryStartData
	cfg := b.pool.Config().ConnConfig.Copy()
	cfg.Tracer = tracerFunc(func(d pgx.TraceQueryStartData) { last = d })
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)

	for _, c := range []struct {
		name   string
		o, i   *uuid.UUID
		gw     uuid.UUID
		want   uuid.UUID
		absent bool
	}{
		{name: "order alone", o: ptr(b.orderID), gw: b.gatewayA, want: ids["order"]},
		{name: "order and invoice", o: ptr(b.orderID), i: ptr(b.invoiceID), gw: b.gatewayA, want: ids["order+invoice"]},
		{name: "invoice alone", i: ptr(b.invoiceID), gw: b.gatewayA, want: ids["invoice"]},
		{name: "another interface", o: ptr(b.orderID), gw: b.gatewayB, absent: true},
		{name: "another order", o: ptr(uuid.New()), gw: b.gatewayA, absent: true},
	} {
		got, err := store.Q(conn).GetPendingGatewayPayment(ctx, store.GetPendingGatewayPaymentParams{
			OrderID: c.o, InvoiceID: c.i, GatewayInterfaceID: &c.gw,
		})
		requireIndexedLookup(t, conn, last, c.name)
		if c.absent {
			require.ErrorIs(t, err, store.ErrNotFound, c.name)
			continue
		}
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, got.ID, c.name)
	}
}

// FailPendingPayments runs in the money transactions (an order or invoice
// paid or cancelled, a payment failed) under a prepared statement, whose
// plan may be the generic one: it must fail exactly the pending payments
// of its selection (several keys narrow it) and, generic plan or not, find
// them through an index, not by reading every pending payment.
func TestFailPendingPaymentsFailsItsSelectionThroughAnIndexUnderAGenericPlan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	// Thousands of other pending payments, each of an order of its own.
	_, err := b.pool.Exec(ctx, `
		WITH o AS (
			INSERT INTO orders (customer_id, total_amount, currency)
			SELECT $1, 1.00, 'CNY' FROM generate_series(1, 3000)
			RETURNING id)
		INSERT INTO payments (order_id, customer_id, method, gateway_interface_id, amount, currency)
		SELECT id, $1, 'gateway', $2, 1.00, 'CNY' FROM o`, b.otherID, b.gatewayA)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `ANALYZE payments`)
	require.NoError(t, err)

	// The order's own pending payments on both interfaces, and its
	// invoice's.
	insert := func(gw uuid.UUID, invoice *uuid.UUID) uuid.UUID {
		p := b.pendingPayment()
		p.GatewayInterfaceID, p.InvoiceID = &gw, invoice
		ins, err := b.q.InsertPayment(ctx, p)
		require.NoError(t, err)
		return ins.ID
	}
	ownA, ownB, ofInvoice := insert(b.gatewayA, nil), insert(b.gatewayB, nil), insert(b.gatewayA, &b.invoiceID)

	var last pgx.TraceQueryStartData
	cfg := b.pool.Config().ConnConfig.Copy()
	cfg.Tracer = tracerFunc(func(d pgx.TraceQueryStartData) { last = d })
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)

	for _, c := range []struct {
		name string
		of   store.PendingOf
		want []uuid.UUID
	}{
		{"a payment", store.PendingOf{ID: &ownB}, []uuid.UUID{ownB}},
		{"an order's own", store.PendingOf{OrderID: &b.orderID, OrderOnly: true}, []uuid.UUID{ownA, ownB}},
		{"an order's with its invoices'", store.PendingOf{OrderID: &b.orderID}, []uuid.UUID{ownA, ownB, ofInvoice}},
		{"an invoice's", store.PendingOf{InvoiceID: &b.invoiceID}, []uuid.UUID{ofInvoice}},
		{"an order's of the invoice", store.PendingOf{OrderID: &b.orderID, InvoiceID: &b.invoiceID}, []uuid.UUID{ofInvoice}},
		{"a payment not of the invoice", store.PendingOf{ID: &ownA, InvoiceID: &b.invoiceID}, nil},
		{"an invoice's payment, order only", store.PendingOf{ID: &ofInvoice, OrderID: &b.orderID, OrderOnly: true}, nil},
	} {
		tx, err := conn.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`)
		require.NoError(t, err)
		failed, err := store.FailPendingPayments(ctx, tx, c.of, "test", at)
		require.NoError(t, err, c.name)
		got := make([]uuid.UUID, 0, len(failed))
		for _, p := range failed {
			require.Equal(t, "failed", p.Status, c.name)
			got = append(got, p.ID)
		}
		require.ElementsMatch(t, c.want, got, c.name)
		// EXPLAIN of the statement with parameters would plan for their
		// values; EXPLAIN EXECUTE of it prepared gets the generic plan (the
		// arguments written into the text: EXECUTE takes no parameters).
		q := last
		_, err = tx.Exec(ctx, "PREPARE fail_pending AS "+q.SQL)
		require.NoError(t, err)
		plan := requireIndexedLookup(t, conn, pgx.TraceQueryStartData{
			SQL:  "EXECUTE fail_pending($1, $2, $3, $4, $5, $6)",
			Args: append([]any{pgx.QueryExecModeSimpleProtocol}, q.Args...),
		}, c.name)
		require.Contains(t, plan, "$3", "%s: not the generic plan:\n%s", c.name, plan)
		require.NoError(t, tx.Rollback(ctx))
		_, err = conn.Exec(ctx, "DEALLOCATE fail_pending")
		require.NoError(t, err)
	}
}

// requireIndexedLookup fails unless the statement q, run again under
// EXPLAIN ANALYZE, looks at a handful of rows: the other payments of the
// table (the test made thousands) must not be read and filtered out. It
// returns the plan.
func requireIndexedLookup(t *testing.T, conn *pgx.Conn, q pgx.TraceQueryStartData, name string) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "EXPLAIN ANALYZE "+q.SQL, q.Args...)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	plan := strings.Join(lines, "\n")
	removed := 0
	for _, m := range regexp.MustCompile(`Rows Removed by [A-Za-z ]+: (\d+)`).FindAllStringSubmatch(plan, -1) {
		n, _ := strconv.Atoi(m[1])
		removed += n
	}
	require.LessOrEqual(t, removed, 5, "%s: the lookup reads the other payments:\n%s", name, plan)
	return plan
}

type tracerFunc func(pgx.TraceQueryStartData)

func (f tracerFunc) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	f(d)
	return ctx
}

func (tracerFunc) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
