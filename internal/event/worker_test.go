package event_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testdb.Main(m)) }

// Three instances on one database, events inserted while they run: every
// event is handled exactly once, the events of one order one after another
// in their order, different orders side by side.
func TestThreeWorkersHandleEveryEventExactlyOnceAndOrdersInSequence(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	rec := newRecorder(15 * time.Millisecond)
	opts := nodeOptions{handler: rec}
	nodes := []*node{startNode(t, w.pool, "node-a", opts), startNode(t, w.pool, "node-b", opts), startNode(t, w.pool, "node-c", opts)}
	waitLeader(t, 5*time.Second, nodes...)

	const orders, perOrder = 20, 3
	want := map[uuid.UUID][]uuid.UUID{}
	var all []uuid.UUID
	types := []string{"order_paid", "order_provisioned", "order_cancelled"}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, orders)
	for range orders {
		id := w.order(t)
		wg.Go(func() {
			for i := range perOrder {
				e, err := w.tryInsert(types[i], id)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				want[id] = append(want[id], e.ID)
				all = append(all, e.ID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, orders*perOrder, w.countStatus(c, store.EventDone))
	}, 30*time.Second, 20*time.Millisecond)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, id := range all {
		require.Equal(t, 1, rec.calls[id], "event %s handled exactly once", id)
	}
	require.Zero(t, rec.overlaps, "two events of one order never run at the same time")
	for order, ids := range want {
		require.Equal(t, ids, rec.byOrder[order], "order %s: events handled in the order they were queued", order)
	}
	require.Greater(t, rec.maxOrdersAtATime, 1, "events of different orders ran side by side")
	t.Logf("max handlers at once %d, max orders at once %d", rec.maxRunning, rec.maxOrdersAtATime)
}

// Many events of few orders, handled slowly with room for 8 at a time: the
// handler sees overlapping executions of different orders and never two
// of the same order.
func TestEventsOfOneOrderNeverOverlapWhileDifferentOrdersDo(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	rec := newRecorder(30 * time.Millisecond)
	// Every event is queued before the worker starts, so its first claims
	// see all four orders: inserted while it ran, a slow insert on a busy
	// machine let the first orders finish before the last one's events
	// existed, and fewer than four ran at once.
	const orders, perOrder = 4, 6
	for range orders {
		id := w.order(t)
		for range perOrder {
			w.insert(t, "order_paid", id)
		}
	}
	startNode(t, w.pool, "node-a", nodeOptions{handler: rec, worker: event.WorkerOptions{Concurrency: 8, BatchSize: 10}})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, orders*perOrder, w.countStatus(c, store.EventDone))
	}, 30*time.Second, 20*time.Millisecond)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Zero(t, rec.overlaps)
	require.Equal(t, orders, rec.maxOrdersAtATime, "all four orders ran at once")
	require.LessOrEqual(t, rec.maxRunning, orders, "at most one event per order at a time")
}

// With a 10 s poll, an inserted event is handled well under a second
// later: NOTIFY paymentd_events wakes the leader at the insert's commit.
func TestNotifyWakesTheWorkerLongBeforeThePoll(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	rec := newRecorder(0)
	n := startNode(t, w.pool, "node-a", nodeOptions{handler: rec, worker: event.WorkerOptions{PollInterval: 10 * time.Second}})
	waitLeader(t, 5*time.Second, n)
	// Past the first round at the start of leadership, which would find
	// an event inserted before it without any notification.
	n.rounds.Wait(t, 1, "the first claim round")

	for range 3 {
		order := w.order(t)
		start := time.Now()
		e := w.insert(t, "order_paid", order)
		select {
		case id := <-rec.handled:
			require.Equal(t, e.ID, id)
		case <-time.After(5 * time.Second):
			// Half the poll: only the notification can have woken it. The
			// usual figure is milliseconds (logged); the rest is room for
			// a busy machine.
			t.Fatal("the event was not handled within 5 s (the poll is 10 s)")
		}
		took := time.Since(start)
		t.Logf("insert → handled in %s (poll 10s)", took.Round(100*time.Microsecond))
	}
}

