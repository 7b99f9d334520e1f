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
		got, err := store.GetPendingGatewayPayment(ctx, conn, c.o, c.i, c.gw)
		requireIndexedLookup(t, conn, last, c.name)
		if c.absent {
			require.ErrorIs(t, err, store.ErrNotFound, c.name)
			continue
		}
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, got.ID, c.name)
	}
}

// requireIndexedLookup fails unless the statement q, run again under
// EXPLAIN ANALYZE, looks at a handful of rows: the other payments of the
// table (the test made thousands) must not be read and filtered out.
func requireIndexedLookup(t *testing.T, conn *pgx.Conn, q pgx.TraceQueryStartData, name string) {
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
}

type tracerFunc func(pgx.TraceQueryStartData)

func (f tracerFunc) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	f(d)
	return ctx
}

func (tracerFunc) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
