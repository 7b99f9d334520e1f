package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
	"github.com/rustbill/paymentd/internal/testdb"
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

// The audit rows that wait for one batch of a pipelined transaction go as
// one statement (InsertAuditLogs) where the first waited, written in the
// order they were appended, each as given: its before (none, or JSON), its
// after, its request and its time. A row alone goes as InsertAuditLog.
func TestWaitingAuditRowsGoAsOneStatementInTheirOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u, err := url.Parse(baseURL())
	require.NoError(t, err)
	u.Path = "/" + newDatabase(t, "db", templateDB(t))
	pool, trips := testdb.TracedPool(t, u.String())
	id := uuid.NewString()
	at := time.Date(2027, time.March, 4, 5, 6, 7, 0, time.UTC)
	rows := []store.AuditRecord{
		{ActorKind: store.ActorAdmin, ActorID: "a1", Action: "test.one", EntityType: "test", EntityID: id, After: []byte(`{"n":1}`), RequestID: "r1", At: at},
		{ActorKind: store.ActorCustomer, ActorID: "c2", Action: "test.two", EntityType: "test", EntityID: id, Before: []byte(`{"n":1}`), After: []byte(`{"n":2,"s":"é\"x"}`), RequestID: "r2", At: at.Add(time.Second)},
		{ActorKind: store.ActorSystem, ActorID: "", Action: "test.three", EntityType: "test", EntityID: id, Before: []byte(`{"n":2}`), RequestID: "r3", At: at.Add(2 * time.Second)},
	}
	trips.Reset()
	err = store.WithPipelinedTx(ctx, pool, func(tx pgx.Tx) error {
		for i, r := range rows {
			require.NoError(t, store.AppendAudit(ctx, tx, r))
			if i == 0 { // a statement waits between the first two rows
				_ = store.MarkPaymentSucceededLater(ctx, tx, uuid.New(), store.PaymentSuccess{At: at}) // no such payment: no row
			}
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT 1`).Scan(&n); err != nil {
			return err
		}
		return store.AppendAudit(ctx, tx, store.AuditRecord{ActorKind: store.ActorSystem, Action: "test.four", EntityType: "test", EntityID: id, RequestID: "r4", At: at})
	})
	require.NoError(t, err)
	sent := trips.Reset()
	require.Equal(t, []string{"batch[BEGIN, InsertAuditLogs, MarkPaymentSucceeded, SELECT 1]", "batch[InsertAuditLog, COMMIT]"}, sent)

	got, err := pool.Query(ctx, `SELECT actor_kind, actor_id, action, before::text, after::text, request_id, created_at
		FROM audit_log WHERE entity_id = $1 ORDER BY id`, id)
	require.NoError(t, err)
	type row struct {
		kind, actor, action string
		before, after       *string
		request             string
		at                  time.Time
	}
	all, err := pgx.CollectRows(got, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.kind, &x.actor, &x.action, &x.before, &x.after, &x.request, &x.at)
		return x, err
	})
	require.NoError(t, err)
	require.Len(t, all, 4)
	text := func(b []byte) *string {
		if b == nil {
			return nil
		}
		var v any
		require.NoError(t, json.Unmarshal(b, &v))
		s, err := json.Marshal(v)
		require.NoError(t, err)
		out := string(s)
		return &out
	}
	norm := func(s *string) *string {
		if s == nil {
			return nil
		}
		return text([]byte(*s))
	}
	for i, r := range rows {
		require.Equal(t, r.ActorKind, all[i].kind, "row %d", i)
		require.Equal(t, r.ActorID, all[i].actor, "row %d", i)
		require.Equal(t, r.Action, all[i].action, "row %d", i)
		require.Equal(t, text(r.Before), norm(all[i].before), "row %d", i)
		require.Equal(t, text(r.After), norm(all[i].after), "row %d", i)
		require.Equal(t, r.RequestID, all[i].request, "row %d", i)
		require.True(t, r.At.Equal(all[i].at), "row %d at %s, not %s", i, all[i].at, r.At)
	}
	require.Equal(t, "test.four", all[3].action)
}