// Without a listener the poll still finds the event.
func TestPollingAloneStillHandlesEvents(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	rec := newRecorder(0)
	startNode(t, w.pool, "node-a", nodeOptions{handler: rec, noListener: true, worker: event.WorkerOptions{PollInterval: 100 * time.Millisecond}})
	e := w.insert(t, "order_paid", w.order(t))
	w.waitStatus(t, e.ID, store.EventDone, 5*time.Second)
}

func TestPanickingHandlerIsRetriedAndFailedAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var calls atomic.Int32
	h := event.HandlerFunc(func(context.Context, event.Event) error {
		calls.Add(1)
		panic("boom")
	})
	startNode(t, w.pool, "node-a", nodeOptions{handler: h, worker: event.WorkerOptions{MaxAttempts: 3}})
	e := w.insert(t, "order_paid", w.order(t))
	got := w.waitStatus(t, e.ID, store.EventFailed, 10*time.Second)
	require.EqualValues(t, 3, got.Attempts)
	require.EqualValues(t, 3, calls.Load())
	require.Contains(t, got.LastError, "handler panicked: boom")
	require.Nil(t, got.LockedBy)
}

func TestPanicOnceThenSuccessEndsDone(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var calls atomic.Int32
	h := event.HandlerFunc(func(context.Context, event.Event) error {
		if calls.Add(1) == 1 {
			panic("first time")
		}
		return nil
	})
	startNode(t, w.pool, "node-a", nodeOptions{handler: h})
	e := w.insert(t, "order_paid", w.order(t))
	got := w.waitStatus(t, e.ID, store.EventDone, 10*time.Second)
	require.EqualValues(t, 2, got.Attempts)
	require.Contains(t, got.LastError, "first time", "the last error stays visible")
}

// A handler that runs past HandlerTimeout has its context cancelled and
// the attempt fails (retryable); the next attempt may succeed.
func TestHandlerThatTimesOutIsRetried(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var calls atomic.Int32
	h := event.HandlerFunc(func(ctx context.Context, _ event.Event) error {
		if calls.Add(1) == 1 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	})
	startNode(t, w.pool, "node-a", nodeOptions{handler: h, worker: event.WorkerOptions{HandlerTimeout: 150 * time.Millisecond}})
	e := w.insert(t, "order_paid", w.order(t))
	got := w.waitStatus(t, e.ID, store.EventDone, 10*time.Second)
	require.EqualValues(t, 2, got.Attempts)
	require.Contains(t, got.LastError, "handler timed out after 150ms")
}

func TestHandlerThatAlwaysTimesOutEndsFailed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	h := event.HandlerFunc(func(ctx context.Context, _ event.Event) error {
		<-ctx.Done()
		return ctx.Err()
	})
	startNode(t, w.pool, "node-a", nodeOptions{handler: h, worker: event.WorkerOptions{HandlerTimeout: 50 * time.Millisecond, MaxAttempts: 2}})
	e := w.insert(t, "order_paid", w.order(t))
	got := w.waitStatus(t, e.ID, store.EventFailed, 10*time.Second)
	require.EqualValues(t, 2, got.Attempts)
	require.Contains(t, got.LastError, "timed out")
}

func TestPermanentErrorFailsAtOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var calls atomic.Int32
	h := event.HandlerFunc(func(context.Context, event.Event) error {
		calls.Add(1)
		return event.Permanent(errors.New("payload is garbage"))
	})
	startNode(t, w.pool, "node-a", nodeOptions{handler: h, worker: event.WorkerOptions{MaxAttempts: 8}})
	e := w.insert(t, "order_paid", w.order(t))
	got := w.waitStatus(t, e.ID, store.EventFailed, 5*time.Second)
	require.EqualValues(t, 1, got.Attempts)
	require.EqualValues(t, 1, calls.Load())
	require.Equal(t, "payload is garbage", got.LastError)
}

