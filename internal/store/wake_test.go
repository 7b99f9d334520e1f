package store_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
)

// An event appended by paymentd in a transaction on a handle registered
// with WakeAfterCommit is inserted without the trigger's NOTIFY (whose
// lock at commit serialised every commit that queued an event) and wakes
// the worker through the handle's wake function once, after the commit:
// with WithTx and WithPipelinedTx alike, never for a rollback. Every other
// insert — on a handle not registered (or no longer), by hand — keeps the
// trigger's NOTIFY.
func TestAnEventAppendedByPaymentdWakesTheWorkerAfterItsCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// A pool of its own: the registration is the pool's, and the other
	// tests' inserts keep the trigger's NOTIFY.
	pool, err := pgxpool.NewWithConfig(ctx, b.pool.Config())
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	listen, err := pgx.ConnectConfig(ctx, b.pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { _ = listen.Close(context.Background()) })
	_, err = listen.Exec(ctx, `LISTEN paymentd_events`)
	require.NoError(t, err)
	notified := func() bool { // whether a NOTIFY arrives within 300 ms
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := listen.WaitForNotification(wctx)
		return err == nil
	}

	var order uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO orders (customer_id, total_amount, currency) VALUES ($1, 1.00, 'CNY') RETURNING id`,
		b.customerID).Scan(&order))
	var wakes atomic.Int32
	unregister := store.WakeAfterCommit(pool, func() { wakes.Add(1) })
	appendOne := func(tx pgx.Tx) error {
		before := wakes.Load()
		require.NoError(t, store.AppendEvent(ctx, tx, "order_paid", order, []byte(`{}`)))
		require.NoError(t, store.AppendEvents(ctx, tx, "order_provisioned", []uuid.UUID{order}, [][]byte{[]byte(`{}`)}))
		require.Equal(t, before, wakes.Load(), "nothing is woken before the commit")
		return nil
	}

	require.NoError(t, store.WithTx(ctx, pool, appendOne))
	require.Equal(t, int32(1), wakes.Load(), "one wake after the commit")
	require.False(t, notified(), "the trigger sent a NOTIFY from inside the transaction")

	require.NoError(t, store.WithPipelinedTx(ctx, pool, appendOne))
	require.Equal(t, int32(2), wakes.Load(), "one wake after the pipelined transaction's commit")
	require.False(t, notified(), "the trigger sent a NOTIFY from inside the pipelined transaction")

	planted := errors.New("rolled back")
	require.ErrorIs(t, store.WithTx(ctx, pool, func(tx pgx.Tx) error {
		require.NoError(t, appendOne(tx))
		return planted
	}), planted)
	require.Equal(t, int32(2), wakes.Load(), "a rollback wakes nobody")

	require.NoError(t, store.WithTx(ctx, pool, func(tx pgx.Tx) error { return nil }))
	require.Equal(t, int32(2), wakes.Load(), "a transaction without events wakes nobody")

	_, err = pool.Exec(ctx, `INSERT INTO events (event_type, order_id) VALUES ('order_paid', $1)`, order)
	require.NoError(t, err)
	require.True(t, notified(), "an insert by hand is notified by the trigger")

	unregister()
	require.NoError(t, store.WithTx(ctx, pool, func(tx pgx.Tx) error {
		return store.AppendEvent(ctx, tx, "order_paid", order, []byte(`{}`))
	}))
	require.True(t, notified(), "an unregistered handle's insert is notified by the trigger")
	require.Equal(t, int32(2), wakes.Load())
}
