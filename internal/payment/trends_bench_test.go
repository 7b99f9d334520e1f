package payment_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// trendSeedEnd is the instant the seeded days end at: the payments are
// created in the trendSeedDays days before it.
var trendSeedEnd = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// trendSeedDays is how many days the seeded payments are spread over: the
// 90 of the dashboard's longest switch, so that its range holds them all.
const trendSeedDays = 90

// seedTrendPayments writes n payments (each with its order) created over
// the trendSeedDays days before trendSeedEnd, about 11,100 a day at n =
// 1,000,000, on
// three gateway interfaces, 70 % CNY and 30 % USD: 76 % succeeded (paid
// within ten minutes), 4 % refunded in full (with the succeeded refund
// row), 12 % failed half an hour later, 8 % pending. Rows are written in
// creation order, as a live table is appended to.
func seedTrendPayments(b *testing.B, n int) *pgxpool.Pool {
	b.Helper()
	ctx := context.Background()
	pool := testdb.Pool(b)
	customer := testfixture.Customer(b, pool)
	gws := []uuid.UUID{
		testfixture.GatewayInterface(b, pool, "epay"),
		testfixture.GatewayInterface(b, pool, "epay"),
		testfixture.GatewayInterface(b, pool, "epay"),
	}
	start := time.Now()
	_, err := pool.Exec(ctx, `
		INSERT INTO orders (id, customer_id, total_amount, currency, created_at, updated_at)
		SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, $2,
		       12.30 + (g % 7), CASE WHEN g % 10 < 7 THEN 'CNY' ELSE 'USD' END,
		       $3::timestamptz - ((g::bigint * 7919) % ($4::int * 86400)) * interval '1 second',
		       $3::timestamptz - ((g::bigint * 7919) % ($4::int * 86400)) * interval '1 second'
		FROM generate_series(1, $1::int) g
		ORDER BY 5`, n, customer, trendSeedEnd, trendSeedDays)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO payments (id, order_id, customer_id, method, gateway_interface_id, amount, refunded_amount, currency, status,
		                      paid_at, failed_at, created_at, updated_at)
		SELECT o.id, o.id, o.customer_id, 'gateway', ($2::uuid[])[1 + g % 3], o.total_amount,
		       CASE WHEN g % 100 < 4 THEN o.total_amount ELSE 0 END, o.currency,
		       CASE WHEN g % 100 < 4 THEN 'refunded' WHEN g % 100 < 80 THEN 'success' WHEN g % 100 < 92 THEN 'failed' ELSE 'pending' END,
		       CASE WHEN g % 100 < 80 THEN o.created_at + (g % 600) * interval '1 second' END,
		       CASE WHEN g % 100 >= 80 AND g % 100 < 92 THEN o.created_at + interval '30 minutes' END,
		       o.created_at, o.created_at
		FROM generate_series(1, $1::int) g
		JOIN orders o ON o.id = ('00000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid
		ORDER BY o.created_at`, n, gws)
	require.NoError(b, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO refunds (payment_id, amount, status, created_at, updated_at)
		SELECT id, amount, 'succeeded', paid_at + interval '1 day', paid_at + interval '1 day'
		FROM payments WHERE status = 'refunded' ORDER BY paid_at`)
	require.NoError(b, err)
	seeded := time.Now()
	// What paymentd's periodic fold does every two seconds, at once.
	moved, err := store.Q(pool).FoldPaymentTrends(ctx)
	require.NoError(b, err)
	b.Logf("seeded %d payments in %s (triggers included), folded %d trend changes in %s", n,
		seeded.Sub(start).Round(time.Second), moved, time.Since(seeded).Round(time.Millisecond))
	if os.Getenv("PAYMENTD_TRENDS_REBUILD") != "" {
		// What an operator's payment_trends_rebuild() costs (docs/operations.md).
		began := time.Now()
		_, err = pool.Exec(ctx, `SELECT payment_trends_rebuild()`)
		require.NoError(b, err)
		b.Logf("payment_trends_rebuild() over %d payments took %s", n, time.Since(began).Round(time.Millisecond))
	}
	// What autovacuum leaves behind on a table that is appended to: the
	// visibility map set, so index-only scans need not visit the rows.
	_, err = pool.Exec(ctx, `VACUUM ANALYZE`)
	require.NoError(b, err)
	return pool
}

