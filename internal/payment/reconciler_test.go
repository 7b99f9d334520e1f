package payment_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/order/renewal"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/payment/reconcile"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
	"github.com/rustbill/paymentd/internal/testkit"
)

// deadURL is the URL of a port nothing listens on.
func deadURL(t *testing.T) string {
	return fmt.Sprintf("http://127.0.0.1:%d", testkit.FreePort(t))
}

func TestQueryPaymentStatusSyncsWithTheGateway(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	f.fake.DropNotify(true)
	orderID := f.order(t, "12.30")
	p := f.pay(t, orderID)

	got, err := f.svc.QueryPaymentStatus(f.admin, p.ID)
	require.NoError(t, err)
	require.Equal(t, "pending", got.Status, "not paid yet: unchanged")

	require.NoError(t, f.fake.Pay(p.ID.String()))
	f.clock.Advance(time.Minute) // our clock is past the gateway's payment time
	got, err = f.svc.QueryPaymentStatus(f.admin, p.ID)
	require.NoError(t, err)
	require.Equal(t, "success", got.Status)
	o, _ := f.fake.Order(p.ID.String())
	require.Equal(t, o.TradeNo, got.GatewayPaymentID)
	require.Equal(t, o.EndTime.UTC().Truncate(time.Second), got.PaidAt.UTC(), "paid_at is the gateway's time")
	require.Equal(t, "paid", f.orderStatus(t, orderID))
	require.Equal(t, 1, f.orderPaidEvents(t, orderID))
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.success' AND actor_kind = 'admin'`))

	again, err := f.svc.QueryPaymentStatus(f.admin, p.ID)
	require.NoError(t, err, "an already settled payment is just returned")
	require.Equal(t, got.UpdatedAt, again.UpdatedAt)

	// The late notify (the gateway's next round) is a duplicate.
	f.fake.DropNotify(false)
	require.NoError(t, f.fake.Renotify(p.ID.String()))
	eventually(t, "acknowledged", func() bool {
		ns := f.fake.Notifications()
		return len(ns) > 0 && ns[len(ns)-1].Acked
	})
	require.Equal(t, 1, f.orderPaidEvents(t, orderID))
	testfixture.CheckMoneyInvariants(t, f.pool)
}

func TestQueryPaymentStatusRefusals(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	p := f.pay(t, f.order(t, "12.30"))

	_, err := f.svc.QueryPaymentStatus(f.asAlice, p.ID)
	require.True(t, apperr.Is(err, apperr.PermissionDenied), "%v", err)
	_, err = f.svc.QueryPaymentStatus(f.admin, uuid.New())
	require.True(t, apperr.Is(err, apperr.NotFound), "%v", err)

	f.fake.InjectFault(epay.Fault{Path: "/api.php", Act: "order", Status: http.StatusInternalServerError, Times: 3})
	_, err = f.svc.QueryPaymentStatus(f.admin, p.ID)
	require.True(t, apperr.Is(err, apperr.Internal), "%v", err)

	// A payment the gateway never heard of: the query is refused.
	unknown := testfixture.InsertPayment(t, f.pool, testfixture.Payment{Customer: f.alice, Gateway: f.epayGW})
	_, err = f.svc.QueryPaymentStatus(f.admin, unknown)
	require.True(t, apperr.Is(err, apperr.Internal), "%v", err)
	require.Equal(t, "pending", f.payment(t, p.ID).Status)
}

