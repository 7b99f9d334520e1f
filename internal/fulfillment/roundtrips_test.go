package fulfillment_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/fulfillment"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
)

// roundTrips records, in order, every round trip a pool makes: a statement
// (Query, Exec, QueryRow, BEGIN, COMMIT) is one, a batch (a pipeline of
// statements with one Sync) is one. Each is named by the sqlc query name
// when it has one ("-- name: X"), else by its first line.
type roundTrips struct {
	mu    sync.Mutex
	trips []string
	batch []string
	// statements is every statement sent, by name, in or out of a batch.
	statements map[string]int
}

func (r *roundTrips) sent(sql string) {
	if r.statements == nil {
		r.statements = map[string]int{}
	}
	r.statements[statementName(sql)]++
}

func statementName(sql string) string {
	sql = strings.TrimSpace(sql)
	if rest, ok := strings.CutPrefix(sql, "-- name: "); ok {
		name, _, _ := strings.Cut(rest, " ")
		return name
	}
	line, _, _ := strings.Cut(sql, "\n")
	return line
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trips = append(r.trips, statementName(d.SQL))
	r.sent(d.SQL)
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batch = r.batch[:0]
	return ctx
}

func (r *roundTrips) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batch = append(r.batch, statementName(d.SQL))
	r.sent(d.SQL)
}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trips = append(r.trips, "["+strings.Join(r.batch, " + ")+"]")
}

// tracedPool is a rig's workerDB: a pool of one connection (every
// statement prepared after a warm-up, so that counts repeat), traced by
// trips, kept in *pool.
func tracedPool(trips *roundTrips, pool **pgxpool.Pool) func(t *testing.T, url string) *pgxpool.Pool {
	return func(t *testing.T, url string) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(url)
		require.NoError(t, err)
		cfg.MaxConns = 1
		cfg.ConnConfig.Tracer = trips
		p, err := pgxpool.NewWithConfig(context.Background(), cfg)
		require.NoError(t, err)
		t.Cleanup(p.Close)
		*pool = p
		return p
	}
}

func (r *roundTrips) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trips = nil
	r.statements = nil
}

// split returns the round trips of the worker's claim rounds (the claim's
// transaction, the reclaim) and those of the handlers (everything else,
// the worker's own outcome statements included), in order.
func (r *roundTrips) split() (claims [][]string, handlers []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var tx []string
	isClaim := func(unit []string) bool {
		for _, s := range unit {
			if strings.Contains(s, "ClaimEvents") || strings.Contains(s, "ReclaimExpiredEvents") {
				return true
			}
		}
		return false
	}
	flush := func() {
		switch {
		case len(tx) == 1 && tx[0] == "ListPendingOrdersCreatedBefore":
			// the payment timeout scan, a periodic task: not the cycle's
		case isClaim(tx):
			claims = append(claims, tx)
		default:
			handlers = append(handlers, tx...)
		}
		tx = nil
	}
	for _, s := range r.trips {
		tx = append(tx, s)
		switch {
		case strings.EqualFold(s, "begin"):
			// the transaction goes on
		case strings.EqualFold(s, "commit"), strings.EqualFold(s, "rollback"):
			flush()
		case len(tx) == 1:
			flush() // a statement outside a transaction
		}
	}
	flush()
	return claims, handlers
}

// maxHandlerRoundTrips bounds the round trips of one paid order's cycle
// (order_paid handled with a provider, order_provisioned's notices
// queued), claims aside. Before the worker round of issue 20 it took 30:
// three transactions, each BEGIN, the claim fence, its statements and
// COMMIT. BEGIN and the fence now travel with each transaction's first
// statement (store.WithClaimTx): 24. The audit rows and the event then
// waited for the next statement that answers, or COMMIT, as in the
// settlement (WithClaimTx on the pipelined transaction), and a handler's
// notifications went in one statement with their NOTIFY: 16.
const maxHandlerRoundTrips = 16

// maxClaimRoundTrips bounds one claim round: BEGIN, SET LOCAL, the claim
// and COMMIT were four; the SET LOCAL and the claim in one batch, one
// implicit transaction, are one.
const maxClaimRoundTrips = 1

// The database round trips of one order_paid → provisioned → active cycle,
// counted by a tracer on the pool of the worker and its handlers (one
// connection, so that every statement is already prepared after a warm-up
// order and the count is the same on every run). The claim rounds are
// counted apart: how many there are depends on how wake-ups fall.
//
// Without a notification channel, order_provisioned's handler only
// completes its event: it reads neither the order nor the customer for
// notices nobody would get (maxHandlerRoundTripsWithoutChannels).
func TestOneFulfilmentCycleTakesABoundedNumberOfRoundTrips(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		channels bool
		max      int
	}{{"with channels", true, maxHandlerRoundTrips}, {"without channels", false, maxHandlerRoundTripsWithoutChannels}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			oneCycleRoundTrips(t, c.channels, c.max)
		})
	}
}

// maxHandlerRoundTripsWithoutChannels: order_provisioned's handler is
// BEGIN with the fence and the completion, then COMMIT, where with
// channels it reads the order and the customer and queues the notices.
const maxHandlerRoundTripsWithoutChannels = 13

