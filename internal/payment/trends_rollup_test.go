package payment_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// rollupWorldStart is where the property test's payments live: ten days no
// other test of the package writes in.
var rollupWorldStart = time.Date(2031, 3, 1, 0, 0, 0, 0, time.UTC)

// trendZones are zones whose days cut UTC quarter hours differently: whole
// hours, half and three quarters of an hour, summer time (New York's and
// Lord Howe's, which moves by half an hour).
var trendZones = []string{"UTC", "Asia/Shanghai", "America/New_York", "Asia/Kolkata", "Asia/Kathmandu", "Australia/Lord_Howe"}

// GetPaymentTrends reads a rollup kept by triggers and folded now and then;
// what it answers must be what the payments and refunds themselves say,
// after any sequence of writes (creations, successes, failures, refunds
// partial and full, captured money returned, corrections by hand of a
// payment's creation time, status and currency, a refund recorded by hand
// while its payment was pending), folded or not, rebuilt or not, in any
// zone and range. Two checks after each sequence:
//   - the rollup the triggers kept (the callback's fast path included) is,
//     key by key over every quarter, the one payment_trends_rebuild()
//     recomputes from the rows with the figures' definitions
//     (payment_currency_trends and the others): rollupAgreesWithARebuild;
//   - the answer for one random range and zone is what an oracle reads
//     from the rows directly, cutting days per row with AT TIME ZONE; its
//     median is percentile_cont over each time counted as its histogram
//     bin, and the exact median of the raw times must be within the bins'
//     stated precision of it (0.5 s + 1.1 %).
func TestPaymentTrendsFromTheRollupAreWhatThePaymentsSay(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	ctx := context.Background()
	svc := payment.NewService(pool, slog.New(slog.DiscardHandler))
	admin := auth.WithPrincipal(ctx, auth.Principal{Role: auth.RoleAdmin, ID: uuid.New(), Kind: auth.KindSession})
	customer := testfixture.Customer(t, pool)
	gateways := []uuid.UUID{testfixture.GatewayInterface(t, pool, "epay"), testfixture.GatewayInterface(t, pool, "epay")}
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	var pending, paid, failed []uuid.UUID
	instant := func(rt *rapid.T, label string) time.Time {
		return rollupWorldStart.Add(time.Duration(rapid.Int64Range(0, 10*24*3600).Draw(rt, label)) * time.Second)
	}
	took := func(rt *rapid.T) time.Duration {
		// Mostly seconds, sometimes minutes to a day: both sides of the
		// histogram's 127.5 s.
		if rapid.Bool().Draw(rt, "quick") {
			return time.Duration(rapid.Int64Range(0, 200_000).Draw(rt, "ms")) * time.Millisecond
		}
		return time.Duration(rapid.Int64Range(120, 86400).Draw(rt, "s")) * time.Second
	}

	rapid.Check(t, func(rt *rapid.T) {
		for range rapid.IntRange(1, 8).Draw(rt, "writes") {
			switch rapid.IntRange(0, 11).Draw(rt, "write") {
			case 0, 1: // a gateway payment, pending or decided at once
				status := rapid.SampledFrom([]string{"pending", "success", "failed"}).Draw(rt, "status")
				created := instant(rt, "created")
				id := testfixture.InsertPayment(t, pool, testfixture.Payment{
					Customer: customer, Gateway: rapid.SampledFrom(gateways).Draw(rt, "gateway"),
					Amount:   fmt.Sprintf("%d.%02d", rapid.IntRange(1, 500).Draw(rt, "units"), rapid.IntRange(0, 99).Draw(rt, "cents")),
					Currency: rapid.SampledFrom([]string{"CNY", "USD"}).Draw(rt, "currency"), Status: status,
					CreatedAt: created, SettledAt: created.Add(took(rt)),
				})
				switch status {
				case "pending":
					pending = append(pending, id)
				case "success":
					paid = append(paid, id)
				default:
					failed = append(failed, id)
				}
			case 2: // a balance payment (no gateway), paid when made
				created := instant(rt, "created")
				order := testfixture.OrderIn(t, pool, customer, "3.00", "CNY")
				var id uuid.UUID
				require.NoError(t, pool.QueryRow(ctx, `INSERT INTO payments (order_id, customer_id, method, amount, currency, status, paid_at, created_at, updated_at)
					VALUES ($1, $2, 'balance', 3.00, 'CNY', 'success', $3, $3, $3) RETURNING id`, order, customer, created).Scan(&id))
				paid = append(paid, id)
			case 3: // a pending payment succeeds or fails
				if len(pending) == 0 {
					continue
				}
				i := rapid.IntRange(0, len(pending)-1).Draw(rt, "pending")
				id := pending[i]
				pending = append(pending[:i], pending[i+1:]...)
				var created time.Time
				require.NoError(t, pool.QueryRow(ctx, `SELECT created_at FROM payments WHERE id = $1`, id).Scan(&created))
				at := created.Add(took(rt))
				if rapid.Bool().Draw(rt, "succeeds") {
					exec(`UPDATE payments SET status = 'success', paid_at = $2, updated_at = $2 WHERE id = $1`, id, at)
					paid = append(paid, id)
				} else {
					exec(`UPDATE payments SET status = 'failed', failed_at = $2, failure_reason = 'declined', updated_at = $2 WHERE id = $1`, id, at)
					failed = append(failed, id)
				}
			case 4: // a refund of part or all of what a paid payment has left
				if len(paid) == 0 {
					continue
				}
				id := rapid.SampledFrom(paid).Draw(rt, "paid")
				var left int64
				require.NoError(t, pool.QueryRow(ctx, `SELECT ((amount - refunded_amount) * 100)::bigint FROM payments WHERE id = $1`, id).Scan(&left))
				if left == 0 {
					continue
				}
				cents := rapid.Int64Range(1, left).Draw(rt, "refund")
				testfixture.InsertRefund(t, pool, id, fmt.Sprintf("%d.%02d", cents/100, cents%100), instant(rt, "refunded"))
			case 5: // a refund asked for, and completed by the gateway later
				if len(paid) == 0 {
					continue
				}
				id := rapid.SampledFrom(paid).Draw(rt, "paid")
				var refund uuid.UUID
				err := pool.QueryRow(ctx, `WITH p AS (
						UPDATE payments SET refunded_amount = refunded_amount + 0.01,
							status = CASE WHEN refunded_amount + 0.01 = amount THEN 'refunded' ELSE status END
						WHERE id = $1 AND refunded_amount < amount RETURNING id)
					INSERT INTO refunds (payment_id, amount) SELECT id, 0.01 FROM p RETURNING id`, id).Scan(&refund)
				if err != nil {
					continue // nothing left to refund
				}
				exec(`UPDATE refunds SET error = 'gateway busy', updated_at = $2 WHERE id = $1`, refund, instant(rt, "retried"))
				exec(`UPDATE refunds SET status = 'succeeded', updated_at = $2 WHERE id = $1`, refund, instant(rt, "refunded"))
			case 6: // money captured after a payment failed, returned: never received
				if len(failed) == 0 {
					continue
				}
				id := rapid.SampledFrom(failed).Draw(rt, "failed")
				var refund uuid.UUID
				err := pool.QueryRow(ctx, `WITH p AS (
						UPDATE payments SET captured_amount = amount, captured_at = failed_at, refunded_amount = amount
						WHERE id = $1 AND captured_amount = 0 RETURNING id, amount)
					INSERT INTO refunds (payment_id, amount, status) SELECT id, amount, 'succeeded' FROM p RETURNING id`, id).Scan(&refund)
				if err != nil {
					continue // returned already
				}
			case 7: // a correction by hand: a payment's creation time moves
				all := append(append(append([]uuid.UUID{}, pending...), paid...), failed...)
				if len(all) == 0 {
					continue
				}
				exec(`UPDATE payments SET created_at = created_at - $2::interval WHERE id = $1`,
					rapid.SampledFrom(all).Draw(rt, "moved"), fmt.Sprintf("%d minutes", rapid.IntRange(1, 600).Draw(rt, "minutes")))
			case 8: // a correction by hand of a status: a payment paid, or not
				// paid after all, which decides whether its refunds count
				if rapid.Bool().Draw(rt, "unpaid") && len(paid) > 0 {
					i := rapid.IntRange(0, len(paid)-1).Draw(rt, "paid")
					id := paid[i]
					paid = append(paid[:i], paid[i+1:]...)
					// Its money captured and its refunds returning it.
					exec(`UPDATE payments SET status = 'failed', paid_at = NULL, failed_at = $2, failure_reason = 'reversed',
							captured_amount = amount, captured_at = $2
						WHERE id = $1`, id, instant(rt, "reversed"))
					failed = append(failed, id)
				} else if len(failed) > 0 {
					i := rapid.IntRange(0, len(failed)-1).Draw(rt, "failed")
					id := failed[i]
					failed = append(failed[:i], failed[i+1:]...)
					exec(`UPDATE payments SET status = CASE WHEN refunded_amount = amount THEN 'refunded' ELSE 'success' END,
							paid_at = created_at + $2::interval, failed_at = NULL, failure_reason = '', captured_amount = 0, captured_at = NULL
						WHERE id = $1`, id, took(rt).String())
					paid = append(paid, id)
				}
			case 9: // a correction by hand of a currency: the payment was for an order in the other one
				all := append(append(append([]uuid.UUID{}, pending...), paid...), failed...)
				if len(all) == 0 {
					continue
				}
				id := rapid.SampledFrom(all).Draw(rt, "edited")
				var currency string
				require.NoError(t, pool.QueryRow(ctx, `SELECT CASE currency WHEN 'CNY' THEN 'USD' ELSE 'CNY' END FROM payments WHERE id = $1`, id).Scan(&currency))
				exec(`UPDATE payments SET order_id = $2, currency = $3 WHERE id = $1`, id, testfixture.OrderIn(t, pool, customer, "3.00", currency), currency)
			case 10: // a refund recorded by hand while its payment is pending: it counts once the payment is paid
				if len(pending) == 0 {
					continue
				}
				exec(`INSERT INTO refunds (payment_id, amount, status, updated_at) VALUES ($1, 0.01, 'succeeded', $2)`,
					rapid.SampledFrom(pending).Draw(rt, "pending"), instant(rt, "refunded"))
			case 11:
				if rapid.IntRange(0, 9).Draw(rt, "rebuild") == 0 {
					exec(`SELECT payment_trends_rebuild()`)
				} else {
					_, err := store.Q(pool).FoldPaymentTrends(ctx)
					require.NoError(t, err)
				}
			}
		}

		rollupAgreesWithARebuild(rt, pool)

		zone := rapid.SampledFrom(trendZones).Draw(rt, "zone")
		first := rollupWorldStart.AddDate(0, 0, rapid.IntRange(-2, 10).Draw(rt, "first"))
		last := first.AddDate(0, 0, rapid.IntRange(0, 12).Draw(rt, "days"))
		got, err := svc.PaymentTrends(admin, payment.TrendQuery{From: first.Format("2006-01-02"), To: last.Format("2006-01-02"), Zone: zone})
		require.NoError(t, err)
		want := trendOracle(t, pool, zone, first, last)
		require.Equal(rt, want.currencies, rolledUpCurrencies(got), "per currency and day, %s %s..%s", zone, first, last)
		require.Equal(rt, want.gateways, rolledUpGateways(got), "per gateway, %s %s..%s", zone, first, last)
		for _, g := range got.Gateways {
			exact, ok := want.exactMedian[g.ID]
			require.Equal(rt, ok, g.HasMedian, "a median exactly when a payment succeeded")
			require.InDelta(rt, want.binnedMedian[g.ID], g.MedianSecondsToSuccess, 1e-6, "median of the binned times")
			require.LessOrEqual(rt, math.Abs(g.MedianSecondsToSuccess-exact), 0.5+0.011*exact+1e-9,
				"within the bins' precision of the exact median %v", exact)
		}
	})
}

