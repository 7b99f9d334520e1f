package fulfillment_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rustbill/paymentd/internal/fulfillment"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/notify"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testdb.Main(m)) }

// The whole happy path: order_paid → provision over HTTP through
// http_provider.lua → instance running, order active → order_provisioned →
// notifications delivered to a webhook (signature verified) and by e-mail
// (STARTTLS, AUTH) to the customer and the admin.
func TestPaidOrderIsProvisionedActivatedAndAnnounced(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{})
	id := r.order(t, &r.product, time.Time{})
	r.pay(t, id)

	o := r.waitOrder(t, id, string(order.StatusActive))
	require.Equal(t, "", o.CancelReason)
	inst, err := store.Q(r.pool).GetOrderInstance(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, store.InstanceRunning, inst.Status)
	require.Equal(t, r.customer.ID, inst.CustomerID)
	require.NotEmpty(t, inst.ExternalID)
	fake, ok := r.api.Instance(inst.ExternalID)
	require.True(t, ok, "the provider has the instance")
	require.Equal(t, id.String(), fake.OrderID)
	require.Equal(t, "vps-1g", fake.Plan, "the plan comes from products.provider_config")
	var details map[string]any
	require.NoError(t, json.Unmarshal(inst.Details, &details))
	require.Equal(t, "vps-1g", details["plan"])
	require.Equal(t, 1, r.api.InstancesFor(id.String()))

	es := r.waitEventsDone(t, id, 2)
	require.Equal(t, order.EventOrderPaid, es[0].EventType)
	require.Equal(t, order.EventOrderProvisioned, es[1].EventType)
	require.JSONEq(t, fmt.Sprintf(`{"order_id":%q,"instance_id":%q}`, id, inst.ID), string(es[1].Payload))
	require.EqualValues(t, 1, es[0].Attempts)

	rows := r.waitNotificationsSent(t, es[1].ID, 3)
	channels := map[string]string{}
	for _, n := range rows {
		channels[n.Recipient] = n.Channel
	}
	require.Equal(t, map[string]string{r.customer.Email: notify.ChannelEmail, "ops@example.com": notify.ChannelEmail, "ops-hook": notify.ChannelWebhook}, channels)

	require.Empty(t, r.hook.Rejections(), "every webhook carried a valid signature")
	deliveries := r.hook.Deliveries()
	require.Len(t, deliveries, 1)
	require.Equal(t, "Order "+id.String()+" is ready", deliveries[0].Payload["subject"])
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(deliveries[0].Payload["body"].(string)), &body))
	require.Equal(t, "order_provisioned", body["event_type"])
	require.Equal(t, inst.ID.String(), body["data"].(map[string]any)["instance_id"])

	mails := r.smtp.Mails()
	require.Len(t, mails, 2)
	for _, m := range mails {
		require.True(t, m.TLS)
		if m.To[0] == r.customer.Email {
			require.Equal(t, "Your order is ready", m.Header.Get("Subject"))
			require.Contains(t, m.Body, inst.ID.String())
		}
	}

	require.Equal(t, []string{"order.provisioning", "order.activate"}, r.auditActions(t, "order", id.String()))
	require.Equal(t, []string{"instance.create", "instance.provisioned"}, r.auditActions(t, "instance", inst.ID.String()))
	require.Zero(t, r.refunds.count(id))
}

// The provider refuses (HTTP 422): the plugin raises, the queue retries,
// and the last attempt cancels the order, marks the instance failed and
// queues order_cancelled with refund_due; its handler refunds once — even
// though that event itself is retried after the refund.
func TestProvisioningFailureCancelsTheOrderAndRefundsItExactlyOnce(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{maxAttempts: 3, wrapNotify: func(n fulfillment.Notifier) fulfillment.Notifier {
		f := &flakyNotifier{next: n}
		f.fails.Store(1) // the first notification attempt (order_cancelled's) fails after the refund
		return f
	}})
	id := r.order(t, &r.product, time.Time{})
	r.api.FailProvision(id.String(), 0, "no capacity in region")
	r.pay(t, id)

	o := r.waitOrder(t, id, string(order.StatusCancelled))
	require.Equal(t, order.CancelReasonProvisioningFailed, o.CancelReason)
	require.NotNil(t, o.CancelledAt)
	es := r.waitEventsDone(t, id, 2)
	require.Equal(t, order.EventOrderPaid, es[0].EventType)
	require.EqualValues(t, 3, es[0].Attempts, "provisioning was tried max_attempts times")
	require.Contains(t, es[0].LastError, "no capacity in region")
	require.Equal(t, order.EventOrderCancelled, es[1].EventType)
	require.JSONEq(t, fmt.Sprintf(`{"order_id":%q,"reason":"provisioning_failed","refund_due":true}`, id), string(es[1].Payload))
	require.EqualValues(t, 2, es[1].Attempts, "order_cancelled was retried once")
	require.Contains(t, es[1].LastError, "notifications table unavailable")

	require.Equal(t, 1, r.refunds.count(id), "refunded exactly once across the retry")
	require.Equal(t, order.CancelReasonProvisioningFailed, r.refunds.reasons[id])
	inst, err := store.Q(r.pool).GetOrderInstance(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, store.InstanceError, inst.Status)
	require.Contains(t, inst.LastError, "no capacity in region")
	require.Equal(t, 3, r.api.ProvisionRequests(id.String()))
	require.Equal(t, []string{"order.provisioning", "order.cancel", "order.auto_refund"}, r.auditActions(t, "order", id.String()))

	rows := r.waitNotificationsSent(t, es[1].ID, 3)
	require.Len(t, rows, 3)
	for _, m := range r.smtp.Mails() {
		if m.To[0] == r.customer.Email {
			require.Equal(t, "Your order was cancelled", m.Header.Get("Subject"))
			require.Contains(t, m.Body, "refunded in full")
		}
	}
}