func oneCycleRoundTrips(t *testing.T, channels bool, maxHandlers int) {
	trips := &roundTrips{}
	var wrap func(fulfillment.Notifier) fulfillment.Notifier
	if !channels {
		wrap = func(n fulfillment.Notifier) fulfillment.Notifier { return silentNotifier{n} }
	}
	var workerPool *pgxpool.Pool
	r := setup(t, rigOptions{
		wrapNotify:   wrap,
		pollInterval: time.Hour, // no polling rounds: NOTIFY and finished handlers wake the worker
		workerDB:     tracedPool(trips, &workerPool),
	})
	cycle := func() {
		id := r.order(t, &r.product, time.Time{})
		r.pay(t, id)
		r.waitOrder(t, id, string(order.StatusActive))
		r.waitEventsDone(t, id, 2)
	}
	cycle() // warm-up: every statement gets prepared on the one connection
	// A cycle's last COMMIT is visible to the test before the tracer
	// records it (a batch is recorded when it ends): taking the pool's one
	// connection waits until the worker has let go of it, trace included.
	settle := func() {
		conn, err := workerPool.Acquire(context.Background())
		require.NoError(t, err)
		conn.Release()
	}
	settle()
	trips.reset()
	cycle()
	settle()

	claims, handlers := trips.split()
	t.Logf("handler round trips of one cycle: %d", len(handlers))
	for i, s := range handlers {
		t.Logf("  %2d %s", i+1, s)
	}
	t.Logf("claim rounds: %d", len(claims))
	for _, c := range claims {
		t.Logf("  %d round trips: %s", len(c), strings.Join(c, " → "))
	}
	require.LessOrEqual(t, len(handlers), maxHandlers, "round trips of the handlers of one cycle")
	var notices int
	require.NoError(t, r.pool.QueryRow(context.Background(), `SELECT count(*) FROM notifications`).Scan(&notices))
	require.Equal(t, channels, notices > 0, "notices queued: %d", notices)
	for _, c := range claims {
		require.LessOrEqual(t, len(c), maxClaimRoundTrips, "round trips of one claim round: %v", c)
	}
}

// A batch of paid orders costs the worker statements per batch, not per
// order: a claim round of twelve order_paid events (committed together,
// so one round claims them all) is moved to provisioning in one
// statement, gets its instances in one, is recorded running and active in
// one each with its order_provisioned events in one, and writes its audit
// rows as two statements per transaction. No statement of the one-order
// path (SetOrderStatus, EnsureOrderInstance, MarkInstanceProvisioned, an
// event or audit row alone) is sent.
func TestABatchOfPaidOrdersIsWrittenInStatementsPerBatch(t *testing.T) {
	t.Parallel()
	trips := &roundTrips{}
	var workerPool *pgxpool.Pool
	r := setup(t, rigOptions{
		batchSize: 16, concurrency: 16,
		wrapNotify:   func(n fulfillment.Notifier) fulfillment.Notifier { return silentNotifier{n} },
		pollInterval: time.Hour, // no polling rounds: the commit's NOTIFY wakes the worker
		workerDB:     tracedPool(trips, &workerPool),
	})
	const n = 12
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = r.order(t, &r.product, time.Time{})
	}
	trips.reset()
	r.payAll(t, ids)
	for _, id := range ids {
		r.waitOrder(t, id, string(order.StatusActive))
		r.waitEventsDone(t, id, 2)
		require.Equal(t, store.InstanceRunning, r.instance(t, id).Status)
	}
	conn, err := workerPool.Acquire(context.Background()) // the last trace is in
	require.NoError(t, err)
	conn.Release()

	trips.mu.Lock()
	defer trips.mu.Unlock()
	t.Logf("statements of %d orders: %v", n, trips.statements)
	for _, one := range []string{"SetOrderStatus", "EnsureOrderInstance", "MarkInstanceProvisioned", "AppendEvent", "InsertAuditLog"} {
		require.Zero(t, trips.statements[one], "%s, the one-order statement, sent in a batch", one)
	}
	require.Equal(t, 2, trips.statements["MoveOrders"], "paid → provisioning, then provisioning → active")
	require.Equal(t, 1, trips.statements["EnsureOrderInstances"])
	require.Equal(t, 1, trips.statements["MarkInstancesProvisioned"])
	require.Equal(t, 1, trips.statements["AppendEvents"], "the order_provisioned events")
	// The audit rows that wait for one answer go as one statement: the
	// orders' before their instances are written, the instances' with
	// COMMIT.
	require.Equal(t, 4, trips.statements["InsertAuditLogs"], "two per transaction that writes audit rows")
	total := 0
	for name, c := range trips.statements {
		switch name {
		case "ClaimEvents", "SET LOCAL enable_sort = off", "ReclaimExpiredEvents", "ListPendingOrdersCreatedBefore":
			// the claim rounds and the timeout scan: how many depends on
			// how wake-ups fall
		default:
			total += c
		}
	}
	require.LessOrEqual(t, total, maxBatchStatements, "statements of the handlers of a batch of %d orders", n)
}

// maxBatchStatements bounds the statements the handlers send for a batch
// of paid orders, whatever its size (24 today): three transactions (step
// 1, step 3, order_provisioned), each BEGIN, its fence and COMMIT, and the
// statements above. Through the one-order statements, twelve orders took
// 123.
const maxBatchStatements = 26
