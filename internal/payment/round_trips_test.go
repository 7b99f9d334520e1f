package payment_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// roundTrips counts what a pool sends to PostgreSQL and waits for: each
// Query, QueryRow and Exec (BEGIN and COMMIT included) is one round trip,
// a batch is one however many statements it carries. (Preparing a
// statement, at its first use on a connection, is a round trip more that
// the tracer does not see for batches: the test measures a warm
// connection, and checks it prepared nothing.)
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

// maxCallbackRoundTrips bounds the round trips of a callback that settles a
// pending payment of a pending order (docs/performance.md, "one round trip
// per callback"). Adding one to settle fails
// TestASuccessfulCallbackSettlesInFewRoundTrips: raise it only with the
// reason in that note.
const maxCallbackRoundTrips = 3

// callbackRoundTripsBefore is what the same callback cost before settle was
// pipelined (issue 20): for the log.
const callbackRoundTripsBefore = 12

func TestASuccessfulCallbackSettlesInFewRoundTrips(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)

	// A service of its own on one traced connection: every statement of a
	// callback is seen, and after a first callback all are prepared.
	trips := &roundTrips{}
	cfg, err := pgxpool.ParseConfig(f.pool.Config().ConnString())
	require.NoError(t, err)
	cfg.MaxConns, cfg.MinConns = 1, 1
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	svc := payment.NewService(pool, slog.New(slog.DiscardHandler), payment.WithGateways(f.gws), payment.WithClock(f.clock.Now))

	// The statements prepared on the one connection.
	prepared := func() int {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_prepared_statements`).Scan(&n))
		return n
	}
	settle := func(label string) []string {
		orderID := f.order(t, "12.30")
		p := f.pay(t, orderID)
		before := prepared()
		trips.reset()
		res, err := svc.HandleCallback(context.Background(), f.callbackOf(notify(p.ID, "T-"+label, "12.30")))
		require.NoError(t, err)
		sent := trips.reset()
		prepares := prepared() - before
		require.True(t, res.Applied)
		require.Equal(t, "success", f.payment(t, p.ID).Status)
		require.Equal(t, "paid", f.orderStatus(t, orderID))
		require.Equal(t, 1, f.orderPaidEvents(t, orderID))
		t.Logf("%s callback: %d round trips (%d before the pipelined settlement), %d statements prepared", label, len(sent), callbackRoundTripsBefore, prepares)
		for i, s := range sent {
			t.Logf("  %2d %s", i+1, s)
		}
		if label == "warm" {
			require.Zero(t, prepares, "a warm connection prepares nothing")
		}
		return sent
	}
	settle("cold")
	sent := settle("warm")
	require.LessOrEqual(t, len(sent), maxCallbackRoundTrips, fmt.Sprintf("round trips of a settling callback: %q", sent))
	testfixture.CheckMoneyInvariants(t, f.pool)
}