// A refund that fails is retried with the event; the refund then happens
// once, and never again afterwards.
func TestAFailedRefundIsRetriedWithItsEvent(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{maxAttempts: 3})
	r.refunds.failFor.Store(1)
	id := r.order(t, &r.product, time.Time{})
	r.api.FailProvision(id.String(), 0, "gone")
	r.pay(t, id)
	es := r.waitEventsDone(t, id, 2)
	require.EqualValues(t, 2, es[1].Attempts)
	require.Contains(t, es[1].LastError, "refund: gateway refund failed")
	require.Equal(t, 2, r.refunds.count(id), "one failed call, one refund")
}

type refusingProvisioner struct{ calls int }

func (p *refusingProvisioner) Provision(context.Context, fulfillment.ProvisionRequest) (string, json.RawMessage, error) {
	p.calls++
	return "", nil, fmt.Errorf("%w: plan discontinued", fulfillment.ErrRefused)
}

func (p *refusingProvisioner) Terminate(context.Context, fulfillment.ProvisionRequest) error {
	return errors.New("nothing was provisioned")
}

func (p *refusingProvisioner) Suspend(context.Context, fulfillment.ProvisionRequest) error {
	return errors.New("nothing was provisioned")
}

func (p *refusingProvisioner) Unsuspend(context.Context, fulfillment.ProvisionRequest) error {
	return errors.New("nothing was provisioned")
}

// A provider that says "never" is not asked again: the order is cancelled
// at the first attempt.
func TestAFinalRefusalCancelsAtTheFirstAttempt(t *testing.T) {
	t.Parallel()
	prov := &refusingProvisioner{}
	r := setup(t, rigOptions{maxAttempts: 8, provisioner: prov})
	id := r.order(t, &r.product, time.Time{})
	r.pay(t, id)
	o := r.waitOrder(t, id, string(order.StatusCancelled))
	require.Equal(t, order.CancelReasonProvisioningFailed, o.CancelReason)
	es := r.waitEventsDone(t, id, 2)
	require.EqualValues(t, 1, es[0].Attempts)
	require.Equal(t, 1, prov.calls)
	require.Equal(t, 1, r.refunds.count(id))
}

// An order whose product has no provider plugin has nothing to provision.
func TestAnOrderWithNothingToProvisionBecomesActiveAtOnce(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{})
	id := r.order(t, nil, time.Time{})
	r.pay(t, id)
	r.waitOrder(t, id, string(order.StatusActive))
	es := r.waitEventsDone(t, id, 2)
	require.JSONEq(t, fmt.Sprintf(`{"order_id":%q,"instance_id":null}`, id), string(es[1].Payload))
	_, err := store.Q(r.pool).GetOrderInstance(context.Background(), id)
	require.ErrorIs(t, err, store.ErrNotFound)
}

// Idempotency rule: a handler checks the order's current state and does
// nothing when the work is already done. An order_paid for an order that is
// already active (a replay, a duplicate) provisions nothing.
func TestOrderPaidForAnOrderAlreadyDealtWithDoesNothing(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{})
	id := r.order(t, &r.product, time.Time{})
	r.pay(t, id)
	r.waitOrder(t, id, string(order.StatusActive))
	r.waitEventsDone(t, id, 2)

	_, err := store.Q(r.pool).InsertEvent(context.Background(), store.InsertEventParams{
		EventType: order.EventOrderPaid, OrderID: id, Payload: []byte(`{"order_id":"` + id.String() + `"}`),
	})
	require.NoError(t, err)
	r.waitEventsDone(t, id, 3)
	require.Equal(t, 1, r.api.ProvisionRequests(id.String()), "not provisioned again")
	require.Equal(t, string(order.StatusActive), r.getOrder(t, id).Status)
}

