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
// a batch is one however many statements it carries. Statement
// preparations (the first use of a statement on a connection) are counted
// apart: a warm connection has none.
type roundTrips struct {
	mu       sync.Mutex
	trips    []string
	prepares int
}

func (r *roundTrips) add(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trips = append(r.trips, what)
}

func (r *roundTrips) reset() (trips []string, prepares int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	trips, prepares = r.trips, r.prepares
	r.trips, r.prepares = nil, 0
	return trips, prepares
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

func (r *roundTrips) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prepares++
	return ctx
}

func (r *roundTrips) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

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

	settle := func(label string) []string {
		orderID := f.order(t, "12.30")
		p := f.pay(t, orderID)
		trips.reset()
		res, err := svc.HandleCallback(context.Background(), f.callbackOf(notify(p.ID, "T-"+label, "12.30")))
		require.NoError(t, err)
		sent, prepares := trips.reset()
		require.True(t, res.Applied)
		require.Equal(t, "success", f.payment(t, p.ID).Status)
		require.Equal(t, "paid", f.orderStatus(t, orderID))
		require.Equal(t, 1, f.orderPaidEvents(t, orderID))
		t.Logf("%s callback: %d round trips, %d statement preparations", label, len(sent), prepares)
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