// BenchmarkPaymentTrends times GetPaymentTrends' work (the three queries in
// their snapshot transaction) over a million payments created in 90 days:
// the dashboard's 7, 30 and 90-day switches (the last holds all of them)
// and the longest range allowed (366 days). ms/op is the figure
// docs/performance.md quotes. Seeding takes a few minutes:
//
//	go test -run '^$' -bench PaymentTrends -benchtime 10x ./internal/payment/
//
// PAYMENTD_TRENDS_EXPLAIN=1 logs the plans (EXPLAIN ANALYZE of the
// prepared statements the store ran) after the 90-day case;
// PAYMENTD_TRENDS_REBUILD=1 times payment_trends_rebuild() after the seed
// (run with -v to see both).
func BenchmarkPaymentTrends(b *testing.B) {
	n := 1_000_000
	pool := seedTrendPayments(b, n)
	svc := payment.NewService(pool, slog.New(slog.DiscardHandler))
	admin := auth.WithPrincipal(context.Background(), auth.Principal{Role: auth.RoleAdmin, ID: uuid.New(), Kind: auth.KindSession})
	last := trendSeedEnd.AddDate(0, 0, -1).Format("2006-01-02")
	for _, tc := range []struct {
		name string
		from string
	}{
		{"7-days", trendSeedEnd.AddDate(0, 0, -7).Format("2006-01-02")},
		{"30-days", trendSeedEnd.AddDate(0, 0, -30).Format("2006-01-02")},
		{"90-days", trendSeedEnd.AddDate(0, 0, -90).Format("2006-01-02")},
		{"366-days", trendSeedEnd.AddDate(0, 0, -366).Format("2006-01-02")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			q := payment.TrendQuery{From: tc.from, To: last, Zone: "Asia/Shanghai"}
			var tr payment.Trends
			for b.Loop() {
				var err error
				tr, err = svc.PaymentTrends(admin, q)
				require.NoError(b, err)
			}
			var created int64
			for _, c := range tr.Currencies {
				for _, d := range c.Days {
					created += d.Created
				}
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
			b.ReportMetric(float64(created), "payments-in-range")
		})
	}
	if os.Getenv("PAYMENTD_TRENDS_EXPLAIN") != "" {
		explainTrends(b, pool, trendSeedEnd.AddDate(0, 0, -90).Format("2006-01-02"), last)
	}
}

// explainTrends runs the trend queries on one connection and logs EXPLAIN
// (ANALYZE, BUFFERS) of each statement pgx prepared there: the plans of
// exactly the generated SQL.
func explainTrends(b *testing.B, pool *pgxpool.Pool, from, to string) {
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(b, err)
	defer conn.Release()
	first, err := time.Parse("2006-01-02", from)
	require.NoError(b, err)
	last, err := time.Parse("2006-01-02", to)
	require.NoError(b, err)
	_, err = store.PaymentTrendsIn(ctx, conn, store.TrendRange{Zone: "Asia/Shanghai", FirstDay: first, LastDay: last})
	require.NoError(b, err)
	rows, err := conn.Query(ctx, `SELECT name, statement FROM pg_prepared_statements WHERE statement LIKE '-- name: PaymentTrend%'`)
	require.NoError(b, err)
	type stmt struct{ name, text string }
	var stmts []stmt
	for rows.Next() {
		var s stmt
		require.NoError(b, rows.Scan(&s.name, &s.text))
		stmts = append(stmts, s)
	}
	require.NoError(b, rows.Err())
	require.Len(b, stmts, 3)
	for _, s := range stmts {
		// from and to are dates this file formatted: safe as literals
		// (EXECUTE takes no bind parameters).
		plan, err := conn.Query(ctx, `EXPLAIN (ANALYZE, BUFFERS) EXECUTE `+pgx.Identifier{s.name}.Sanitize()+
			`('Asia/Shanghai', '`+from+`'::date, '`+to+`'::date)`)
		require.NoError(b, err)
		var lines []string
		for plan.Next() {
			var line string
			require.NoError(b, plan.Scan(&line))
			lines = append(lines, line)
		}
		require.NoError(b, plan.Err())
		b.Logf("%s\n%s", strings.SplitN(s.text, "\n", 2)[0], strings.Join(lines, "\n"))
	}
}
