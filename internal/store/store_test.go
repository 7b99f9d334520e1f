package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// txSetup is a pool on a migrated database plus a probe: whether an admin
// user of a given name exists, as seen from outside any transaction.
func txSetup(t *testing.T) (*pgxpool.Pool, func(name string) bool) {
	t.Helper()
	pool := migratedPool(t)
	t.Cleanup(func() {
		// Every test must hand its connection back, whatever happened.
		require.Zero(t, pool.Stat().AcquiredConns(), "a connection was not released")
	})
	exists := func(name string) bool {
		t.Helper()
		_, err := dbsqlc.New(pool).GetAdminByUsername(context.Background(), name)
		if errors.Is(store.MapError(err), store.ErrNotFound) {
			return false
		}
		require.NoError(t, err)
		return true
	}
	return pool, exists
}

func createAdmin(ctx context.Context, tx pgx.Tx, name string) error {
	_, err := dbsqlc.New(tx).CreateAdmin(ctx, dbsqlc.CreateAdminParams{Username: name, PasswordHash: "h"})
	return store.MapError(err)
}

func TestWithTxCommitsWhenFnSucceeds(t *testing.T) {
	t.Parallel()
	pool, exists := txSetup(t)
	ctx := context.Background()

	require.NoError(t, store.WithTx(ctx, pool, func(tx pgx.Tx) error {
		return createAdmin(ctx, tx, "committed")
	}))
	require.True(t, exists("committed"))
}

func TestWithTxRollsBackAndReturnsFnsError(t *testing.T) {
	t.Parallel()
	pool, exists := txSetup(t)
	ctx := context.Background()
	boom := errors.New("boom")

	err := store.WithTx(ctx, pool, func(tx pgx.Tx) error {
		if err := createAdmin(ctx, tx, "rolled-back"); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, boom, err, "fn's error comes back unchanged")
	require.False(t, exists("rolled-back"))
}

func TestWithTxRollsBackOnPanicAndRepanics(t *testing.T) {
	t.Parallel()
	pool, exists := txSetup(t)
	ctx := context.Background()

	require.PanicsWithValue(t, "kaboom", func() {
		_ = store.WithTx(ctx, pool, func(tx pgx.Tx) error {
			require.NoError(t, createAdmin(ctx, tx, "panicked"))
			panic("kaboom")
		})
	})
	require.False(t, exists("panicked"))
}

func TestWithTxRollsBackWhenTheContextIsCancelledMidTransaction(t *testing.T) {
	t.Parallel()
	pool, exists := txSetup(t)

	t.Run("FnIgnoresTheCancellation", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		err := store.WithTx(ctx, pool, func(tx pgx.Tx) error {
			if err := createAdmin(ctx, tx, "cancelled-quietly"); err != nil {
				return err
			}
			cancel() // the request is gone before fn returns
			return nil
		})
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, exists("cancelled-quietly"))
	})

	t.Run("FnFailsOnTheCancelledContext", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		err := store.WithTx(ctx, pool, func(tx pgx.Tx) error {
			if err := createAdmin(ctx, tx, "cancelled-first"); err != nil {
				return err
			}
			cancel()
			return createAdmin(ctx, tx, "cancelled-second")
		})
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, exists("cancelled-first"))
		require.False(t, exists("cancelled-second"))
	})

	t.Run("BeginOnACancelledContext", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		called := false
		err := store.WithTx(ctx, pool, func(pgx.Tx) error { called = true; return nil })
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, called)
	})
}

func TestWithTxOnATxUsesASavepoint(t *testing.T) {
	t.Parallel()
	pool, exists := txSetup(t)
	ctx := context.Background()
	inner := errors.New("inner")

	require.NoError(t, store.WithTx(ctx, pool, func(tx pgx.Tx) error {
		if err := createAdmin(ctx, tx, "outer"); err != nil {
			return err
		}
		err := store.WithTx(ctx, tx, func(sp pgx.Tx) error {
			if err := createAdmin(ctx, sp, "inner"); err != nil {
				return err
			}
			return inner
		})
		require.ErrorIs(t, err, inner)
		return nil
	}))
	require.True(t, exists("outer"))
	require.False(t, exists("inner"))
}

func TestWithTxMapsCommitErrors(t *testing.T) {
	t.Parallel()
	pool, _ := txSetup(t)
	ctx := context.Background()

	// A deferred unique check fails only at COMMIT.
	_, err := pool.Exec(ctx, `CREATE TABLE deferred_probe (k int UNIQUE DEFERRABLE INITIALLY DEFERRED)`)
	require.NoError(t, err)
	err = store.WithTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO deferred_probe VALUES (1), (1)`)
		return err
	})
	require.ErrorIs(t, err, store.ErrConflict)
	require.Equal(t, "deferred_probe_k_key", store.ConstraintOf(err))
}
