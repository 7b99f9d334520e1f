package app_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/provider"
	"github.com/rustbill/paymentd/internal/notify/notifytest"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// addProviderPlugin copies the shipped HTTP provider plugin into the test's
// plugin directory.
func addProviderPlugin(t *testing.T, dir string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "plugins", "provider", "http_provider.lua"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "provider"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "provider", "http_provider.lua"), src, 0o644))
}

// The whole chain from a gateway callback: the order is paid at the fake
// epay, the event worker provisions it at the fake provider, which refuses;
// the order is cancelled and refunded through epay exactly once — also when
// the order_cancelled event is delivered a second time.
func TestProvisioningFailureRefundsThroughEpayExactlyOnce(t *testing.T) {
	t.Parallel()
	prov := provider.New(provider.Options{})
	require.NoError(t, prov.Start())
	t.Cleanup(prov.Close)

	var pluginDir string
	e := startPayments(t, func(c *config.Config) {
		addProviderPlugin(t, c.Plugins.Dir)
		pluginDir = c.Plugins.Dir
		c.Events.PollInterval = 100 * time.Millisecond
		c.Events.MaxAttempts = 2
		c.Events.RetryBase = 20 * time.Millisecond
		c.Events.RetryMax = 50 * time.Millisecond
	})
	require.NotEmpty(t, pluginDir)
	e.provisionWith(t, prov, "vps-1")

	orderID := e.order(t)
	prov.FailProvision(orderID, 0, "no capacity")
	p := e.createPayment(t, orderID).GetPayment()
	require.NoError(t, e.fake.Pay(p.GetId()))
	e.waitSettled(t, p.GetId())

	e.waitOrderStatus(t, orderID, "cancelled")
	require.Eventually(t, func() bool { return len(e.fake.Refunds()) == 1 }, 15*time.Second, 20*time.Millisecond,
		"the gateway refunds the paid order")
	require.Equal(t, "12.30", e.fake.Refunds()[0].Money)
	require.Eventually(t, func() bool {
		return e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_cancelled' AND status = 'done'`, orderID) == 1
	}, 15*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM payments WHERE id = $1 AND status = 'refunded' AND refunded_amount = amount`, p.GetId()))

	// Deliver order_cancelled again, as after a worker crash between the
	// refund and marking the event done: nothing is refunded twice.
	_, err := e.r.app.Pool().Exec(context.Background(), `UPDATE events SET status = 'pending', run_at = now(), locked_by = NULL, locked_until = NULL
		WHERE order_id = $1 AND event_type = 'order_cancelled'`, orderID)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_cancelled' AND status = 'done'`, orderID) == 1
	}, 15*time.Second, 20*time.Millisecond)
	require.Len(t, e.fake.Refunds(), 1, "a redelivered order_cancelled refunds nothing")
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM refunds WHERE payment_id = $1`, p.GetId()))
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}

// The happy chain: a callback pays the order, the worker provisions it at
// the fake provider, the order goes active with a running instance, and the
// webhook receiver gets a notification whose signature verifies.
func TestCallbackToActiveOrderWithASignedWebhookNotification(t *testing.T) {
	t.Parallel()
	prov := provider.New(provider.Options{})
	require.NoError(t, prov.Start())
	t.Cleanup(prov.Close)
	hook := notifytest.StartWebhook(t, "webhook-secret-0123456789")

	e := startPayments(t, func(c *config.Config) {
		addProviderPlugin(t, c.Plugins.Dir)
		src, err := os.ReadFile(filepath.Join("..", "..", "plugins", "notifier", "webhook.lua"))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Join(c.Plugins.Dir, "notifier"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(c.Plugins.Dir, "notifier", "webhook.lua"), src, 0o644))
		c.Notify.Webhooks = []config.NotifyWebhook{{Name: "ops", URL: hook.URL, Secret: hook.Secret}}
		c.Notify.PollInterval = 100 * time.Millisecond
		c.Events.PollInterval = 100 * time.Millisecond
	})
	e.provisionWith(t, prov, "")

	orderID := e.order(t)
	p := e.createPayment(t, orderID).GetPayment()
	require.NoError(t, e.fake.Pay(p.GetId()))
	e.waitOrderStatus(t, orderID, "active")
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM instances WHERE order_id = $1 AND status = 'running'`, orderID))
	require.Equal(t, 1, prov.InstancesFor(orderID))
	require.Eventually(t, func() bool { return len(hook.Deliveries()) > 0 }, 15*time.Second, 20*time.Millisecond,
		"the webhook receives the provisioning notification")
	require.Empty(t, hook.Rejections(), "every webhook signature verified")
	require.Equal(t, 2, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND status = 'done'`, orderID),
		"order_paid and order_provisioned are done")
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}
