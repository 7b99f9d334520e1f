package event_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
	"github.com/rustbill/paymentd/internal/testkit"
	"github.com/rustbill/paymentd/internal/testsignal"
)

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// nodeOptions shape one simulated paymentd instance.
type nodeOptions struct {
	ttl, renew time.Duration
	worker     event.WorkerOptions
	noListener bool
	handler    event.Handler
}

func (o nodeOptions) withDefaults() nodeOptions {
	if o.ttl == 0 {
		o.ttl = 2 * time.Second
	}
	if o.renew == 0 {
		o.renew = 300 * time.Millisecond
	}
	w := &o.worker
	if w.PollInterval == 0 {
		w.PollInterval = 200 * time.Millisecond
	}
	if w.RetryBase == 0 {
		w.RetryBase = 20 * time.Millisecond
		w.RetryMax = 100 * time.Millisecond
	}
	if w.MaxAttempts == 0 {
		w.MaxAttempts = 3
	}
	if w.Concurrency == 0 {
		w.Concurrency = 8
	}
	if w.HandlerTimeout == 0 {
		w.HandlerTimeout = 5 * time.Second
	}
	if w.LockGrace == 0 {
		w.LockGrace = time.Second
	}
	if w.DrainTimeout == 0 {
		w.DrainTimeout = 2 * time.Second
	}
	w.Logger = quietLog()
	return o
}

// node is one simulated paymentd instance: listener, elector, worker.
type node struct {
	name     string
	elector  *cluster.Elector
	worker   *event.Worker
	listener *cluster.Listener
	cancel   context.CancelFunc
	// rounds and attempts are the worker's test signals: its claim rounds
	// and its attempts that ended. A test waits on them instead of sleeping.
	rounds, attempts *testsignal.Signal
}

func startNode(t testing.TB, pool *pgxpool.Pool, name string, o nodeOptions) *node {
	t.Helper()
	o = o.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{name: name, cancel: cancel, rounds: testsignal.New(), attempts: testsignal.New()}
	o.worker.Rounds, o.worker.Attempts = n.rounds, n.attempts
	var waker cluster.Waker
	if !o.noListener {
		n.listener = cluster.NewListener(cluster.ConnectLike(pool, "paymentd-"+name), cluster.ListenerOptions{
			MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, Logger: quietLog(),
		})
		waker = n.listener
	}
	var err error
	n.elector, err = cluster.NewElector(pool, cluster.ElectorOptions{
		Role: cluster.RoleEventWorker, Holder: name, TTL: o.ttl, RenewInterval: o.renew, Waker: waker, Logger: quietLog(),
	})
	require.NoError(t, err)
	o.worker.Node = name
	o.worker.Waker = waker
	n.worker, err = event.NewWorker(pool, n.elector, o.worker)
	require.NoError(t, err)
	if o.handler != nil {
		for _, typ := range []string{"order_paid", "order_provisioned", "order_cancelled"} {
			n.worker.Handle(typ, o.handler)
		}
	}
	if n.listener != nil {
		require.NoError(t, n.listener.Start(ctx))
		require.Eventually(t, n.listener.Connected, 5*time.Second, 5*time.Millisecond)
	}
	require.NoError(t, n.elector.Start(ctx))
	require.NoError(t, n.worker.Start(ctx))
	t.Cleanup(n.stop)
	return n
}

// stop is a graceful shutdown: worker, then resign, then listener.
func (n *node) stop() {
	n.worker.Stop()
	n.elector.Stop()
	if n.listener != nil {
		n.listener.Stop()
	}
	n.cancel()
}

// kill stops the node the way kill -9 would look to the others: nothing
// is given back (no resign, no release).
func (n *node) kill() { n.cancel() }

func waitLeader(t testing.TB, within time.Duration, nodes ...*node) *node {
	t.Helper()
	var leader *node
	require.Eventually(t, func() bool {
		leader = nil
		count := 0
		for _, n := range nodes {
			if n.elector.IsLeader() {
				leader, count = n, count+1
			}
		}
		return count == 1
	}, within, 5*time.Millisecond)
	return leader
}

