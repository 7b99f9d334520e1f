package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
	"github.com/rustbill/paymentd/internal/testsignal"
)

// The reconciler and the marking of overdue invoices run only on the
// `billing` leader. While another instance holds the role, this one
// neither asks the gateway about a pending payment whose callback was lost
// nor marks an issued invoice past its due date; once the role is free
// (the holder resigns), it takes it and does both.
func TestOnlyTheBillingLeaderReconcilesAndMarksOverdueInvoices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	// Another instance holds `billing` for an hour, before this one starts.
	other, err := store.Q(pool).LeaderAttemptElect(ctx, store.LeaderAttemptElectParams{
		Role: cluster.RoleBilling, Holder: "another-instance", Ttl: time.Hour,
	})
	require.NoError(t, err)
	const reconcileAfter = 300 * time.Millisecond // also the reconcile interval: min(30 s, this)
	signals := app.Signals{Reconciler: testsignal.New(), Renewals: testsignal.New()}
	e := startPaymentsWith(t, []app.Option{app.WithSignals(signals)}, func(c *config.Config) {
		c.DB.URL = url
		c.Billing.ReconcileAfter = reconcileAfter
	})

	// A payment whose notification is lost, paid at the gateway: only the
	// reconciler can settle it. And an invoice that fell due an hour ago.
	e.fake.DropNotify(true)
	orderID := e.order(t)
	p := e.createPayment(t, orderID).GetPayment()
	require.NoError(t, e.fake.Pay(p.GetId()))
	var invoiceID string
	require.NoError(t, pool.QueryRow(ctx, `WITH i AS (INSERT INTO invoices (customer_id, number, status, amount, currency, issued_at, due_at)
		VALUES ($1, 'INV-BILLING-GATE', 'issued', 5.00, 'CNY', now() - interval '2 hours', now() - interval '1 hour')
		RETURNING *), l AS (INSERT INTO invoice_lines (invoice_id, position, description, unit_amount, amount) SELECT id, 1, description, amount, amount FROM i)
		SELECT id::text FROM i`, e.c.customerID).Scan(&invoiceID))
	invoiceStatus := func(t testkit.T) string {
		var s string
		require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM invoices WHERE id = $1`, invoiceID).Scan(&s))
		return s
	}

	// The instance works (it leads event_worker and serves), but in the
	// rounds of the reconciler and of the billing run that began after the
	// payment fell due nothing of billing's happened: each looked, saw
	// another instance lead `billing`, and did nothing.
	require.Eventually(t, func() bool {
		l, err := store.Q(pool).LeaderLeaseRemaining(ctx, cluster.RoleEventWorker)
		return err == nil && l.Holder != ""
	}, 10*time.Second, 20*time.Millisecond)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1, e.count(c, `SELECT count(*) FROM payments WHERE id = $1 AND next_reconcile_at <= now()`, p.GetId()))
	}, 10*time.Second, 20*time.Millisecond, "the payment fell due for reconciliation")
	reconciles, renewals := signals.Reconciler.Mark(), signals.Renewals.Mark()
	signals.Reconciler.WaitAfter(t, reconciles, 5, "five reconciler rounds after the payment fell due")
	signals.Renewals.WaitAfter(t, renewals, 2, "two billing-run rounds after the payment fell due")
	require.Equal(t, "pending", e.getPayment(t, p.GetId()).GetStatus())
	require.Zero(t, e.count(t, `SELECT reconcile_attempts FROM payments WHERE id = $1`, p.GetId()), "the gateway was never asked")
	require.Equal(t, "issued", invoiceStatus(t))
	require.Zero(t, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'invoice.overdue'`))
	held, err := store.Q(pool).LeaderLeaseRemaining(ctx, cluster.RoleBilling)
	require.NoError(t, err)
	require.Equal(t, "another-instance", held.Holder)

	// The other instance resigns (DELETE + NOTIFY): this one takes billing
	// at once and does both.
	resigned, err := store.Resign(ctx, pool, cluster.RoleBilling, "another-instance", other.ElectedAt)
	require.NoError(t, err)
	require.True(t, resigned)
	e.waitSettled(t, p.GetId())
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, "overdue", invoiceStatus(c)) }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'invoice.overdue' AND entity_id = $1`, invoiceID))
	held, err = store.Q(pool).LeaderLeaseRemaining(ctx, cluster.RoleBilling)
	require.NoError(t, err)
	require.NotEqual(t, "another-instance", held.Holder)
}