func TestReconcilerRepairsALostNotify(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	f.fake.DropNotify(true)
	orderID := f.order(t, "33.00")
	p := f.pay(t, orderID)
	require.NoError(t, f.fake.Pay(p.ID.String()))
	eventually(t, "the notify round gave up", func() bool { return len(f.fake.Notifications()) == len(epay.DefaultNotifySchedule()) })
	require.Equal(t, "pending", f.payment(t, p.ID).Status)

	r := f.reconciler(reconcile.Options{NodeID: "test-node", MaxBackoff: 2 * time.Hour, BaseBackoff: reconcileAfter, Clock: f.clock.Now})
	round, err := r.RunOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, round.Claimed, "not due before reconcile_after")

	f.clock.Advance(reconcileAfter + time.Second)
	round, err = r.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, reconcile.Round{Claimed: 1, Settled: 1}, round)
	got := f.payment(t, p.ID)
	require.Equal(t, "success", got.Status)
	require.EqualValues(t, 1, got.ReconcileAttempts)
	require.Equal(t, "paid", f.orderStatus(t, orderID))
	require.Equal(t, 1, f.orderPaidEvents(t, orderID))
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.success' AND actor_kind = 'system' AND actor_id = 'test-node'`))
	testfixture.CheckMoneyInvariants(t, f.pool)
}

func TestReconcilerClaimsAPaymentOnceAndBacksOff(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	const n = 25
	for range n {
		f.pay(t, f.order(t, "1.00"))
	}
	f.clock.Advance(reconcileAfter)
	created := f.clock.Now()

	// Three reconcilers race: every due payment is claimed by exactly one.
	rs := []*reconcile.Reconciler{
		f.reconciler(reconcile.Options{BaseBackoff: reconcileAfter, Clock: f.clock.Now}),
		f.reconciler(reconcile.Options{BaseBackoff: reconcileAfter, Clock: f.clock.Now}),
		f.reconciler(reconcile.Options{BaseBackoff: reconcileAfter, Clock: f.clock.Now}),
	}
	var mu sync.Mutex
	total := 0
	for {
		var wg sync.WaitGroup
		claimed := 0
		errs := make([]error, len(rs)) // required here: FailNow in a goroutine would end it, not the test
		for i, r := range rs {
			wg.Go(func() {
				round, err := r.RunOnce(context.Background())
				if errs[i] = err; err != nil {
					return
				}
				assert.LessOrEqual(t, round.Claimed, reconcile.DefaultBatchSize)
				mu.Lock()
				claimed += round.Claimed
				mu.Unlock()
			})
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "reconciler %d", i)
		}
		total += claimed
		if claimed == 0 {
			break
		}
	}
	require.Equal(t, n, total, "each payment asked about once")
	require.Equal(t, n, f.count(t, `SELECT count(*) FROM payments WHERE reconcile_attempts = 1`))
	// Rescheduled by the base backoff (reconcile_after · 2^0).
	require.Equal(t, n, f.count(t, `SELECT count(*) FROM payments WHERE next_reconcile_at = $1`, created.Add(reconcileAfter).UTC().Truncate(time.Microsecond)))

	f.clock.Advance(reconcileAfter)
	round, err := rs[0].RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, reconcile.DefaultBatchSize, round.Claimed)
	require.Equal(t, reconcile.DefaultBatchSize, f.count(t, `SELECT count(*) FROM payments WHERE reconcile_attempts = 2 AND next_reconcile_at = $1`,
		created.Add(reconcileAfter+2*reconcileAfter).UTC().Truncate(time.Microsecond)), "the second wait is twice the first")
}

