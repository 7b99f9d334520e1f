package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// Every kind MapError knows arrives mapped through Q, by each way a
// generated query reads its answer: a row's Scan (:one), the rows' Err
// (:many) and Exec's error (:exec, :execrows).
func TestQMapsEveryKindOfError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	q := store.Q(b.pool)
	admin, err := q.CreateAdmin(ctx, dbsqlc.CreateAdminParams{Username: "root", PasswordHash: "h"})
	require.NoError(t, err)
	pay, err := q.InsertPayment(ctx, b.pendingPayment())
	require.NoError(t, err)

	// locked runs fn on a second transaction while a first one holds the
	// admin's and the payment's rows, fn's waiting for a lock cut to 50 ms.
	locked := func(fn func(q store.Queries) error) error {
		var fnErr error
		require.NoError(t, store.WithTx(ctx, b.pool, func(holder pgx.Tx) error {
			if _, err := store.Q(holder).GetPaymentForUpdate(ctx, pay.ID); err != nil {
				return err
			}
			if err := store.Q(holder).LockAdminUsers(ctx); err != nil {
				return err
			}
			tx, err := b.pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { require.NoError(t, tx.Rollback(ctx)) }()
			_, err = tx.Exec(ctx, `SET LOCAL lock_timeout = '50ms'`)
			require.NoError(t, err)
			fnErr = fn(store.Q(tx))
			return nil
		}))
		return fnErr
	}

	cases := []struct {
		name string
		kind error
		run  func() error
	}{
		{"not found, a row's Scan", store.ErrNotFound, func() error {
			_, err := q.GetPayment(ctx, uuid.New())
			return err
		}},
		{"conflict, a row's Scan", store.ErrConflict, func() error {
			_, err := q.CreateAdmin(ctx, dbsqlc.CreateAdminParams{Username: "root", PasswordHash: "h"})
			return err
		}},
		{"conflict, Exec", store.ErrConflict, func() error {
			code := dbsqlc.InsertAdminRecoveryCodeParams{AdminID: admin.ID, CodeHash: make([]byte, 32), CreatedAt: time.Now()}
			if err := q.InsertAdminRecoveryCode(ctx, code); err != nil {
				return err
			}
			return q.InsertAdminRecoveryCode(ctx, code)
		}},
		{"check violation, a row's Scan", store.ErrCheckViolation, func() error {
			p := b.pendingPayment()
			p.Amount, p.Status = money.MustParse("-1.00"), "failed"
			_, err := q.InsertPayment(ctx, p)
			return err
		}},
		{"foreign key violation, a row's Scan", store.ErrForeignKeyViolation, func() error {
			p := b.pendingPayment()
			p.OrderID = ptr(uuid.New())
			_, err := q.InsertPayment(ctx, p)
			return err
		}},
		{"not null violation, a row's Scan", store.ErrNotNullViolation, func() error {
			_, err := q.InsertSession(ctx, dbsqlc.InsertSessionParams{AdminID: admin.ID}) // nil ID: NULL
			return err
		}},
		{"invalid value, a row's Scan", store.ErrInvalidValue, func() error {
			_, err := q.CreateAdmin(ctx, dbsqlc.CreateAdminParams{Username: "nul\x00byte", PasswordHash: "h"})
			return err
		}},
		{"lock not available, the rows' Err", store.ErrLockNotAvailable, func() error {
			return locked(func(q store.Queries) error {
				_, err := q.FailPendingPayments(ctx, dbsqlc.FailPendingPaymentsParams{ID: &pay.ID, FailureReason: "x", UpdatedAt: time.Now()})
				return err
			})
		}},
		{"lock not available, Exec", store.ErrLockNotAvailable, func() error {
			return locked(func(q store.Queries) error {
				return q.SetAdminLastLogin(ctx, dbsqlc.SetAdminLastLoginParams{ID: admin.ID, LastLoginAt: ptr(time.Now())})
			})
		}},
		{"lock not available, :execrows", store.ErrLockNotAvailable, func() error {
			return locked(func(q store.Queries) error {
				_, err := q.ResetAdminSecondFactorFailures(ctx, admin.ID)
				return err
			})
		}},
		{"retryable, a row's Scan", store.ErrRetryable, func() error {
			// Under REPEATABLE READ, locking a row another transaction
			// changed after the snapshot is a serialization failure.
			tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			if _, err := store.Q(tx).GetPayment(ctx, pay.ID); err != nil {
				return err
			}
			_, err = b.pool.Exec(ctx, `UPDATE payments SET return_url = 'changed' WHERE id = $1`, pay.ID)
			require.NoError(t, err)
			_, err = store.Q(tx).GetPaymentForUpdate(ctx, pay.ID)
			return err
		}},
		{"unavailable, a row's Scan", store.ErrUnavailable, func() error {
			_, err := store.Q(terminated(t, b)).GetPayment(ctx, pay.ID)
			return err
		}},
		{"unavailable, Query", store.ErrUnavailable, func() error {
			_, err := store.Q(terminated(t, b)).ListPaymentRefunds(ctx, pay.ID)
			return err
		}},
		{"unavailable, Exec", store.ErrUnavailable, func() error {
			return store.Q(terminated(t, b)).LockAdminUsers(ctx)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run()
			require.ErrorIs(t, err, tc.kind)
			if !errors.Is(err, store.ErrNotFound) {
				var se *store.Error
				require.ErrorAs(t, err, &se, "mapped into a *store.Error")
			}
		})
	}
}