// rollupAgreesWithARebuild checks that the rollup the triggers kept, as a
// reader sums it, is the one payment_trends_rebuild() recomputes from the
// payments and refunds; the rebuild is rolled back.
func rollupAgreesWithARebuild(rt *rapid.T, pool *pgxpool.Pool) {
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(rt, err)
	defer func() { _ = tx.Rollback(ctx) }()
	kept := rollupRows(rt, tx)
	_, err = tx.Exec(ctx, `SELECT payment_trends_rebuild()`)
	require.NoError(rt, err)
	require.Equal(rt, rollupRows(rt, tx), kept, "the rollup kept by the triggers is the one rebuilt from the rows")
}

// rollupRows are the rollup's rows as a reader sums them (the folded rows
// and the changes not folded yet), one string per table and key, the keys
// whose figures are all zero left out.
func rollupRows(rt *rapid.T, tx pgx.Tx) []string {
	rows, err := tx.Query(context.Background(), `
		SELECT format('currency %s %s %s/%s/%s %s %s', quarter, currency, sum(created), sum(succeeded), sum(failed),
		              sum(received_cents), sum(refunded_cents))
		FROM (SELECT * FROM payment_trend_currency_quarters UNION ALL SELECT * FROM payment_trend_currency_changes) r
		GROUP BY quarter, currency
		HAVING sum(created) <> 0 OR sum(succeeded) <> 0 OR sum(failed) <> 0 OR sum(received_cents) <> 0 OR sum(refunded_cents) <> 0
		UNION ALL
		SELECT format('gateway %s %s %s/%s/%s', quarter, gateway_interface_id, sum(created), sum(succeeded), sum(failed))
		FROM (SELECT * FROM payment_trend_gateway_quarters UNION ALL SELECT * FROM payment_trend_gateway_changes) r
		GROUP BY quarter, gateway_interface_id
		HAVING sum(created) <> 0 OR sum(succeeded) <> 0 OR sum(failed) <> 0
		UNION ALL
		SELECT format('seconds %s %s %s %s', quarter, gateway_interface_id, seconds_bin, sum(n))
		FROM (SELECT * FROM payment_trend_seconds_quarters UNION ALL SELECT * FROM payment_trend_seconds_changes) r
		GROUP BY quarter, gateway_interface_id, seconds_bin HAVING sum(n) <> 0
		UNION ALL
		SELECT format('seconds day %s %s %s %s', day, gateway_interface_id, seconds_bin, sum(n))
		FROM (SELECT * FROM payment_trend_seconds_days
		      UNION ALL
		      SELECT (quarter AT TIME ZONE 'UTC')::date, gateway_interface_id, seconds_bin, n FROM payment_trend_seconds_changes) r
		GROUP BY day, gateway_interface_id, seconds_bin HAVING sum(n) <> 0
		ORDER BY 1`)
	require.NoError(rt, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(rt, err)
	return out
}

type oracleTrends struct {
	currencies   []string // "CNY 2031-03-02 created/succeeded/failed received refunded" (cents), days with something
	gateways     []string // "id created/succeeded/failed" and "id day created/succeeded/failed" with something
	binnedMedian map[uuid.UUID]float64
	exactMedian  map[uuid.UUID]float64
}

// trendOracle reads what the payments and refunds say about the local days
// first..last of zone, one row at a time.
func trendOracle(t *testing.T, pool *pgxpool.Pool, zone string, first, last time.Time) oracleTrends {
	t.Helper()
	ctx := context.Background()
	var o oracleTrends
	rows, err := pool.Query(ctx, `
		WITH ev AS (
			SELECT (created_at AT TIME ZONE $1)::date AS day, currency, 1 AS c, 0 AS s, 0 AS f, 0::numeric AS r, 0::numeric AS rf FROM payments
			UNION ALL SELECT (paid_at AT TIME ZONE $1)::date, currency, 0, 1, 0, amount, 0 FROM payments WHERE paid_at IS NOT NULL
			UNION ALL SELECT (failed_at AT TIME ZONE $1)::date, currency, 0, 0, 1, 0, 0 FROM payments WHERE failed_at IS NOT NULL
			UNION ALL SELECT (r.updated_at AT TIME ZONE $1)::date, p.currency, 0, 0, 0, 0, r.amount
			          FROM refunds r JOIN payments p ON p.id = r.payment_id
			          WHERE r.status = 'succeeded' AND p.status IN ('success', 'refunded'))
		SELECT format('%s %s %s/%s/%s %s %s', currency, day, sum(c), sum(s), sum(f), (sum(r) * 100)::bigint, (sum(rf) * 100)::bigint)
		FROM ev WHERE day BETWEEN $2::date AND $3::date GROUP BY currency, day ORDER BY currency, day`, zone, first, last)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		o.currencies = append(o.currencies, s)
	}
	require.NoError(t, rows.Err())

	rows, err = pool.Query(ctx, `
		WITH g AS (
			SELECT gateway_interface_id AS id, (created_at AT TIME ZONE $1)::date AS day, paid_at IS NOT NULL AS ok, failed_at IS NOT NULL AS bad
			FROM payments
			WHERE gateway_interface_id IS NOT NULL AND (created_at AT TIME ZONE $1)::date BETWEEN $2::date AND $3::date)
		SELECT format('%s %s/%s/%s', id, count(*), count(*) FILTER (WHERE ok), count(*) FILTER (WHERE bad)) FROM g GROUP BY id
		UNION ALL
		SELECT format('%s %s %s/%s/%s', id, day, count(*), count(*) FILTER (WHERE ok), count(*) FILTER (WHERE bad)) FROM g GROUP BY id, day
		`, zone, first, last)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		o.gateways = append(o.gateways, s)
	}
	require.NoError(t, rows.Err())
	sort.Strings(o.gateways) // bytes, not the database's collation

	o.binnedMedian, o.exactMedian = map[uuid.UUID]float64{}, map[uuid.UUID]float64{}
	rows, err = pool.Query(ctx, `
		SELECT gateway_interface_id,
		       percentile_cont(0.5) WITHIN GROUP (ORDER BY trend_seconds_value(trend_seconds_bin(extract(epoch FROM paid_at - created_at)::float8))),
		       percentile_cont(0.5) WITHIN GROUP (ORDER BY greatest(extract(epoch FROM paid_at - created_at)::float8, 0))
		FROM payments
		WHERE gateway_interface_id IS NOT NULL AND paid_at IS NOT NULL
		  AND (created_at AT TIME ZONE $1)::date BETWEEN $2::date AND $3::date
		GROUP BY 1`, zone, first, last)
	require.NoError(t, err)
	for rows.Next() {
		var id uuid.UUID
		var binned, exact float64
		require.NoError(t, rows.Scan(&id, &binned, &exact))
		o.binnedMedian[id], o.exactMedian[id] = binned, exact
	}
	require.NoError(t, rows.Err())
	return o
}