// The billing run (internal/order/renewal) is the one place invoices past
// due become overdue; an overdue invoice stays payable by a callback.
func TestTheBillingRunMarksOverdueInvoicesOnce(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	due := f.invoice(t, nil, "5.00")
	notYet := f.invoice(t, nil, "5.00")
	_, err := f.pool.Exec(context.Background(), `UPDATE invoices SET due_at = $2 WHERE id = $1`, due, f.clock.Now().Add(-time.Minute))
	require.NoError(t, err)

	r := renewal.New(f.pool, renewal.Options{Node: "n1", Clock: f.clock.Now})
	round, err := r.RunOnce(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 1, round.Overdue)
	round, err = r.RunOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, round.Overdue, "idempotent")
	for id, want := range map[uuid.UUID]string{due: "overdue", notYet: "issued"} {
		inv, err := store.Q(f.pool).GetInvoice(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, want, inv.Status)
	}
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'invoice.overdue' AND entity_id = $1 AND actor_kind = 'system'`, due.String()))

	// An overdue invoice can still be paid.
	p, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{InvoiceID: &due, GatewayInterfaceID: f.epayGW, ReturnURL: "https://x.example"})
	require.NoError(t, err)
	_, err = f.svc.HandleCallback(context.Background(), f.callbackOf(notify(p.ID, "T1", "5.00")))
	require.NoError(t, err)
	inv, err := store.Q(f.pool).GetInvoice(context.Background(), due)
	require.NoError(t, err)
	require.Equal(t, "paid", inv.Status)
	testfixture.CheckMoneyInvariants(t, f.pool)
}

func TestReconcilerStartsAndStops(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	f.fake.DropNotify(true)
	p := f.pay(t, f.order(t, "2.00"))
	require.NoError(t, f.fake.Pay(p.ID.String()))
	f.clock.Advance(reconcileAfter)

	r := f.reconciler(reconcile.Options{Interval: 20 * time.Millisecond, BaseBackoff: reconcileAfter, Clock: f.clock.Now})
	require.NoError(t, r.Start(context.Background()))
	require.Error(t, r.Start(context.Background()), "started once")
	eventually(t, "the background round settles it", func() bool { return f.payment(t, p.ID).Status == "success" })
	r.Stop()
	r.Stop() // idempotent
}

// A gateway payment that failed is asked about again for late_capture (with
// a wait that grows to a day, the last check at the end of the window):
// money its gateway took after all is captured, never settled. Past the
// window it is unscheduled and never asked again.
func TestReconcilerFindsMoneyCapturedAfterAPaymentFailedWithinTheWindow(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	f.fake.DropNotify(true)
	orders := order.NewService(f.pool, []string{"CNY"}, nil, nil, nil)
	fail := func() store.Payment {
		orderID := f.order(t, "7.00")
		p := f.pay(t, orderID)
		_, err := orders.CancelOrder(f.asAlice, orderID)
		require.NoError(t, err)
		got := f.payment(t, p.ID)
		require.Equal(t, "failed", got.Status)
		return got
	}
	late, never := fail(), fail()
	failedAt := *late.FailedAt
	const window = 3 * 24 * time.Hour
	r := f.reconciler(reconcile.Options{BaseBackoff: reconcileAfter, LateCapture: window, Clock: f.clock.Now})

	// Asked at the next round (the orders were cancelled on the real
	// clock, a moment past the test's), then ever less often.
	f.clock.Advance(time.Second)
	require.False(t, failedAt.After(f.clock.Now()))
	round, err := r.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, reconcile.Round{Claimed: 2}, round, "both failed payments asked: nothing paid")
	require.Equal(t, f.clock.Now().UTC().Truncate(time.Microsecond).Add(reconcileAfter), f.payment(t, late.ID).NextReconcileAt.UTC())

	// Two days on, the customer pays the first at the gateway.
	require.NoError(t, f.fake.Pay(late.ID.String()))
	f.clock.Advance(2 * 24 * time.Hour)
	round, err = r.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, reconcile.Round{Claimed: 2, Captured: 1}, round)
	got := f.payment(t, late.ID)
	require.Equal(t, "failed", got.Status)
	require.Equal(t, "7.00", got.CapturedAmount.String())
	require.Nil(t, got.NextReconcileAt, "captured: nothing more to ask")
	require.Equal(t, 1, f.anomalies(t, late.ID))
	// The other's next check is capped by the end of its window.
	next := *f.payment(t, never.ID).NextReconcileAt
	require.False(t, next.After(never.FailedAt.Add(window)), "next check %s after the window's end", next)

	// Its last check falls on the end of the window; after it, none.
	f.clock.Advance(window)
	round, err = r.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, round.Claimed, "the check at the end of the window")
	require.Nil(t, f.payment(t, never.ID).NextReconcileAt)
	require.NoError(t, f.fake.Pay(never.ID.String()))
	f.clock.Advance(time.Hour)
	round, err = r.RunOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, round.Claimed)
	require.Equal(t, "0.00", f.payment(t, never.ID).CapturedAmount.String())
	testfixture.CheckMoneyInvariants(t, f.pool)
}
