package order_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// roundTrips counts what a pool sends to PostgreSQL and waits for: each
// Query, QueryRow and Exec (BEGIN and COMMIT included) is one round trip,
// a batch is one however many statements it carries (internal/payment's
// TestASuccessfulCallbackSettlesInFewRoundTrips counts the callback's the
// same way).
type roundTrips struct {
	mu    sync.Mutex
	trips []string
}

func (r *roundTrips) add(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trips = append(r.trips, what)
}

func (r *roundTrips) reset() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	trips := r.trips
	r.trips = nil
	return trips
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(statementName(d.SQL))
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	names := make([]string, 0, d.Batch.Len())
	for _, q := range d.Batch.QueuedQueries {
		names = append(names, statementName(q.SQL))
	}
	r.add("batch[" + strings.Join(names, ", ") + "]")
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// statementName is sqlc's name of a statement ("-- name: X :one"), or its
// first words.
func statementName(sql string) string {
	sql = strings.TrimSpace(sql)
	if rest, ok := strings.CutPrefix(sql, "-- name: "); ok {
		name, _, _ := strings.Cut(rest, " ")
		return name
	}
	first, _, _ := strings.Cut(sql, "\n")
	if len(first) > 40 {
		first = first[:40]
	}
	return first
}

// maxBalancePaymentRoundTrips bounds the round trips of a PayWithBalance of
// a pending order (docs/performance.md, "PayWithBalance no dearer than a
// callback"). Raise it only with the reason in that note.
const maxBalancePaymentRoundTrips = 3

// balancePaymentRoundTripsBefore is what the same call cost before it was
// pipelined (issue 40): for the log.
const balancePaymentRoundTripsBefore = 13

func TestABalancePaymentTakesFewRoundTrips(t *testing.T) {
	t.Parallel()
	// A service of its own on one traced connection: every statement of a
	// payment is seen, and after a first payment all are prepared.
	trips := &roundTrips{}
	cfg, err := pgxpool.ParseConfig(testdb.URL(t))
	require.NoError(t, err)
	cfg.MaxConns, cfg.MinConns = 1, 1
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	b := setupWithPool(t, pool)
	b.setAccount(t, b.alice, "100.00", "0.00")

	prepared := func() int {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_prepared_statements`).Scan(&n))
		return n
	}
	// updates is (all, HOT) updates of table so far, the statistics
	// flushed first (the pool's one connection made them).
	updates := func(table string) (int64, int64) {
		var all, hot int64
		_, err := pool.Exec(context.Background(), `SELECT pg_stat_force_next_flush()`)
		require.NoError(t, err)
		require.NoError(t, pool.QueryRow(context.Background(), `
			SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = $1`, table).Scan(&all, &hot))
		return all, hot
	}
	pay := func(label string) []string {
		o := b.order(t, b.asAlice, "12.30")
		before := prepared()
		cAll, cHot := updates("customers")
		oAll, oHot := updates("orders")
		trips.reset()
		res, err := b.svc.PayWithBalance(b.asAlice, o.ID)
		require.NoError(t, err)
		sent := trips.reset()
		prepares := prepared() - before
		cAll1, cHot1 := updates("customers")
		oAll1, oHot1 := updates("orders")
		t.Logf("%s balance payment: customers %d updates, %d HOT; orders %d updates, %d HOT", label, cAll1-cAll, cHot1-cHot, oAll1-oAll, oHot1-oHot)
		require.Equal(t, "provisioning", b.getOrder(t, o.ID).Status)
		require.NotNil(t, res.Payment)
		require.Len(t, b.events(t, o.ID), 1)
		t.Logf("%s balance payment: %d round trips (%d before the pipelined payment), %d statements prepared", label, len(sent), balancePaymentRoundTripsBefore, prepares)
		for i, s := range sent {
			t.Logf("  %2d %s", i+1, s)
		}
		if label == "warm" {
			require.Zero(t, prepares, "a warm connection prepares nothing")
		}
		return sent
	}
	pay("cold")
	sent := pay("warm")
	require.LessOrEqual(t, len(sent), maxBalancePaymentRoundTrips, fmt.Sprintf("round trips of a balance payment: %q", sent))
	testfixture.CheckMoneyInvariants(t, b.pool)
}
