package testdb

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// RoundTrips is a pgx tracer that counts what a pool sends to PostgreSQL
// and waits for: each Query, QueryRow and Exec (BEGIN and COMMIT included)
// is one round trip, a batch is one however many statements it carries.
// Preparing a statement, at its first use on a connection, is a round trip
// more that the tracer does not see for batches: a test measures a warm
// connection. Set it as a pool's ConnConfig.Tracer.
type RoundTrips struct {
	mu    sync.Mutex
	trips []string
}

// Reset returns the round trips seen since the last Reset, each named by
// its statement (a batch as "batch[a, b, …]"), and starts counting anew.
func (r *RoundTrips) Reset() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	trips := r.trips
	r.trips = nil
	return trips
}

func (r *RoundTrips) add(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trips = append(r.trips, what)
}

// TraceQueryStart implements pgx.QueryTracer.
func (r *RoundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(statementName(d.SQL))
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (r *RoundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer.
func (r *RoundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	names := make([]string, 0, d.Batch.Len())
	for _, q := range d.Batch.QueuedQueries {
		names = append(names, statementName(q.SQL))
	}
	r.add("batch[" + strings.Join(names, ", ") + "]")
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (r *RoundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (r *RoundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

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

// TracedPool is a pool of one connection on the database at url, its round
// trips counted by the RoundTrips it returns: every statement a call sends
// is seen in order, and after a first call all are prepared. Closed when
// the test ends.
func TracedPool(t testing.TB, url string) (*pgxpool.Pool, *RoundTrips) {
	t.Helper()
	trips := &RoundTrips{}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("testdb: traced pool: %v", err)
	}
	cfg.MaxConns, cfg.MinConns = 1, 1
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("testdb: traced pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, trips
}
