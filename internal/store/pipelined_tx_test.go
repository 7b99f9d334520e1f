package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// auditRow is an audit row of entity id, valid unless kind is not one
// audit_log_actor_kind_check allows.
func auditRow(kind, id string) store.AuditRecord {
	return store.AuditRecord{ActorKind: kind, ActorID: "t", Action: "test.pipelined", EntityType: "test", EntityID: id, At: time.Now()}
}

func TestPipelinedTxCommitsWaitingStatementsWithTheNextOneAndAtCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, exists := txSetup(t)
	id := uuid.NewString()
	count := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE entity_id = $1`, id).Scan(&n))
		return n
	}

	err := store.WithPipelinedTx(ctx, pool, func(tx pgx.Tx) error {
		require.NoError(t, store.AppendAudit(ctx, tx, auditRow(store.ActorSystem, id)))
		// Waiting, not sent: nothing of the transaction exists yet, not
		// even inside it (a read from the pool sees the committed state).
		require.Zero(t, count())
		// A statement that answers carries it (and BEGIN).
		var n int
		require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE entity_id = $1`, id).Scan(&n))
		require.Equal(t, 1, n, "the waiting row went before the read")
		require.NoError(t, createAdmin(ctx, tx, "pipe-"+id[:8]))
		// This one waits for COMMIT.
		return store.AppendAudit(ctx, tx, auditRow(store.ActorSystem, id))
	})
	require.NoError(t, err)
	require.Equal(t, 2, count())
	require.True(t, exists("pipe-"+id[:8]))
}

func TestPipelinedTxRollsBackEverythingWhenAWaitingStatementFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, exists := txSetup(t)
	id := uuid.NewString()
	count := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE entity_id = $1`, id).Scan(&n))
		return n
	}

	// Failing with the next statement: that statement answers the error.
	err := store.WithPipelinedTx(ctx, pool, func(tx pgx.Tx) error {
		require.NoError(t, createAdmin(ctx, tx, "pipe-a-"+id[:8]))
		require.NoError(t, store.AppendAudit(ctx, tx, auditRow(store.ActorSystem, id)))
		require.NoError(t, store.AppendAudit(ctx, tx, auditRow("nobody", id))) // audit_log_actor_kind_check
		var n int
		err := tx.QueryRow(ctx, `SELECT 1`).Scan(&n)
		require.ErrorIs(t, store.MapError(err), store.ErrCheckViolation, "%v", err)
		return err
	})
	require.Error(t, err)
	require.Zero(t, count())
	require.False(t, exists("pipe-a-"+id[:8]))

	// Failing at COMMIT: the commit answers it, nothing is kept.
	err = store.WithPipelinedTx(ctx, pool, func(tx pgx.Tx) error {
		require.NoError(t, createAdmin(ctx, tx, "pipe-b-"+id[:8]))
		return store.AppendAudit(ctx, tx, auditRow("nobody", id))
	})
	require.ErrorIs(t, err, store.ErrCheckViolation, "%v", err)
	require.Zero(t, count())
	require.False(t, exists("pipe-b-"+id[:8]))

	// fn's own error drops what waits.
	errBoom := errors.New("boom")
	err = store.WithPipelinedTx(ctx, pool, func(tx pgx.Tx) error {
		require.NoError(t, createAdmin(ctx, tx, "pipe-c-"+id[:8]))
		require.NoError(t, store.AppendAudit(ctx, tx, auditRow(store.ActorSystem, id)))
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)
	require.Zero(t, count())
	require.False(t, exists("pipe-c-"+id[:8]))
}

func TestLaterIsAnsweredByTheStatementItWentWith(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p, err := b.q.InsertPayment(ctx, b.pendingPayment())
	require.NoError(t, err)
	at := time.Now().UTC().Truncate(time.Microsecond)
	success := store.PaymentSuccess{GatewayPaymentID: "G1", GatewayTxID: "T1", PaidAt: at, At: at}

	err = store.WithPipelinedTx(ctx, b.pool, func(tx pgx.Tx) error {
		settled := store.MarkPaymentSucceededLater(ctx, tx, p.ID, success)
		again := store.MarkPaymentSucceededLater(ctx, tx, p.ID, success)
		// The next statement carries both, ahead of it, in order.
		var status string
		require.NoError(t, tx.QueryRow(ctx, `SELECT status FROM payments WHERE id = $1`, p.ID).Scan(&status))
		require.Equal(t, "success", status)
		paid, err := settled.Get(ctx)
		require.NoError(t, err)
		require.Equal(t, "success", paid.Status)
		require.Equal(t, "G1", paid.GatewayPaymentID)
		_, err = again.Get(ctx)
		require.ErrorIs(t, err, store.ErrNotFound, "no longer pending: the optimistic lock")
		return nil
	})
	require.NoError(t, err)

	// A Later that nothing carried is sent by Get; one whose statement
	// failed answers its failure, and so does the one after it.
	other, err := b.q.InsertPayment(ctx, func() dbsqlc.InsertPaymentParams {
		o := b.pendingPayment()
		o.OrderID, o.InvoiceID = nil, &b.invoiceID
		return o
	}())
	require.NoError(t, err)
	err = store.WithPipelinedTx(ctx, b.pool, func(tx pgx.Tx) error {
		taken := store.MarkPaymentSucceededLater(ctx, tx, other.ID, success) // G1 is p's: payments_gateway_payment_id_key
		after := store.MarkPaymentSucceededLater(ctx, tx, other.ID, success)
		_, err := taken.Get(ctx)
		require.ErrorIs(t, err, store.ErrConflict, "%v", err)
		_, aerr := after.Get(ctx)
		require.Error(t, aerr)
		return err
	})
	require.ErrorIs(t, err, store.ErrConflict)
	require.Equal(t, "pending", func() string {
		q, err := store.Q(b.pool).GetPayment(ctx, other.ID)
		require.NoError(t, err)
		return q.Status
	}())
}
