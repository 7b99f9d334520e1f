package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
)

// insertPayments adds n payments of its own order each: status, currency,
// amount (refunded in full for status refunded, partly as refunded for
// success), created at.
func (b *bundle) insertPayments(t *testing.T, n int, status, currency, amount, refunded string, at time.Time) {
	t.Helper()
	if status == "refunded" {
		refunded = amount
	}
	paid := "NULL"
	if status == "success" || status == "refunded" {
		paid = "$5"
	}
	_, err := b.pool.Exec(context.Background(), `
		WITH o AS (
			INSERT INTO orders (customer_id, total_amount, currency)
			SELECT $1, $3::numeric, $2 FROM generate_series(1, $7::int)
			RETURNING id)
		INSERT INTO payments (order_id, customer_id, method, gateway_interface_id, amount, refunded_amount, currency,
		                      status, paid_at, failed_at, created_at, updated_at)
		SELECT id, $1, 'gateway', $6, $3::numeric, $4::numeric, $2, $8, `+paid+`, CASE WHEN $8 = 'failed' THEN $5::timestamptz END, $5, $5 FROM o`,
		b.otherID, currency, amount, refunded, at, b.gatewayA, n, status)
	require.NoError(t, err)
}

// The dashboard's figures come from two statements that read the window's
// payments and the pending ones through indexes, however many payments
// are older: thousands of old ones are never read.
func TestPaymentStatsGroupTheWindowAndCountPendingThroughIndexes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	since := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)

	// Before the window: thousands of settled payments and a pending one,
	// which counts as pending now but not in the window.
	b.insertPayments(t, 3000, "success", "CNY", "10.00", "0", since.Add(-36*time.Hour))
	b.insertPayments(t, 1, "pending", "CNY", "10.00", "0", since.Add(-time.Microsecond))
	// In the window.
	b.insertPayments(t, 3, "success", "CNY", "12.30", "0", since)
	b.insertPayments(t, 1, "success", "CNY", "20.00", "5.50", since.Add(time.Hour))
	b.insertPayments(t, 2, "refunded", "CNY", "7.00", "", since.Add(2*time.Hour))
	b.insertPayments(t, 2, "success", "USD", "9999999999.99", "0", since.Add(3*time.Hour))
	b.insertPayments(t, 4, "failed", "CNY", "1.00", "0", since.Add(4*time.Hour))
	b.insertPayments(t, 5, "pending", "USD", "3.00", "0", since.Add(5*time.Hour))
	_, err := b.pool.Exec(ctx, `ANALYZE payments`)
	require.NoError(t, err)

	var last pgx.TraceQueryStartData
	cfg := b.pool.Config().ConnConfig.Copy()
	cfg.Tracer = tracerFunc(func(d pgx.TraceQueryStartData) { last = d })
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)

	groups, err := store.PaymentStatsSince(ctx, conn, since)
	require.NoError(t, err)
	q := last
	requireIndexedLookup(t, conn, q, "PaymentStatsSince")
	require.NotContains(t, explain(t, conn, q), "Seq Scan")
	require.Equal(t, []store.PaymentStatsGroup{
		{Status: "failed", Currency: "CNY", Payments: 4, AmountCents: 400},
		{Status: "pending", Currency: "USD", Payments: 5, AmountCents: 1500},
		{Status: "refunded", Currency: "CNY", Payments: 2, AmountCents: 1400, RefundedCents: 1400},
		{Status: "success", Currency: "CNY", Payments: 4, AmountCents: 3*1230 + 2000, RefundedCents: 550},
		// Beyond NUMERIC(12,2), exact in cents.
		{Status: "success", Currency: "USD", Payments: 2, AmountCents: 2 * 999_999_999_999},
	}, groups)

	pending, err := store.Q(conn).CountPendingPayments(ctx)
	require.NoError(t, err)
	q = last
	requireIndexedLookup(t, conn, q, "CountPendingPayments")
	require.NotContains(t, explain(t, conn, q), "Seq Scan")
	require.EqualValues(t, 6, pending)

	// A window with nothing in it.
	groups, err = store.PaymentStatsSince(ctx, conn, since.Add(24*time.Hour))
	require.NoError(t, err)
	require.Empty(t, groups)
}

func explain(t *testing.T, conn *pgx.Conn, q pgx.TraceQueryStartData) string {
	t.Helper()
	rows, err := conn.Query(context.Background(), "EXPLAIN "+q.SQL, q.Args...)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// The dashboard's pending refunds (how many, the oldest) come from one
// statement that reads the pending range of refunds_status_created_at_idx
// alone: however many refunds were ever made, only the pending ones are
// read.
func TestPendingRefundSummaryCountsThePendingRefundsThroughTheirIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var last pgx.TraceQueryStartData
	cfg := b.pool.Config().ConnConfig.Copy()
	cfg.Tracer = tracerFunc(func(d pgx.TraceQueryStartData) { last = d })
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)

	// None pending: zero and no oldest.
	got, err := store.PendingRefundSummary(ctx, conn)
	require.NoError(t, err)
	require.Equal(t, store.PendingRefunds{}, got)

	// One payment with thousands of finished refunds, older and newer than
	// the pending ones, and three pending refunds.
	b.insertPayments(t, 1, "success", "CNY", "9999999999.00", "0", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	var paymentID string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT id FROM payments`).Scan(&paymentID))
	refunds := func(n int, status string, at time.Time) {
		t.Helper()
		_, err := b.pool.Exec(ctx, `INSERT INTO refunds (payment_id, amount, status, created_at, updated_at)
			SELECT $1, 1.00, $2, $3::timestamptz + i * interval '1 second', $3 FROM generate_series(0, $4::int - 1) AS i`,
			paymentID, status, at, n)
		require.NoError(t, err)
	}
	oldest := time.Date(2026, 5, 2, 8, 30, 0, 123456000, time.UTC)
	refunds(2000, "succeeded", oldest.Add(-48*time.Hour))
	refunds(1000, "failed", oldest.Add(-time.Hour))
	refunds(3, "pending", oldest)
	refunds(1000, "succeeded", oldest.Add(time.Hour))
	_, err = b.pool.Exec(ctx, `VACUUM ANALYZE refunds`)
	require.NoError(t, err)

	got, err = store.PendingRefundSummary(ctx, conn)
	require.NoError(t, err)
	q := last
	require.EqualValues(t, 3, got.Count)
	require.NotNil(t, got.Oldest)
	require.True(t, oldest.Equal(*got.Oldest), "oldest %s, want %s", got.Oldest, oldest)
	plan := explain(t, conn, q)
	require.Contains(t, plan, "refunds_status_created_at_idx", plan)
	require.NotContains(t, plan, "Seq Scan", plan)
	requireIndexedLookup(t, conn, q, "PendingRefundSummary")

	// The oldest resolved: the next one is the oldest.
	_, err = b.pool.Exec(ctx, `UPDATE refunds SET status = 'succeeded' WHERE status = 'pending' AND created_at = $1`, oldest)
	require.NoError(t, err)
	got, err = store.PendingRefundSummary(ctx, conn)
	require.NoError(t, err)
	require.EqualValues(t, 2, got.Count)
	require.True(t, oldest.Add(time.Second).Equal(*got.Oldest), "oldest %s", got.Oldest)
}
