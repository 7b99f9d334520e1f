package event_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/store"
)

// attemptLog records when each attempt at an order's events ran, to show
// that two never overlapped, and what each one's fenced write returned.
type attemptLog struct {
	mu       sync.Mutex
	active   int
	overlaps int
	starts   []time.Time
	ends     []time.Time
	writes   []error
}

func (l *attemptLog) begin() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active++
	if l.active > 1 {
		l.overlaps++
	}
	l.starts = append(l.starts, time.Now())
	return len(l.starts)
}

func (l *attemptLog) end(write error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.active--
	l.ends = append(l.ends, time.Now())
	l.writes = append(l.writes, write)
}

func (l *attemptLog) calls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.starts)
}

// describe writes the order's description through the attempt's fenced
// transaction: what an attempt's work looks like to the database.
func describe(ctx context.Context, db store.DB, e event.Event, text string) error {
	return e.Tx(ctx, db, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE orders SET description = $2 WHERE id = $1`, e.OrderID, text)
		return err
	})
}

func (w *bundle) description(t *testing.T, order uuid.UUID) string {
	t.Helper()
	var d string
	require.NoError(t, w.pool.QueryRow(context.Background(), `SELECT description FROM orders WHERE id = $1`, order).Scan(&d))
	return d
}

// A handler that ignores its cancelled context and outlives its claim:
// the claim runs out and the event is reclaimed, but the live worker does
// not start another attempt of that order while the old goroutine still
// runs here (other orders go on); when the old attempt finally returns, its
// write is refused by the claim fence and its verdict (a permanent failure
// that would fail the event) is discarded; only then does the next attempt
// run, and it decides the event.
func TestAHandlerThatOutlivesItsClaimNeverOverlapsTheNextAttemptAndItsOutcomeIsDiscarded(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	stuck := w.order(t)
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	var log attemptLog
	others := make(chan uuid.UUID, 10)
	h := event.HandlerFunc(func(ctx context.Context, e event.Event) error {
		if e.OrderID != stuck {
			others <- e.ID
			return nil
		}
		n := log.begin()
		if n == 1 {
			<-release // ignores ctx: runs on long after its timeout and its claim
			err := describe(context.Background(), w.pool, e, "written by the stale attempt")
			log.end(err)
			return event.Permanent(errors.New("the stale attempt's verdict"))
		}
		err := describe(ctx, w.pool, e, "written by attempt 2")
		log.end(err)
		return err
	})
	// The claim (timeout + grace) must outlast attempt 2's one write even on
	// a machine whose CPUs are busy with other work: with 200 ms it once
	// expired under attempt 2 too, and a third attempt ran.
	const timeout, grace, poll = time.Second, 500 * time.Millisecond, 50 * time.Millisecond
	n := startNode(t, w.pool, "node-a", nodeOptions{handler: h, worker: event.WorkerOptions{
		HandlerTimeout: timeout, LockGrace: grace, PollInterval: poll, MaxAttempts: 3,
		// Stop (in the cleanup) gives up on the stuck handler quickly.
		DrainTimeout: 50 * time.Millisecond,
	}})
	t.Cleanup(unblock) // runs before the node's stop: never leave the handler hanging
	waitLeader(t, 5*time.Second, n)

	e := w.insert(t, "order_paid", stuck)
	// The claim (timeout + grace) runs out while the handler still runs:
	// the event is reclaimed, its first attempt counted.
	var got store.Event
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got = w.event(c, e.ID)
		assert.Equal(c, store.EventPending, got.Status)
		assert.Equal(c, int32(1), got.Attempts)
	}, 10*time.Second, 5*time.Millisecond, "the expired claim was not reclaimed")
	require.Contains(t, got.LastError, "claim of node-a expired during attempt 1")
	require.Nil(t, got.ClaimToken)

	// Many poll rounds later the worker still has not handed the event out
	// again: its old handler is running in this process. Other orders are
	// handled meanwhile.
	other := w.insert(t, "order_paid", w.order(t))
	select {
	case id := <-others:
		require.Equal(t, other.ID, id)
	case <-time.After(5 * time.Second):
		t.Fatal("another order's event was not handled while one handler hung")
	}
	w.waitStatus(t, other.ID, store.EventDone, 5*time.Second)
	n.rounds.WaitNext(t, 5, "five claim rounds while the stale handler runs")
	require.Equal(t, 1, log.calls(), "no second attempt while the first one runs")
	got = w.event(t, e.ID)
	require.Equal(t, store.EventPending, got.Status)
	require.EqualValues(t, 1, got.Attempts)

	// The stale attempt returns: its write and its verdict are refused, and
	// the next attempt runs after it, not beside it.
	unblock()
	got = w.waitStatus(t, e.ID, store.EventDone, 5*time.Second)
	require.EqualValues(t, 2, got.Attempts)
	require.NotContains(t, got.LastError, "stale attempt's verdict", "the stale outcome was discarded")
	require.Contains(t, got.LastError, "claim of node-a expired during attempt 1")
	require.Equal(t, "written by attempt 2", w.description(t, stuck))

	log.mu.Lock()
	defer log.mu.Unlock()
	require.Zero(t, log.overlaps)
	require.Len(t, log.starts, 2)
	require.ErrorIs(t, log.writes[0], event.ErrClaimLost, "the stale attempt's transaction was fenced off")
	require.NoError(t, log.writes[1])
	require.False(t, log.starts[1].Before(log.ends[0]), "attempt 2 started after the stale one returned")
}

// The leader role is part of the fence: a handler whose node lost the
// event_worker lease (here it is taken over under its feet) commits
// nothing even while its claim has not run out, and the worker hands the
// event back without counting the attempt.
func TestAHandlerOfANodeThatLostItsLeaseCommitsNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	order := w.order(t)
	result := make(chan error, 1)
	h := event.HandlerFunc(func(ctx context.Context, e event.Event) error {
		_, err := w.pool.Exec(ctx, `UPDATE leader_leases SET holder = 'usurper', expires_at = now() + interval '1 hour'
			WHERE role = 'event_worker'`)
		if err != nil {
			return err
		}
		// Not ctx: the elector may notice the takeover and cancel the
		// attempt any moment now; the fence must refuse it either way.
		err = describe(context.Background(), w.pool, e, "written by a deposed leader")
		select {
		case result <- err:
		default:
			t.Errorf("a deposed leader ran a second attempt")
		}
		return err
	})
	// The elector renews only every 20 s, so it does not notice the
	// takeover while the test runs: the worker goes on believing it leads
	// and claiming, and only the claim's own check of the lease can stop
	// it.
	n := startNode(t, w.pool, "node-a", nodeOptions{handler: h, ttl: time.Minute, renew: 20 * time.Second})
	waitLeader(t, 5*time.Second, n)
	e := w.insert(t, "order_paid", order)
	select {
	case err := <-result:
		require.ErrorIs(t, err, event.ErrClaimLost)
	case <-time.After(5 * time.Second):
		t.Fatal("the handler did not run")
	}
	got := w.waitStatus(t, e.ID, store.EventPending, 5*time.Second)
	require.EqualValues(t, 0, got.Attempts, "handed back, not counted")
	require.Empty(t, w.description(t, order))
	// It claims nothing more in rounds it still runs as leader, as far as
	// it knows: the claim checks the lease as well.
	n.rounds.WaitNext(t, 3, "three claim rounds after the takeover")
	require.True(t, n.elector.IsLeader(), "the rounds ran while the node still believed it led")
	require.Equal(t, store.EventPending, w.event(t, e.ID).Status)
}

// A transaction of a handler called without a worker (an Event built by
// hand, as handler tests do) is not fenced.
func TestTxOfAnEventWithoutAClaimIsAPlainTransaction(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	order := w.order(t)
	require.NoError(t, describe(context.Background(), w.pool, event.Event{ID: uuid.New(), OrderID: order}, "by hand"))
	require.Equal(t, "by hand", w.description(t, order))
}
