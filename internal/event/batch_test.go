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

// batcher is a BatchHandler: each batch writes the descriptions of its
// orders and completes its events in one fenced transaction (TxAll,
// CompleteAll), except the order in fail, whose attempt fails alone.
type batcher struct {
	pool store.DB
	fail uuid.UUID

	mu      sync.Mutex
	batches []int
}

func (b *batcher) Handle(ctx context.Context, e event.Event) error {
	return b.HandleBatch(ctx, []event.Event{e})[0]
}

func (b *batcher) HandleBatch(ctx context.Context, es []event.Event) []error {
	b.mu.Lock()
	b.batches = append(b.batches, len(es))
	b.mu.Unlock()
	errs := make([]error, len(es))
	var ok []event.Event
	for i, e := range es {
		if e.OrderID == b.fail {
			errs[i] = errors.New("the provider refused this one")
			continue
		}
		ok = append(ok, e)
	}
	err := event.TxAll(ctx, b.pool, ok, func(tx pgx.Tx) error {
		for _, e := range ok {
			if _, err := tx.Exec(ctx, `UPDATE orders SET description = 'batched' WHERE id = $1`, e.OrderID); err != nil {
				return err
			}
		}
		return event.CompleteAll(ctx, tx, ok)
	})
	for i, e := range es {
		if e.OrderID != b.fail {
			errs[i] = err
		}
	}
	return errs
}

func (b *batcher) largest() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, s := range b.batches {
		n = max(n, s)
	}
	return n
}

// The events of one claim round whose handler batches go to it together;
// it completes them in one transaction, and the one event whose attempt
// it fails is failed alone: the batch's success is not the failed
// event's.
func TestABatchHandlerCompletesItsRoundInOneTransactionAndFailsOnlyTheEventThatFailed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	orders := make([]uuid.UUID, 6)
	events := make([]store.Event, 6)
	for i := range orders {
		orders[i] = w.order(t)
		events[i] = w.insert(t, "order_paid", orders[i])
	}
	h := &batcher{pool: w.pool, fail: orders[2]}
	n := startNode(t, w.pool, "node-a", nodeOptions{handler: h, worker: event.WorkerOptions{
		MaxAttempts: 1, BatchSize: 8, Concurrency: 8,
	}})
	waitLeader(t, 5*time.Second, n)

	var doneAt []time.Time
	for i, e := range events {
		if orders[i] == h.fail {
			failed := w.waitStatus(t, e.ID, store.EventFailed, 10*time.Second)
			require.Contains(t, failed.LastError, "the provider refused this one")
			require.NotEqual(t, "batched", w.description(t, orders[i]))
			continue
		}
		done := w.waitStatus(t, e.ID, store.EventDone, 10*time.Second)
		require.Equal(t, "batched", w.description(t, orders[i]))
		doneAt = append(doneAt, done.UpdatedAt)
	}
	require.Equal(t, 6, h.largest(), "the six events were claimed in one round and handed over together")
	for _, at := range doneAt {
		require.True(t, at.Equal(doneAt[0]), "the five were completed in one transaction (one now()): %v", doneAt)
	}
}

// A batch transaction commits only while every claim of the batch holds:
// when one of them is lost (reclaimed and claimed again elsewhere, here
// its token replaced), nothing of the transaction commits — not the
// writes of the events whose claims still hold either — and TxAll says
// ErrClaimLost. The worker then hands those events back and discards the
// outcome of the lost one.
func TestABatchTransactionCommitsNothingWhenOneOfItsClaimsIsLost(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	orders := make([]uuid.UUID, 3)
	events := make([]store.Event, 3)
	for i := range orders {
		orders[i] = w.order(t)
		events[i] = w.insert(t, "order_paid", orders[i])
	}
	stolen := events[1].ID
	type outcome struct {
		size int
		err  error
	}
	first := make(chan outcome, 1)
	var once sync.Once
	h := batchFunc(func(ctx context.Context, es []event.Event) []error {
		var err error
		once.Do(func() {
			// Another claim took this event meanwhile.
			_, serr := w.pool.Exec(ctx, `UPDATE events SET claim_token = gen_random_uuid() WHERE id = $1`, stolen)
			require.NoError(t, serr)
			err = event.TxAll(ctx, w.pool, es, func(tx pgx.Tx) error {
				for _, e := range es {
					if _, err := tx.Exec(ctx, `UPDATE orders SET description = 'written under a lost claim' WHERE id = $1`, e.OrderID); err != nil {
						return err
					}
				}
				return nil // the worker would complete them
			})
			first <- outcome{len(es), err}
		})
		errs := make([]error, len(es))
		for i := range errs {
			errs[i] = err
		}
		return errs
	})
	n := startNode(t, w.pool, "node-a", nodeOptions{handler: h, worker: event.WorkerOptions{
		MaxAttempts: 3, BatchSize: 8, Concurrency: 8,
	}})
	waitLeader(t, 5*time.Second, n)

	var got outcome
	select {
	case got = <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("no batch ran")
	}
	require.Equal(t, 3, got.size)
	require.ErrorIs(t, got.err, event.ErrClaimLost)
	for _, o := range orders {
		require.NotEqual(t, "written under a lost claim", w.description(t, o), "order %s", o)
	}
	// The two whose claims held were handed back (not counted) and done by
	// the next round; the stolen one's outcome was discarded: it stays
	// with the claim that took it.
	for _, e := range events {
		if e.ID == stolen {
			continue
		}
		done := w.waitStatus(t, e.ID, store.EventDone, 10*time.Second)
		require.EqualValues(t, 1, done.Attempts, "the attempt under the lost batch was not counted")
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		e := w.event(c, stolen)
		assert.Equal(c, store.EventProcessing, e.Status)
	}, 5*time.Second, 10*time.Millisecond)
}

// batchFunc is a BatchHandler of a function.
type batchFunc func(ctx context.Context, es []event.Event) []error

func (f batchFunc) Handle(ctx context.Context, e event.Event) error {
	return f(ctx, []event.Event{e})[0]
}

func (f batchFunc) HandleBatch(ctx context.Context, es []event.Event) []error { return f(ctx, es) }