// rolledUpCurrencies are the answer's currency days with something in them,
// written as trendOracle writes them.
func rolledUpCurrencies(tr payment.Trends) []string {
	var out []string
	for _, c := range tr.Currencies {
		for _, d := range c.Days {
			if d.Created == 0 && d.Succeeded == 0 && d.Failed == 0 && d.ReceivedCents == 0 && d.RefundedCents == 0 {
				continue
			}
			out = append(out, fmt.Sprintf("%s %s %d/%d/%d %d %d", c.Currency, d.Day.Format("2006-01-02"), d.Created, d.Succeeded, d.Failed,
				d.ReceivedCents, d.RefundedCents))
		}
	}
	return out
}

// rolledUpGateways are the answer's gateway totals and days with something
// in them, written and ordered as trendOracle writes them.
func rolledUpGateways(tr payment.Trends) []string {
	var out []string
	for _, g := range tr.Gateways {
		out = append(out, fmt.Sprintf("%s %d/%d/%d", g.ID, g.Created, g.Succeeded, g.Failed))
		for _, d := range g.Days {
			if d.Created != 0 {
				out = append(out, fmt.Sprintf("%s %s %d/%d/%d", g.ID, d.Day.Format("2006-01-02"), d.Created, d.Succeeded, d.Failed))
			}
		}
	}
	sort.Strings(out)
	return out
}
