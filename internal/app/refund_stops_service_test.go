package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/provider"
	"github.com/rustbill/paymentd/internal/testfixture"
	"github.com/rustbill/paymentd/internal/testkit"
)

// refundBundle is a payment environment whose product is provisioned at a fake
// provider through the http_provider plugin.
type refundBundle struct {
	*payBundle
	prov *provider.Server
}

func startRefundEnv(t *testing.T) *refundBundle {
	t.Helper()
	prov := provider.New(provider.Options{})
	require.NoError(t, prov.Start())
	t.Cleanup(prov.Close)
	e := startPayments(t, func(c *config.Config) {
		addProviderPlugin(t, c.Plugins.Dir)
		c.Events.PollInterval = 100 * time.Millisecond
		c.Events.RetryBase = 20 * time.Millisecond
		c.Events.RetryMax = 100 * time.Millisecond
	})
	e.provisionWith(t, prov, "vps-1")
	return &refundBundle{payBundle: e, prov: prov}
}

// paidOrder creates an order, pays it at the fake epay and waits for the
// payment to settle; it returns the order and payment ids.
func (e *refundBundle) paidOrder(t *testing.T) (string, string) {
	t.Helper()
	orderID := e.order(t)
	p := e.createPayment(t, orderID).GetPayment()
	require.NoError(t, e.fake.Pay(p.GetId()))
	e.waitSettled(t, p.GetId())
	return orderID, p.GetId()
}

func (e *refundBundle) refund(t *testing.T, paymentID, amount string) *paymentpb.RefundPaymentResponse {
	t.Helper()
	res, err := e.payments.RefundPayment(context.Background(), with(&paymentpb.RefundPaymentRequest{PaymentId: paymentID, Amount: amount}, e.c.admin))
	require.NoError(t, err)
	return res.Msg
}

// paidWhileProvisioning creates an order, holds its provisioning at the
// provider, pays it and waits until the worker has asked the provider: the
// order is provisioning, the provider's answer held. It returns the order,
// its payment and the hold.
func (e *refundBundle) paidWhileProvisioning(t *testing.T) (string, string, *provider.Hold) {
	t.Helper()
	orderID := e.order(t)
	hold := e.prov.HoldProvision(orderID)
	t.Cleanup(hold.Release)
	p := e.createPayment(t, orderID).GetPayment()
	require.NoError(t, e.fake.Pay(p.GetId()))
	e.waitSettled(t, p.GetId())
	testkit.WaitOrTimeoutFor(t, hold.Arrived, 15*time.Second, "the worker to ask the provider to provision the order")
	require.Equal(t, "provisioning", e.orderStatus(t, orderID))
	return orderID, p.GetId(), hold
}

// instanceAt is the fake provider's instance of an order.
func (e *refundBundle) instanceAt(t *testing.T, orderID string) provider.Instance {
	t.Helper()
	for _, in := range e.prov.Instances() {
		if in.OrderID == orderID {
			return in
		}
	}
	t.Fatalf("the provider has no instance for order %s", orderID)
	return provider.Instance{}
}

// waitEnded waits until order_refunded is done and the order's instance is
// terminated both at the provider and in our records.
func (e *refundBundle) waitEnded(t *testing.T, orderID string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1, e.count(c, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_refunded' AND status = 'done'`, orderID))
	}, 15*time.Second, 20*time.Millisecond, "order_refunded is handled")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1, e.count(c, `SELECT count(*) FROM instances WHERE order_id = $1 AND status = 'terminated' AND terminated_at IS NOT NULL`, orderID))
	}, 15*time.Second, 20*time.Millisecond, "the instance is recorded terminated")
	require.Equal(t, provider.StatusTerminated, e.instanceAt(t, orderID).Status, "the provider ended the instance")
}

// A full refund of an active order ends its service: the order is
// refunded, order_refunded terminates the instance at the provider and
// queues the customer's and the admins' notices. A partial refund of
// another active order leaves it active and its instance running.
func TestFullRefundOfAnActiveOrderEndsItsServiceAndAPartialOneDoesNot(t *testing.T) {
	t.Parallel()
	e := startRefundEnv(t)

	orderID, paymentID := e.paidOrder(t)
	e.waitOrderStatus(t, orderID, "active")
	require.Equal(t, provider.StatusRunning, e.instanceAt(t, orderID).Status)
	e.refund(t, paymentID, "")
	require.Equal(t, "refunded", e.orderStatus(t, orderID))
	e.waitEnded(t, orderID)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_refunded'
		AND payload->>'payment_id' = $2 AND payload->>'instance_id' IS NOT NULL`, orderID, paymentID))
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE entity_type = 'order' AND entity_id = $1 AND action = 'order.refund'`, orderID))

	partial, partialPayment := e.paidOrder(t)
	e.waitOrderStatus(t, partial, "active")
	e.refund(t, partialPayment, "2.30")
	require.Equal(t, "active", e.orderStatus(t, partial), "a partial refund leaves the order as it is")
	require.Zero(t, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_refunded'`, partial))
	require.Equal(t, provider.StatusRunning, e.instanceAt(t, partial).Status)
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}

// A refund that races provisioning never ends with an active order whose
// money went back. Refund first: the order is refunded while the provider
// still works on its instance; when the provider answers, the order stays
// refunded, never active, and the instance it made is terminated.
func TestRefundThatCommitsBeforeProvisioningEndsNeverLetsTheOrderGoActive(t *testing.T) {
	t.Parallel()
	e := startRefundEnv(t)
	orderID, paymentID, hold := e.paidWhileProvisioning(t)

	e.refund(t, paymentID, "")
	require.Equal(t, "refunded", e.orderStatus(t, orderID))
	hold.Release()

	e.waitEnded(t, orderID)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1, e.count(c, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_paid' AND status = 'done'`, orderID))
	}, 15*time.Second, 20*time.Millisecond)
	require.Equal(t, "refunded", e.orderStatus(t, orderID))
	require.Zero(t, e.count(t, `SELECT count(*) FROM audit_log WHERE entity_type = 'order' AND entity_id = $1 AND action = 'order.activate'`, orderID),
		"the order was never active")
	require.Zero(t, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_provisioned'`, orderID))
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}

// Activation first: the order goes active, then the full refund ends it
// like any active order's.
func TestRefundThatCommitsAfterActivationEndsTheService(t *testing.T) {
	t.Parallel()
	e := startRefundEnv(t)
	orderID, paymentID, hold := e.paidWhileProvisioning(t)
	hold.Release()
	e.waitOrderStatus(t, orderID, "active")

	e.refund(t, paymentID, "")
	require.Equal(t, "refunded", e.orderStatus(t, orderID))
	e.waitEnded(t, orderID)
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}