// A failing event holds up the later events of its order (they must run
// in order), and only those.
func TestAFailingEventHoldsBackItsOrderOnly(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	stuck := w.order(t)
	// The stuck order's first event fails, and its first attempt fails
	// only once the test has looked: a busy machine cannot run all three
	// attempts before the look (it once did, with 50 ms between them).
	looked := make(chan struct{})
	h := event.HandlerFunc(func(ctx context.Context, e event.Event) error {
		if e.OrderID == stuck && e.Type == "order_paid" {
			select {
			case <-looked:
			case <-ctx.Done():
			}
			return errors.New("provider down")
		}
		return nil
	})
	startNode(t, w.pool, "node-a", nodeOptions{handler: h, worker: event.WorkerOptions{MaxAttempts: 3, RetryBase: 50 * time.Millisecond, RetryMax: 50 * time.Millisecond}})
	first := w.insert(t, "order_paid", stuck)
	second := w.insert(t, "order_provisioned", stuck)
	other := w.insert(t, "order_paid", w.order(t))

	w.waitStatus(t, other.ID, store.EventDone, 5*time.Second)
	require.Contains(t, []string{store.EventPending, store.EventProcessing}, w.event(t, first.ID).Status, "the first is not through")
	require.Equal(t, store.EventPending, w.event(t, second.ID).Status, "waits for the earlier event of its order")
	close(looked)
	w.waitStatus(t, first.ID, store.EventFailed, 5*time.Second)
	// The earlier event is failed, not pending: the later one may go.
	w.waitStatus(t, second.ID, store.EventDone, 5*time.Second)
}

// A processing event whose claim expired (its worker died) is reclaimed
// and handled; the dead worker's attempt counts.
func TestExpiredClaimOfADeadWorkerIsReclaimed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	e := w.insert(t, "order_paid", w.order(t))
	_, err := w.pool.Exec(context.Background(), `UPDATE events SET status = 'processing', locked_by = 'ghost',
		locked_until = now() - interval '1 second', attempts = 1 WHERE id = $1`, e.ID)
	require.NoError(t, err)
	rec := newRecorder(0)
	startNode(t, w.pool, "node-a", nodeOptions{handler: rec})
	got := w.waitStatus(t, e.ID, store.EventDone, 5*time.Second)
	require.EqualValues(t, 2, got.Attempts)
	require.Contains(t, got.LastError, "claim of ghost expired during attempt 1")
	require.Equal(t, 1, rec.callsOf(e.ID))
}

// A claim that has not expired is left alone, and so are the later events
// of its order.
func TestAClaimStillValidIsNotTakenOver(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	order := w.order(t)
	e := w.insert(t, "order_paid", order)
	later := w.insert(t, "order_provisioned", order)
	_, err := w.pool.Exec(context.Background(), `UPDATE events SET status = 'processing', locked_by = 'other',
		locked_until = now() + interval '1 hour', attempts = 1 WHERE id = $1`, e.ID)
	require.NoError(t, err)
	rec := newRecorder(0)
	n := startNode(t, w.pool, "node-a", nodeOptions{handler: rec})
	waitLeader(t, 5*time.Second, n)
	// Rounds run only while leading; the first of a session looks for
	// expired claims before it claims, and every one of them came after
	// the claim above was made.
	n.rounds.Wait(t, 3, "three claim rounds")
	require.Equal(t, store.EventProcessing, w.event(t, e.ID).Status)
	require.Equal(t, store.EventPending, w.event(t, later.ID).Status)
	require.Zero(t, rec.callsOf(later.ID))
}

