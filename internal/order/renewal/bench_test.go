package renewal_test

import (
	"context"
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
		require.NoError(b, harness.SeedDueServices(context.Background(), bb.pool, n, end))
		pm := harness.PostmasterOf(context.Background(), bb.pool)
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
