package order_test

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/bench/harness"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/order/renewal"
	"github.com/rustbill/paymentd/internal/ordertest"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// BenchmarkPlanChangeAgainstRenewal measures an upgrade now against a
// renewal, on the same orders in one database (issue 38: "a plan change
// costs no more than a renewal in PostgreSQL CPU"). n monthly services
// (PAYMENTD_BENCH_PLAN_CHANGES, default 2,000) at 10.00, each customer
// with 100.00 of balance, move on day 10 to a 30.00 plan, one
// ChangeOrderPlan each: the proration invoice issued, paid from the
// balance at once and the order moved, as a customer's call does. Then one
// billing pass renews them: the invoice issued and paid from the balance.
// It reports PostgreSQL CPU per plan change and per renewal, read from
// the database's own backends (/proc of each backend of this benchmark's
// database), so other work on the server does not count.
func BenchmarkPlanChangeAgainstRenewal(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("PAYMENTD_BENCH_PLAN_CHANGES")); err == nil && v > 0 {
		n = v
	}
	start := time.Date(2027, time.February, 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(0, 1, 0)
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		pool := testdb.Pool(b)
		ob := ordertest.SetupWithPool(b, pool)
		clock := testkit.NewClockAt(start.Add(9 * 24 * time.Hour))
		svc := order.NewService(pool, ordertest.Currencies, nil, clock.Now, slog.New(slog.DiscardHandler)).
			WithBillingClock(clock.Now).WithPlanChanges(7, order.CreditBalance)
		small, big := ob.Product(b, "10.00", "CNY"), ob.Product(b, "30.00", "CNY")
		for _, p := range []uuid.UUID{small.ID, big.ID} {
			_, err := pool.Exec(ctx, `UPDATE products SET billing_cycle = 'monthly' WHERE id = $1`, p)
			require.NoError(b, err)
		}
		ids := seedPlanServices(b, pool, n, small.ID, start, end)
		cpu := backendCPU(b, pool)

		b.StartTimer()
		began := time.Now()
		for _, id := range ids {
			res, err := svc.ChangeOrderPlan(ob.AsAdmin, id, big.ID, store.PlanChangeNow)
			require.NoError(b, err)
			require.Equal(b, big.ID, *res.Order.ProductID, "paid from the balance at once, the order moved")
		}
		changes := time.Since(began)
		b.StopTimer()
		perChange := cpu() / time.Duration(n)

		clock.Set(end.Add(-24 * time.Hour))
		run := renewal.New(pool, renewal.Options{Node: "bench", InvoiceDays: 7, AutoApplyBalance: true, Clock: clock.Now, BatchSize: 100})
		began = time.Now()
		r, err := run.RunOnce(ctx)
		renewals := time.Since(began)
		require.NoError(b, err)
		require.Equal(b, n, r.Issued)
		require.Equal(b, n, r.AutoPaid, "100.00 − the proration covers 30.00")
		perRenewal := cpu() / time.Duration(n)

		b.ReportMetric(float64(n)/changes.Seconds(), "changes/s")
		b.ReportMetric(float64(perChange.Microseconds()), "postgres-cpu-µs/change")
		b.ReportMetric(float64(perRenewal.Microseconds()), "postgres-cpu-µs/renewal")
		b.ReportMetric(float64(perChange)/float64(perRenewal), "change/renewal")
		b.Logf("%d plan changes in %s (%.0f/s), PostgreSQL %s each; %d renewals in %s, PostgreSQL %s each: a change costs %.2f renewals",
			n, changes.Round(time.Millisecond), float64(n)/changes.Seconds(), perChange, n, renewals.Round(time.Millisecond), perRenewal,
			float64(perChange)/float64(perRenewal))
	}
}

// seedPlanServices makes n active monthly orders of product at 10.00, each
// of its own customer with 100.00 of balance, paid from start to end.
func seedPlanServices(b testing.TB, pool *pgxpool.Pool, n int, product uuid.UUID, start, end time.Time) []uuid.UUID {
	b.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `
WITH c AS (
    INSERT INTO customers (email, password_hash, currency, balance)
    SELECT 'plan' || i || '-' || gen_random_uuid() || '@example.com', 'x', 'CNY', 100.00
    FROM generate_series(1, $1) AS i
    RETURNING id, balance
), bt AS (
    INSERT INTO balance_transactions (customer_id, type, amount, balance_before, balance_after, description)
    SELECT id, 'manual_adjust', balance, 0, balance, 'seed' FROM c
), o AS (
    INSERT INTO orders (customer_id, product_id, total_amount, currency, status, billing_cycle, renewal_price, description, paid_until)
    SELECT id, $2, 10.00, 'CNY', 'active', 'monthly', 10.00, 'VPS', $4 FROM c
    RETURNING id
), p AS (
    INSERT INTO service_periods (order_id, seq, starts_at, ends_at, anchor_at, anchor_months, status, paid_at)
    SELECT id, 1, $3, $4, $3, 1, 'paid', $3 FROM o
)
SELECT id FROM o`, n, product, start, end)
	require.NoError(b, err)
	ids := make([]uuid.UUID, 0, n)
	for rows.Next() {
		var id uuid.UUID
		require.NoError(b, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(b, rows.Err())
	_, err = pool.Exec(ctx, `ANALYZE customers; ANALYZE orders; ANALYZE service_periods; ANALYZE invoices; ANALYZE plan_changes`)
	require.NoError(b, err)
	return ids
}

// backendCPU returns a function that answers the CPU the backends of the
// pool's database spent since its last call (the first: since now). A
// backend that appears in between counts from zero; the pool keeps its
// connections, so none leaves uncounted.
func backendCPU(b *testing.B, pool *pgxpool.Pool) func() time.Duration {
	b.Helper()
	read := func() map[int]time.Duration {
		rows, err := pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
		require.NoError(b, err)
		out := map[int]time.Duration{}
		for rows.Next() {
			var pid int
			require.NoError(b, rows.Scan(&pid))
			out[pid] = harness.ProcCPU(pid)
		}
		require.NoError(b, rows.Err())
		return out
	}
	last := read()
	return func() time.Duration {
		now := read()
		var spent time.Duration
		for pid, c := range now {
			spent += c - last[pid]
		}
		last = now
		return spent
	}
}