// The payment timeout, with the business clock 25 hours ahead: the pending
// order is cancelled (reason timeout), its pending payment fails, and
// order_cancelled {timeout, refund_due: false} is queued and handled — no
// refund. A younger pending order stays.
func TestAPendingOrderPastThePaymentTimeoutIsCancelled(t *testing.T) {
	t.Parallel()
	clock := func() time.Time { return time.Now().Add(25 * time.Hour) }
	r := setup(t, rigOptions{clock: clock})
	young := r.order(t, &r.product, time.Now().Add(24*time.Hour)) // 1 h old by the clock
	gw := testfixture.GatewayInterface(t, r.pool, "epay")
	// The old order and its pending payment appear together (the scan runs
	// every 100 ms).
	ctx := context.Background()
	tx, err := r.pool.Begin(ctx)
	require.NoError(t, err)
	created, err := store.InsertOrder(ctx, tx, store.NewOrder{
		CustomerID: r.customer.ID, ProductID: &r.product, TotalAmount: money.MustParse("12.30"), Currency: "CNY",
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond),
	})
	require.NoError(t, err)
	old := created.ID
	pay := testfixture.InsertPayment(t, tx, testfixture.Payment{Customer: r.customer.ID, Order: old, Gateway: gw, Amount: "12.30"})
	require.NoError(t, tx.Commit(ctx))

	o := r.waitOrder(t, old, string(order.StatusCancelled))
	require.Equal(t, order.CancelReasonTimeout, o.CancelReason)
	p, err := store.Q(r.pool).GetPayment(ctx, pay)
	require.NoError(t, err)
	require.Equal(t, "failed", p.Status)
	require.Equal(t, "payment timeout", p.FailureReason)
	es := r.waitEventsDone(t, old, 1)
	require.JSONEq(t, fmt.Sprintf(`{"order_id":%q,"reason":"timeout","refund_due":false}`, old), string(es[0].Payload))
	require.Zero(t, r.refunds.count(old), "nothing was paid, nothing is refunded")
	rows := r.waitNotificationsSent(t, es[0].ID, 3)
	require.Len(t, rows, 3)

	require.Equal(t, string(order.StatusPending), r.getOrder(t, young).Status)
	require.Empty(t, r.events(t, young))
	require.Equal(t, []string{"payment.fail"}, r.auditActions(t, "payment", pay.String()))
}

// The timeout scan never cancels an order that was paid in the meantime:
// the status is checked again under the row lock.
func TestCancelExpiredOrdersSkipsOrdersNoLongerPending(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	customer := testfixture.Customer(t, pool)
	clock := func() time.Time { return time.Now().Add(48 * time.Hour) }
	svc := fulfillment.New(pool, nil, nil, nil, fulfillment.Options{Clock: clock, Logger: quietLog()})
	pending := testfixture.Order(t, pool, customer, "1.00")
	paid := testfixture.Order(t, pool, customer, "1.00")
	_, err := pool.Exec(context.Background(), `UPDATE orders SET status = 'paid', paid_at = now() WHERE id = $1`, paid)
	require.NoError(t, err)

	n, err := svc.CancelExpiredOrders(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var status string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT status FROM orders WHERE id = $1`, paid).Scan(&status))
	require.Equal(t, "paid", status)
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT status FROM orders WHERE id = $1`, pending).Scan(&status))
	require.Equal(t, "cancelled", status)

	n, err = svc.CancelExpiredOrders(context.Background())
	require.NoError(t, err)
	require.Zero(t, n, "a second scan finds nothing")
}

func TestMalformedPayloadFailsTheEventAtOnce(t *testing.T) {
	t.Parallel()
	r := setup(t, rigOptions{maxAttempts: 8})
	id := r.order(t, &r.product, time.Time{})
	e, err := store.Q(r.pool).InsertEvent(context.Background(), store.InsertEventParams{
		EventType: order.EventOrderCancelled, OrderID: id, Payload: []byte(`{"refund_due":"maybe"}`),
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		got, err := store.Q(r.pool).GetEvent(context.Background(), e.ID)
		return err == nil && got.Status == store.EventFailed
	}, 10*time.Second, 10*time.Millisecond)
	got, err := store.Q(r.pool).GetEvent(context.Background(), e.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, got.Attempts)
	require.Contains(t, got.LastError, "order_cancelled payload")
}
