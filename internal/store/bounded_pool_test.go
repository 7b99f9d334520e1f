package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
)

// exhaust takes every connection of pool until the test ends.
func exhaust(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var held []*pgxpool.Conn
	for range pool.Config().MaxConns {
		c, err := pool.Acquire(context.Background())
		require.NoError(t, err)
		held = append(held, c)
	}
	t.Cleanup(func() {
		for _, c := range held {
			c.Release()
		}
	})
}

func TestBoundedPoolAnswersPoolBusyWhenNoConnectionFreesInTime(t *testing.T) {
	t.Parallel()
	pool := migratedPool(t)
	db := store.NewBoundedPool(pool, 20*time.Millisecond)
	exhaust(t, pool)
	ctx := context.Background()

	_, err := db.Exec(ctx, "SELECT 1")
	require.ErrorIs(t, err, store.ErrPoolBusy)
	_, err = db.Query(ctx, "SELECT 1")
	require.ErrorIs(t, err, store.ErrPoolBusy)
	var n int
	require.ErrorIs(t, db.QueryRow(ctx, "SELECT 1").Scan(&n), store.ErrPoolBusy)
	err = store.WithTx(ctx, db, func(pgx.Tx) error { return nil })
	require.ErrorIs(t, err, store.ErrPoolBusy)
}

func TestBoundedPoolReportsTheCallersOwnEndNotPoolBusy(t *testing.T) {
	t.Parallel()
	pool := migratedPool(t)
	db := store.NewBoundedPool(pool, time.Hour)
	exhaust(t, pool)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := db.Exec(ctx, "SELECT 1")
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, store.ErrPoolBusy)
}

func TestBoundedPoolHandsEveryConnectionBack(t *testing.T) {
	t.Parallel()
	pool := migratedPool(t)
	db := store.NewBoundedPool(pool, time.Second)
	ctx := context.Background()

	_, err := db.Exec(ctx, "SELECT 1")
	require.NoError(t, err)

	rows, err := db.Query(ctx, "SELECT generate_series(1, 3)")
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	require.Equal(t, []int32{1, 2, 3}, got)

	// Read to the end without Close: released all the same.
	rows, err = db.Query(ctx, "SELECT 1")
	require.NoError(t, err)
	for rows.Next() {
	}
	require.NoError(t, rows.Err())

	var n int
	require.NoError(t, db.QueryRow(ctx, "SELECT 7").Scan(&n))
	require.Equal(t, 7, n)
	require.ErrorIs(t, db.QueryRow(ctx, "SELECT 1 WHERE false").Scan(&n), pgx.ErrNoRows)

	require.NoError(t, store.WithTx(ctx, db, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT 1")
		return err
	}))
	require.Error(t, store.WithTx(ctx, db, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT nonsense")
		return err
	}))

	// A batch, and a batch that begins a transaction: its connection is
	// held until the transaction ends.
	b := &pgx.Batch{}
	b.Queue("SELECT 1")
	require.NoError(t, db.SendBatch(ctx, b).Close())
	b = &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue("SELECT 1")
	br := db.SendBatch(ctx, b)
	tx := br.Tx()
	require.NotNil(t, tx)
	require.NoError(t, br.Close())
	require.EqualValues(t, 1, pool.Stat().AcquiredConns(), "the transaction holds its connection")
	require.NoError(t, tx.Commit(ctx))
	require.Zero(t, pool.Stat().AcquiredConns(), "every connection was released")
}
