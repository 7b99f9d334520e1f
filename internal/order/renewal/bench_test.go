package renewal_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/bench/harness"
	"github.com/rustbill/paymentd/internal/order/renewal"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// seedDue makes n monthly services of n customers, all with a paid period
// ending at end; the even ones' customers have a balance that covers the
// renewal (credited through the ledger).
func seedDue(t testing.TB, b *bundle, n int, end time.Time) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), `
WITH c AS (
    INSERT INTO customers (email, password_hash, currency, balance)
    SELECT 'bench' || i || '-' || gen_random_uuid() || '@example.com', 'x', 'CNY', CASE WHEN i % 2 = 0 THEN 25.00 ELSE 0 END
    FROM generate_series(1, $1) AS i
    RETURNING id, balance
), bt AS (
    INSERT INTO balance_transactions (customer_id, type, amount, balance_before, balance_after, description)
    SELECT id, 'manual_adjust', balance, 0, balance, 'seed' FROM c WHERE balance > 0
), o AS (
    INSERT INTO orders (customer_id, total_amount, currency, status, billing_cycle, renewal_price, description, paid_until)
    SELECT id, 0, 'CNY', 'active', 'monthly', 10.00, 'VPS', $2 FROM c
    RETURNING id, paid_until
)
INSERT INTO service_periods (order_id, seq, starts_at, ends_at, anchor_at, anchor_months, status, paid_at)
SELECT id, 1, paid_until - interval '1 month', paid_until, paid_until - interval '1 month', 1, 'paid', paid_until - interval '1 month'
FROM o`, n, end)
	require.NoError(t, err)
	_, err = b.pool.Exec(context.Background(), `ANALYZE customers; ANALYZE orders; ANALYZE service_periods; ANALYZE invoices`)
	require.NoError(t, err)
}

// postmaster is the PostgreSQL server's main process when it runs on this
// machine (its backends are its children), else 0.
func postmaster(t testing.TB, b *bundle) int {
	var backend int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&backend))
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(backend) + "/stat")
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces, so read after ')'.
	s := string(raw)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == ')' {
			var state string
			var ppid int
			if _, err := fmt.Sscan(s[i+2:], &state, &ppid); err == nil {
				return ppid
			}
			break
		}
	}
	return 0
}

// BenchmarkBillingRun is one billing pass over services due the same day
// (PAYMENTD_BENCH_RENEWALS, default 10,000; the figures of
// docs/performance.md are for 100,000): each gets its renewal invoice, and
// half are paid from the balance. It reports services per second and the
// PostgreSQL CPU per service when the server runs on this machine.
func BenchmarkBillingRun(b *testing.B) {
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("PAYMENTD_BENCH_RENEWALS")); err == nil && v > 0 {
		n = v
	}
	end := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	for range b.N {
		b.StopTimer()
		bb := &bundle{pool: testdb.Pool(b), clock: testkit.NewClockAt(end.Add(-24 * time.Hour))}
		seedDue(b, bb, n, end)
		pm := postmaster(b, bb)
		run := renewal.New(bb.pool, renewal.Options{Node: "bench", InvoiceDays: 7, AutoApplyBalance: true, Clock: bb.clock.Now, BatchSize: 100})
		pgBefore := harness.TreeCPU(pm)
		selfBefore := harness.SelfCPU()
		b.StartTimer()
		began := time.Now()
		r, err := run.RunOnce(context.Background())
		took := time.Since(began)
		b.StopTimer()
		require.NoError(b, err)
		require.Equal(b, n, r.Issued)
		require.Equal(b, n/2, r.AutoPaid)
		b.ReportMetric(float64(n)/took.Seconds(), "services/s")
		b.ReportMetric(float64(harness.SelfCPU()-selfBefore)/float64(time.Microsecond)/float64(n), "paymentd-cpu-µs/service")
		if pm != 0 {
			b.ReportMetric(float64(harness.TreeCPU(pm)-pgBefore)/float64(time.Microsecond)/float64(n), "postgres-cpu-µs/service")
		}
		b.Logf("%d services: %s, %.0f services/s (issued %d, paid from the balance %d)", n, took.Round(time.Millisecond), float64(n)/took.Seconds(), r.Issued, r.AutoPaid)
	}
}