// kill -9 of the leader: another instance takes over within one TTL, and
// the events the dead one had claimed are reclaimed when their lease ends
// and handled; nothing is lost, and the dead one's handler, when it finally
// returns, commits nothing and its outcome is refused.
func TestKilledLeaderHandsOverAndItsEventsAreReclaimed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const ttl = time.Second
	block := make(chan struct{})
	staleWrite := make(chan error, 1)
	var blocked sync.Map
	h := event.HandlerFunc(func(_ context.Context, e event.Event) error {
		if _, again := blocked.LoadOrStore(e.ID, true); !again {
			// The first attempt hangs in the leader that will die, and
			// (like a dead process) never reports back in time. When it
			// does, its transaction is fenced off.
			<-block
			staleWrite <- describe(context.Background(), w.pool, e, "written by the dead leader")
			return errors.New("died")
		}
		return nil
	})
	opts := nodeOptions{ttl: ttl, renew: 250 * time.Millisecond, handler: h,
		worker: event.WorkerOptions{HandlerTimeout: 500 * time.Millisecond, LockGrace: 200 * time.Millisecond}}
	nodes := []*node{startNode(t, w.pool, "node-a", opts), startNode(t, w.pool, "node-b", opts)}
	// Registered after the nodes, so it runs before their stop: a failed
	// assertion must not leave the dead leader's handler hanging.
	var unblock sync.Once
	release := func() { unblock.Do(func() { close(block) }) }
	t.Cleanup(release)
	waitLeader(t, 5*time.Second, nodes...)
	order := w.order(t)
	e := w.insert(t, "order_paid", order)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, store.EventProcessing, w.event(c, e.ID).Status)
	}, 5*time.Second, 5*time.Millisecond)
	// The node to kill is the one whose worker claimed the event: the
	// leader found above, unless a busy machine delayed its renewal past
	// the 1 s TTL and the other node claimed it as the next leader. (Killing
	// the first leader then left the claim's handler hanging in the node
	// that lived, which kept the event's order to itself: pending for good.)
	claimant := w.event(t, e.ID).LockedBy
	require.NotNil(t, claimant)
	var leader *node
	for _, n := range nodes {
		if n.name == *claimant {
			leader = n
		}
	}
	require.NotNil(t, leader, "the event is claimed by %s, not one of the nodes", *claimant)

	// The hand-over is measured on the database clock, from just before
	// the kill to the successor's election: the harness's polling is not
	// part of it.
	ctx := context.Background()
	var killedAt time.Time
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT now()`).Scan(&killedAt))
	old, err := store.Q(w.pool).LeaderLeaseRemaining(ctx, cluster.RoleEventWorker)
	require.NoError(t, err)
	require.Equal(t, leader.name, old.Holder, "the node that claimed the event still leads when it is killed")
	leader.kill()
	var next *node
	for _, n := range nodes {
		if n != leader {
			next = n
		}
	}
	waitLeader(t, 10*ttl, next)
	now, err := store.Q(w.pool).LeaderLeaseRemaining(ctx, cluster.RoleEventWorker)
	require.NoError(t, err)
	require.Equal(t, next.name, now.Holder)
	took := now.ElectedAt.Sub(killedAt)
	t.Logf("leadership moved %s after the kill, %s after the expiry of the lease as read before the kill (TTL %s)",
		took.Round(time.Millisecond), now.ElectedAt.Sub(old.ExpiresAt).Round(time.Millisecond), ttl)
	// The dead leader renewed at most a renew interval before the kill, so
	// its lease ran out at most one TTL after it; the follower bids 5 ms
	// after the expiry it read from the database, which takes milliseconds
	// (logged). The bound only catches a follower that waits for something
	// else (a full TTL of its own, a poll): on a machine whose CPUs are
	// busy with other work the bid's wake-up can be late by far more than
	// a few hundred milliseconds, and that is not a bug.
	require.Less(t, took, 3*ttl, "taken over soon after the dead leader's lease ran out")
	require.False(t, now.ElectedAt.Before(old.ExpiresAt), "not before the dead leader's lease ran out")
	got := w.waitStatus(t, e.ID, store.EventDone, 10*time.Second)
	require.EqualValues(t, 2, got.Attempts, "the dead leader's attempt counts")
	require.Contains(t, got.LastError, "claim of "+leader.name+" expired", "the dead leader's claim, whichever node was elected first")
	release() // the dead one's handler returns; its transaction and outcome are refused
	select {
	case err := <-staleWrite:
		require.ErrorIs(t, err, event.ErrClaimLost)
	case <-time.After(5 * time.Second):
		t.Fatal("the dead leader's handler did not return")
	}
	// Its attempt, the only one it made, has ended: its outcome was
	// written or refused by now.
	leader.attempts.Wait(t, 1, "the dead leader's attempt to end")
	require.Equal(t, store.EventDone, w.event(t, e.ID).Status)
	require.NotContains(t, w.event(t, e.ID).LastError, "died")
	require.Empty(t, w.description(t, order))
}

// A graceful stop of the leader resigns; the next instance consumes at once.
func TestGracefulStopOfTheLeaderHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	rec := newRecorder(0)
	// Renewing (and a follower bidding) every 100 s and polling for events
	// every 100 s: only the resignation's notification can make the
	// hand-over and the first event take under 10 s each, even on a busy
	// machine.
	opts := nodeOptions{ttl: 5 * time.Minute, renew: 100 * time.Second, handler: rec, worker: event.WorkerOptions{PollInterval: 100 * time.Second}}
	nodes := []*node{startNode(t, w.pool, "node-a", opts), startNode(t, w.pool, "node-b", opts)}
	leader := waitLeader(t, 5*time.Second, nodes...)
	start := time.Now()
	leader.stop()
	var next *node
	for _, n := range nodes {
		if n != leader {
			next = n
		}
	}
	waitLeader(t, 10*time.Second, next)
	e := w.insert(t, "order_paid", w.order(t))
	select {
	case id := <-rec.handled:
		require.Equal(t, e.ID, id)
	case <-time.After(10 * time.Second):
		t.Fatal("the new leader did not handle the event")
	}
	t.Logf("graceful hand-over and first event in %s", time.Since(start).Round(time.Millisecond))
}

// Stop lets a running handler finish within DrainTimeout; past it, the
// handler is cancelled and its event goes back to pending without the
// attempt counting.
func TestStopHandsARunningEventBackWithoutCountingTheAttempt(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	started := make(chan struct{}, 1)
	h := event.HandlerFunc(func(ctx context.Context, _ event.Event) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	n := startNode(t, w.pool, "node-a", nodeOptions{handler: h, worker: event.WorkerOptions{DrainTimeout: 100 * time.Millisecond}})
	e := w.insert(t, "order_paid", w.order(t))
	<-started
	n.stop()
	got := w.event(t, e.ID)
	require.Equal(t, store.EventPending, got.Status)
	require.EqualValues(t, 0, got.Attempts)
	require.Nil(t, got.LockedBy)
}

func TestEventWithoutAHandlerFailsAfterItsAttempts(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	startNode(t, w.pool, "node-a", nodeOptions{worker: event.WorkerOptions{MaxAttempts: 2}})
	e := w.insert(t, "order_paid", w.order(t))
	got := w.waitStatus(t, e.ID, store.EventFailed, 5*time.Second)
	require.EqualValues(t, 2, got.Attempts)
	require.Equal(t, `no handler registered for event type "order_paid"`, got.LastError)
}

func TestBackoffDoublesWithJitterUpToTheCap(t *testing.T) {
	t.Parallel()
	base, capped := 10*time.Second, 30*time.Minute
	for _, tc := range []struct {
		attempt  int
		jitter   float64
		min, max time.Duration
	}{
		{1, 0, 5 * time.Second, 5 * time.Second},
		{1, 0.999999, 5 * time.Second, 10 * time.Second},
		{2, 0, 10 * time.Second, 10 * time.Second},
		{3, 0.5, 30 * time.Second, 30 * time.Second},
		{8, 0, 640 * time.Second, 640 * time.Second},
		{20, 0, 15 * time.Minute, 15 * time.Minute},
		{20, 0.999999, 15 * time.Minute, 30 * time.Minute},
		{0, 0, 5 * time.Second, 5 * time.Second},
	} {
		got := event.Backoff(tc.attempt, base, capped, tc.jitter)
		require.GreaterOrEqual(t, got, tc.min, "attempt %d", tc.attempt)
		require.LessOrEqual(t, got, tc.max, "attempt %d", tc.attempt)
	}
}
