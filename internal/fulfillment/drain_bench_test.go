package fulfillment_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/fulfillment"
)

// BenchmarkDrainPaidOrders measures the worker's drain of a backlog of
// paid orders (order_paid through http_provider and the fake provider,
// then order_provisioned, no notification channel: the bench's setup) at
// several [events].batch_size, concurrency max(16, batch). orders/s is
// the drain rate from the backlog's commit to the last order active;
// pg-us/order is the CPU the PostgreSQL backends serving the test's
// database used meanwhile (read from /proc: the server must run on this
// machine), per order. A backlog of 400 orders per run unless
// PAYMENTD_DRAIN_ORDERS says otherwise.
//
//	go test -run '^$' -bench DrainPaidOrders -benchtime 1x -count 3 ./internal/fulfillment/
func BenchmarkDrainPaidOrders(b *testing.B) {
	n := 400
	if v, err := strconv.Atoi(os.Getenv("PAYMENTD_DRAIN_ORDERS")); err == nil && v > 0 {
		n = v
	}
	for _, batch := range []int{1, 8, 32, 128} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			var rate, cpu float64
			runs := 0
			for range b.N {
				r, c := drainOnce(b, n, batch)
				rate, cpu, runs = rate+r, cpu+c, runs+1
			}
			b.ReportMetric(rate/float64(runs), "orders/s")
			b.ReportMetric(cpu/float64(runs), "pg-us/order")
		})
	}
}

func drainOnce(b *testing.B, n, batch int) (rate, pgMicrosPerOrder float64) {
	b.StopTimer()
	r := setup(b, rigOptions{
		batchSize: batch, concurrency: max(16, batch), maxAttempts: 8,
		wrapNotify: func(n fulfillment.Notifier) fulfillment.Notifier { return silentNotifier{n} },
	})
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = r.order(b, &r.product, time.Time{})
	}
	ctx := context.Background()
	var db string
	require.NoError(b, r.pool.QueryRow(ctx, `SELECT current_database()`).Scan(&db))
	before := backendCPU(b, r, db)
	b.StartTimer()
	r.payAll(b, ids)
	t0 := time.Now()
	for {
		var active int
		require.NoError(b, r.pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE status = 'active'`).Scan(&active))
		var queued bool
		require.NoError(b, r.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM events WHERE status IN ('pending', 'processing'))`).Scan(&queued))
		if active == n && !queued {
			break
		}
		require.Less(b, time.Since(t0), 5*time.Minute, "the backlog did not drain")
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(t0)
	b.StopTimer()
	after := backendCPU(b, r, db)
	var failed int
	require.NoError(b, r.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE status = 'failed'`).Scan(&failed))
	require.Zero(b, failed)
	var used time.Duration
	for pid, t := range after {
		used += t - before[pid] // a backend that left meanwhile is not counted
	}
	return float64(n) / elapsed.Seconds(), float64(used.Microseconds()) / float64(n)
}

// backendCPU is the CPU time (user + system) of each backend connected to
// database db, by pid, read from /proc.
func backendCPU(b *testing.B, r *bundle, db string) map[int]time.Duration {
	rows, err := r.pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE datname = $1`, db)
	require.NoError(b, err)
	var pids []int
	for rows.Next() {
		var pid int
		require.NoError(b, rows.Scan(&pid))
		pids = append(pids, pid)
	}
	require.NoError(b, rows.Err())
	out := map[int]time.Duration{}
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		out[pid] = time.Duration(utime+stime) * time.Second / 100 // USER_HZ
	}
	return out
}
