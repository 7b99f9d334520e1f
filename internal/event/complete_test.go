package event_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/store"
)

// A handler may complete its event in its own last transaction (one commit
// instead of two): the event is done exactly when that transaction
// commits. Completed and rolled back, it is not done: the attempt fails
// as any other. Completed and then an error: done all the same.
func TestAHandlerCompletesItsEventInItsLastTransaction(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	committed, rolledBack, erredAfter := w.order(t), w.order(t), w.order(t)
	h := event.HandlerFunc(func(ctx context.Context, e event.Event) error {
		switch e.OrderID {
		case committed:
			return e.Tx(ctx, w.pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `UPDATE orders SET description = 'done here' WHERE id = $1`, e.OrderID); err != nil {
					return err
				}
				return e.Complete(ctx, tx)
			})
		case rolledBack:
			err := e.Tx(ctx, w.pool, func(tx pgx.Tx) error {
				if err := e.Complete(ctx, tx); err != nil {
					return err
				}
				return errors.New("the write after it failed")
			})
			return err
		default: // erredAfter
			if err := e.Tx(ctx, w.pool, func(tx pgx.Tx) error { return e.Complete(ctx, tx) }); err != nil {
				return err
			}
			return errors.New("a bug after completing")
		}
	})
	n := startNode(t, w.pool, "node-a", nodeOptions{handler: h, worker: event.WorkerOptions{MaxAttempts: 1}})
	waitLeader(t, 5*time.Second, n)

	ok := w.insert(t, "order_paid", committed)
	bad := w.insert(t, "order_paid", rolledBack)
	odd := w.insert(t, "order_paid", erredAfter)
	done := w.waitStatus(t, ok.ID, store.EventDone, 5*time.Second)
	require.Nil(t, done.ClaimToken)
	require.Equal(t, "done here", w.description(t, committed))
	failed := w.waitStatus(t, bad.ID, store.EventFailed, 5*time.Second)
	require.Contains(t, failed.LastError, "the write after it failed", "the rolled-back completion does not count")
	w.waitStatus(t, odd.ID, store.EventDone, 5*time.Second)
}

// Outside a worker's attempt (a handler called directly), Complete does
// nothing and Tx is a plain transaction.
func TestCompleteOutsideAnAttemptDoesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	e := event.Event{OrderID: w.order(t)}
	err := e.Tx(context.Background(), w.pool, func(tx pgx.Tx) error { return e.Complete(context.Background(), tx) })
	require.NoError(t, err)
}