// recorder is a handler that records what ran when.
type recorder struct {
	delay time.Duration

	mu               sync.Mutex
	calls            map[uuid.UUID]int
	byOrder          map[uuid.UUID][]uuid.UUID
	active           map[uuid.UUID]int
	overlaps         int
	running          int
	maxRunning       int
	maxOrdersAtATime int
	handled          chan uuid.UUID
}

func newRecorder(delay time.Duration) *recorder {
	return &recorder{
		delay: delay, calls: map[uuid.UUID]int{}, byOrder: map[uuid.UUID][]uuid.UUID{},
		active: map[uuid.UUID]int{}, handled: make(chan uuid.UUID, 10000),
	}
}

func (r *recorder) Handle(ctx context.Context, e event.Event) error {
	r.mu.Lock()
	r.calls[e.ID]++
	r.byOrder[e.OrderID] = append(r.byOrder[e.OrderID], e.ID)
	r.active[e.OrderID]++
	if r.active[e.OrderID] > 1 {
		r.overlaps++
	}
	r.running++
	r.maxRunning = max(r.maxRunning, r.running)
	orders := 0
	for _, n := range r.active {
		if n > 0 {
			orders++
		}
	}
	r.maxOrdersAtATime = max(r.maxOrdersAtATime, orders)
	r.mu.Unlock()

	var err error
	if r.delay > 0 {
		select {
		case <-time.After(r.delay):
		case <-ctx.Done():
			err = ctx.Err()
		}
	}

	r.mu.Lock()
	r.active[e.OrderID]--
	r.running--
	r.mu.Unlock()
	if err == nil {
		r.handled <- e.ID
	}
	return err
}

func (r *recorder) callsOf(id uuid.UUID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[id]
}

// bundle is a database with a customer to own orders.
type bundle struct {
	pool     *pgxpool.Pool
	customer uuid.UUID
}

func newWorld(t testing.TB) *bundle {
	t.Helper()
	pool := testdb.Pool(t)
	return &bundle{pool: pool, customer: testfixture.Customer(t, pool)}
}

func (w *bundle) order(t testing.TB) uuid.UUID {
	t.Helper()
	return testfixture.Order(t, w.pool, w.customer, "10.00")
}

// insert queues one event of typ for an order (its own transaction).
func (w *bundle) insert(t testing.TB, typ string, orderID uuid.UUID) store.Event {
	t.Helper()
	e, err := w.tryInsert(typ, orderID)
	require.NoError(t, err)
	return e
}

// tryInsert is insert for a goroutine of the test's: it returns the error.
func (w *bundle) tryInsert(typ string, orderID uuid.UUID) (store.Event, error) {
	return store.Q(w.pool).InsertEvent(context.Background(), store.InsertEventParams{
		EventType: typ, OrderID: orderID, Payload: []byte(`{"order_id":"` + orderID.String() + `"}`),
	})
}

// event reads one event; t may be an EventuallyWithT condition's collector.
func (w *bundle) event(t testkit.T, id uuid.UUID) store.Event {
	t.Helper()
	e, err := store.Q(w.pool).GetEvent(context.Background(), id)
	require.NoError(t, err)
	return e
}

// countStatus counts the events in status; t may be an EventuallyWithT
// condition's collector.
func (w *bundle) countStatus(t testkit.T, status string) int {
	t.Helper()
	var n int
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE status = $1`, status).Scan(&n))
	return n
}

func (w *bundle) waitStatus(t *testing.T, id uuid.UUID, status string, within time.Duration) store.Event {
	t.Helper()
	var e store.Event
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		e = w.event(c, id)
		assert.Equal(c, status, e.Status, "event %s", id)
	}, within, 5*time.Millisecond, "event %s did not become %s", id, status)
	return e
}