// terminated is a connection whose server process an administrator
// ended (pg_terminate_backend): its next statement meets the server's
// FATAL 57P01.
func terminated(t *testing.T, b *bundle) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, b.pool.Config().ConnConfig)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(ctx) })
	var ended bool
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT pg_terminate_backend($1, 5000)`, conn.PgConn().PID()).Scan(&ended))
	require.True(t, ended)
	return conn
}

// Q maps on every executor: a transaction, a pipelined transaction (its
// first statement going with BEGIN, in a batch) and queries moved onto a
// transaction with WithTx.
func TestQMapsOnEveryExecutor(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	missing := uuid.New()

	require.NoError(t, store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := store.Q(tx).GetPayment(ctx, missing)
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = store.Q(b.pool).WithTx(tx).GetOrder(ctx, missing)
		require.ErrorIs(t, err, store.ErrNotFound)
		return nil
	}))

	// A pipelined transaction's first statement goes with BEGIN: a row
	// read from a batch, rows read from a batch, an Exec in a batch.
	err := store.WithPipelinedTx(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := store.Q(tx).GetPayment(ctx, missing)
		require.ErrorIs(t, err, store.ErrNotFound)
		return nil
	})
	require.NoError(t, err)
	err = store.WithPipelinedTx(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := store.Q(tx).FailPendingPayments(ctx, dbsqlc.FailPendingPaymentsParams{
			OrderID: &b.orderID, FailureReason: "nul\x00byte", UpdatedAt: time.Now(),
		})
		return err
	})
	require.ErrorIs(t, err, store.ErrInvalidValue)
	err = store.WithPipelinedTx(ctx, b.pool, func(tx pgx.Tx) error {
		return store.Q(tx).SetAdminLastLogin(ctx, dbsqlc.SetAdminLastLoginParams{ID: missing, LastLoginAt: ptr(time.Now())})
	})
	require.NoError(t, err, "an UPDATE of no row is no error")
	err = store.WithPipelinedTx(ctx, b.pool, func(tx pgx.Tx) error {
		return store.Q(tx).InsertAdminRecoveryCode(ctx, dbsqlc.InsertAdminRecoveryCodeParams{AdminID: missing, CodeHash: make([]byte, 32)})
	})
	require.ErrorIs(t, err, store.ErrForeignKeyViolation)
}
