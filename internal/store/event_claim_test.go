package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
)

// A claim runs once per handled event: with a backlog of thousands of
// pending events (a worker that was down, a burst of payments) and a long
// history of done ones, it must still read only about as many rows as it
// claims — whether or not the table's statistics have caught up with the
// burst — and take the oldest due events.
func TestClaimOfABacklogReadsOnlyTheEventsItTakes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const backlog = 3000
	// A done history and a pending backlog, one event per order, the
	// backlog's events created one after the other (as callbacks do).
	_, err := b.pool.Exec(ctx, `
		WITH o AS (
			INSERT INTO orders (customer_id, total_amount, currency)
			SELECT $1, 1.00, 'CNY' FROM generate_series(1, 2 * $2::int)
			RETURNING id)
		INSERT INTO events (event_type, order_id, status, run_at, created_at, updated_at)
		SELECT 'order_paid', id,
		       CASE WHEN n <= $2 THEN 'done' ELSE 'pending' END,
		       now() - interval '1 hour' + n * interval '1 millisecond',
		       now() - interval '1 hour' + n * interval '1 millisecond',
		       now()
		FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM o) numbered`, b.customerID, backlog)
	require.NoError(t, err)
	var oldest []string
	rows, err := b.pool.Query(ctx, `SELECT id::text FROM events WHERE status = 'pending' ORDER BY created_at LIMIT 4`)
	require.NoError(t, err)
	oldest, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)

	conn, err := pgx.ConnectConfig(ctx, b.pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	defer conn.Close(ctx)
	var version int
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&version))
	if version < 150000 {
		t.Skip("counting the rows a statement reads needs pg_stat_force_next_flush (PostgreSQL 15)")
	}
	// rowsRead is how many index entries and heap rows of events this
	// connection has read so far (its statistics flushed first).
	rowsRead := func() int64 {
		t.Helper()
		_, err := conn.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
		require.NoError(t, err)
		var n int64
		require.NoError(t, conn.QueryRow(ctx, `
			SELECT (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes WHERE relname = 'events')
			     + (SELECT coalesce(seq_tup_read, 0) FROM pg_stat_user_tables WHERE relname = 'events')`).Scan(&n))
		return n
	}

	for _, stats := range []string{"no statistics", "analyzed"} {
		if stats == "analyzed" {
			_, err := conn.Exec(ctx, `ANALYZE events`)
			require.NoError(t, err)
		}
		before := rowsRead()
		var claimed []string
		require.NoError(t, rollback(ctx, conn, func(tx pgx.Tx) error {
			// With an order the process is still busy with, as the worker
			// passes them: the filter must not change the plan.
			got, err := store.ClaimEvents(ctx, tx, "node-1", 4, time.Minute, []uuid.UUID{uuid.New()}, "")
			for _, e := range got {
				claimed = append(claimed, e.ID.String())
			}
			return err
		}))
		read := rowsRead() - before
		require.ElementsMatch(t, oldest, claimed, stats)
		require.LessOrEqual(t, read, int64(100), "%s: claiming 4 events read %d rows of the backlog and the history", stats, read)
	}
}

func rollback(ctx context.Context, conn *pgx.Conn, fn func(tx pgx.Tx) error) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	return fn(tx)
}
