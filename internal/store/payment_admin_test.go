package store_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
)

// listedRefund is what the test expects of a row: the refund, its status
// and its payment's currency, in list order.
type listedRefund struct {
	id       uuid.UUID
	at       time.Time
	status   string
	currency string
}

// newestFirst orders refunds as the lists must: created_at DESC, id DESC
// (PostgreSQL compares uuids byte by byte, as bytes.Compare does).
func newestFirst(rs []listedRefund) []listedRefund {
	out := slices.Clone(rs)
	slices.SortFunc(out, func(a, b listedRefund) int {
		if c := b.at.Compare(a.at); c != 0 {
			return c
		}
		return bytes.Compare(b.id[:], a.id[:])
	})
	return out
}

// The admin's list of every payment's refunds, in any status or in one,
// reads one page through an index however many refunds there are, newest
// first with the id breaking ties, each with its payment's currency; a
// payment's own list keeps answering all of its refunds when no page is
// asked for.
func TestListRefundsPagesEveryPaymentsRefundsNewestFirstThroughIndexes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	base := time.Date(2026, 5, 2, 8, 30, 0, 0, time.UTC)

	b.insertPayments(t, 1, "success", "CNY", "9999999999.00", "0", base.Add(-72*time.Hour))
	b.insertPayments(t, 1, "success", "USD", "9999999999.00", "0", base.Add(-72*time.Hour))
	payment := map[string]uuid.UUID{}
	rows, err := b.pool.Query(ctx, `SELECT currency, id FROM payments`)
	require.NoError(t, err)
	for rows.Next() {
		var cur string
		var id uuid.UUID
		require.NoError(t, rows.Scan(&cur, &id))
		payment[cur] = id
	}
	require.NoError(t, rows.Err())
	refunds := func(currency string, n int, status string, at time.Time, step time.Duration) {
		t.Helper()
		_, err := b.pool.Exec(ctx, `INSERT INTO refunds (payment_id, amount, status, created_at, updated_at)
			SELECT $1, 1.00, $2, $3::timestamptz + i * $5::interval, $3 FROM generate_series(0, $4::int - 1) AS i`,
			payment[currency], status, at, n, step)
		require.NoError(t, err)
	}
	// Thousands of succeeded refunds, older and newer than a few failed and
	// pending ones; two pending refunds of the USD payment made at the same
	// instant as a CNY one.
	refunds("CNY", 6000, "succeeded", base.Add(-48*time.Hour), time.Second)
	refunds("CNY", 200, "failed", base.Add(-time.Hour), time.Second)
	refunds("CNY", 3, "pending", base, time.Second)
	refunds("USD", 2, "pending", base.Add(time.Second), 0)
	refunds("USD", 500, "succeeded", base.Add(time.Hour), time.Second)
	_, err = b.pool.Exec(ctx, `VACUUM ANALYZE refunds`)
	require.NoError(t, err)

	// Every refund, in the order the lists must give, computed here.
	var all []listedRefund
	rows, err = b.pool.Query(ctx, `SELECT r.id, r.created_at, r.status, p.currency FROM refunds r JOIN payments p ON p.id = r.payment_id`)
	require.NoError(t, err)
	for rows.Next() {
		var r listedRefund
		require.NoError(t, rows.Scan(&r.id, &r.at, &r.status, &r.currency))
		all = append(all, r)
	}
	require.NoError(t, rows.Err())
	all = newestFirst(all)
	inStatus := func(status string) []listedRefund {
		return slices.DeleteFunc(slices.Clone(all), func(r listedRefund) bool { return r.status != status })
	}
	got := func(rs []store.ListedRefund) []listedRefund {
		out := make([]listedRefund, 0, len(rs))
		for _, r := range rs {
			out = append(out, listedRefund{id: r.ID, at: r.CreatedAt, status: r.Status, currency: r.Currency})
		}
		return out
	}

	// A connection that remembers every statement it ran, so the test can
	// ask PostgreSQL for the plan of exactly those.
	var ran []pgx.TraceQueryStartData
	cfg := b.pool.Config().ConnConfig.Copy()
	cfg.Tracer = tracerFunc(func(d pgx.TraceQueryStartData) { ran = append(ran, d) })
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)

	for _, c := range []struct {
		name   string
		status *string
		page   store.Page
		want   []listedRefund
		total  int
		// Counting a status most refunds are in (or every refund) reads
		// most of the table whichever way: the planner may scan it.
		countReadsAll bool
	}{
		{name: "any status, first page", page: store.Page{Limit: 20}, want: all[:20], total: len(all), countReadsAll: true},
		{name: "any status, third page", page: store.Page{Limit: 20, Offset: 40}, want: all[40:60], total: len(all), countReadsAll: true},
		{name: "pending", status: ptr("pending"), page: store.Page{Limit: 20}, want: inStatus("pending"), total: 5},
		{name: "failed, second page", status: ptr("failed"), page: store.Page{Limit: 10, Offset: 10}, want: inStatus("failed")[10:20], total: 200},
		{name: "succeeded", status: ptr("succeeded"), page: store.Page{Limit: 100}, want: inStatus("succeeded")[:100], total: 6500, countReadsAll: true},
	} {
		ran = nil
		rs, total, err := store.ListRefundsNewestFirst(ctx, conn, c.status, c.page)
		require.NoError(t, err, c.name)
		require.EqualValues(t, c.total, total, c.name)
		require.Equal(t, c.want, got(rs), c.name)
		require.Len(t, ran, 2, "%s: a count and a page", c.name)
		for i, q := range slices.Clone(ran) {
			if i == 0 && c.countReadsAll {
				continue
			}
			what := fmt.Sprintf("%s (statement %d)", c.name, i+1)
			plan := explain(t, conn, q)
			require.NotContains(t, plan, "Seq Scan", "%s:\n%s", what, plan)
			require.Contains(t, plan, "Index", "%s:\n%s", what, plan)
			requireIndexedLookup(t, conn, q, what)
		}
	}
	// The tie the id breaks: a CNY refund and both USD ones at one instant.
	pending := inStatus("pending")
	require.True(t, pending[1].at.Equal(pending[2].at) && pending[2].at.Equal(pending[3].at), "%v", pending)

	// Past the last page: nothing, and the total.
	rs, total, err := store.ListRefundsNewestFirst(ctx, conn, ptr("pending"), store.Page{Limit: 20, Offset: 20})
	require.NoError(t, err)
	require.Empty(t, rs)
	require.EqualValues(t, 5, total)

	// One payment's refunds: all of them without a page, or a page, in
	// any status or in one.
	usd := payment["USD"]
	ofUSD := slices.DeleteFunc(slices.Clone(all), func(r listedRefund) bool { return r.currency != "USD" })
	refundIDs := func(rs []store.Refund) []uuid.UUID {
		out := make([]uuid.UUID, 0, len(rs))
		for _, r := range rs {
			require.Equal(t, usd, r.PaymentID)
			out = append(out, r.ID)
		}
		return out
	}
	ids := func(rs []listedRefund) []uuid.UUID {
		out := make([]uuid.UUID, 0, len(rs))
		for _, r := range rs {
			out = append(out, r.id)
		}
		return out
	}
	every, total, err := store.ListPaymentRefundsNewestFirst(ctx, conn, usd, nil, nil)
	require.NoError(t, err)
	require.EqualValues(t, 502, total)
	require.Equal(t, ids(ofUSD), refundIDs(every))
	paged, total, err := store.ListPaymentRefundsNewestFirst(ctx, conn, usd, nil, &store.Page{Limit: 3, Offset: 499})
	require.NoError(t, err)
	require.EqualValues(t, 502, total)
	require.Equal(t, ids(ofUSD[499:]), refundIDs(paged))
	pendingUSD, total, err := store.ListPaymentRefundsNewestFirst(ctx, conn, usd, ptr("pending"), nil)
	require.NoError(t, err)
	require.EqualValues(t, 2, total)
	require.Equal(t, ids(slices.DeleteFunc(slices.Clone(ofUSD), func(r listedRefund) bool { return r.status != "pending" })), refundIDs(pendingUSD))
	none, total, err := store.ListPaymentRefundsNewestFirst(ctx, conn, uuid.New(), nil, nil)
	require.NoError(t, err)
	require.Empty(t, none)
	require.Zero(t, total)
}
