package app_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/provider"
	"github.com/rustbill/paymentd/internal/notify/notifytest"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// addProviderPlugin copies the shipped HTTP provider plugin into the test's
// plugin directory.
func addProviderPlugin(t testing.TB, dir string) {
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
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1, e.count(c, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_cancelled' AND status = 'done'`, orderID))
	}, 15*time.Second, 20*time.Millisecond)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM payments WHERE id = $1 AND status = 'refunded' AND refunded_amount = amount`, p.GetId()))

	// Deliver order_cancelled again, as after a worker crash between the
	// refund and marking the event done: nothing is refunded twice.
	_, err := e.r.app.Pool().Exec(context.Background(), `UPDATE events SET status = 'pending', run_at = now(), locked_by = NULL, locked_until = NULL
		WHERE order_id = $1 AND event_type = 'order_cancelled'`, orderID)
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1, e.count(c, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_cancelled' AND status = 'done'`, orderID))
	}, 15*time.Second, 20*time.Millisecond)
	require.Len(t, e.fake.Refunds(), 1, "a redelivered order_cancelled refunds nothing")
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM refunds WHERE payment_id = $1`, p.GetId()))
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}

// The happy chain, end to end over real HTTP and SMTP: the customer pays at
// the fake epay, whose notification reaches /callbacks; the callback
// commits the payment and order_paid; the worker provisions the order at
// the fake provider through the http_provider plugin; the order goes active
// with a running instance; and order_provisioned is announced on both
// channels — the webhook receiver verifies every HMAC signature, and the
// in-process SMTP server gets the customer's and the admins' e-mails over
// STARTTLS with AUTH.
func TestCallbackToActiveOrderWithASignedWebhookNotification(t *testing.T) {
	t.Parallel()
	prov := provider.New(provider.Options{})
	require.NoError(t, prov.Start())
	t.Cleanup(prov.Close)
	hook := notifytest.StartWebhook(t, "webhook-secret-0123456789")
	smtp := notifytest.StartSMTP(t, "mailer", "mail-password")

	e := startPaymentsWith(t, []app.Option{app.WithSMTPTLSConfig(smtp.ClientTLS)}, func(c *config.Config) {
		addProviderPlugin(t, c.Plugins.Dir)
		addNotifierPlugin(t, c.Plugins.Dir)
		c.Notify.Webhooks = []config.NotifyWebhook{{Name: "ops", URL: hook.URL, Secret: hook.Secret}}
		c.Notify.SMTP = config.NotifySMTP{
			Host: smtp.Host, Port: smtp.Port, From: "Billing <billing@example.com>",
			TLSPolicy: "mandatory", Auth: "plain", Username: smtp.Username, Password: smtp.Password, Timeout: 5 * time.Second,
		}
		c.Notify.CustomerEmail = true
		c.Notify.AdminEmails = []string{"ops@example.com"}
		c.Notify.PollInterval = 100 * time.Millisecond
		c.Events.PollInterval = 100 * time.Millisecond
	})
	e.provisionWith(t, prov, "")

	orderID := e.order(t)
	p := e.createPayment(t, orderID).GetPayment()
	require.NoError(t, e.fake.Pay(p.GetId()))
	e.waitOrderStatus(t, orderID, "active")
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM payments WHERE id = $1 AND status = 'success'`, p.GetId()))
	require.NotEmpty(t, e.fake.Notifications(), "paid through the gateway's notification")
	require.True(t, e.fake.Notifications()[0].Acked, "the /callbacks route acknowledged it")
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM instances WHERE order_id = $1 AND status = 'running'`, orderID))
	require.Equal(t, 1, prov.InstancesFor(orderID))

	// The webhook: one delivery for order_provisioned, signature verified.
	require.Eventually(t, func() bool { return len(hook.Deliveries()) > 0 }, 15*time.Second, 20*time.Millisecond,
		"the webhook receives the provisioning notification")
	require.Empty(t, hook.Rejections(), "every webhook signature verified")
	d := hook.Deliveries()[0]
	require.Equal(t, "Order "+orderID+" is ready", d.Payload["subject"], "%v", d.Payload)
	require.Contains(t, d.Payload["body"], `"event_type":"order_provisioned"`)

	// The e-mails: the customer's and the admins', over STARTTLS, as the
	// authenticated sender.
	require.Eventually(t, func() bool { return len(smtp.Mails()) == 2 }, 15*time.Second, 20*time.Millisecond,
		"the SMTP server receives the customer's and the admins' e-mails")
	byRecipient := map[string]notifytest.Mail{}
	for _, m := range smtp.Mails() {
		require.Len(t, m.To, 1)
		byRecipient[m.To[0]] = m
		require.True(t, m.TLS, "sent over STARTTLS")
		require.Equal(t, "mailer", m.User, "authenticated")
		require.Equal(t, "billing@example.com", m.From)
		require.Contains(t, m.Body, orderID)
	}
	require.Contains(t, byRecipient, "alice@example.com")
	require.Contains(t, byRecipient, "ops@example.com")
	require.Equal(t, "Your order is ready", byRecipient["alice@example.com"].Header.Get("Subject"))
	require.Contains(t, byRecipient["ops@example.com"].Header.Get("Subject"), orderID)

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 3, e.count(c, `SELECT count(*) FROM notifications WHERE status = 'sent'`))
	}, 15*time.Second, 20*time.Millisecond, "the webhook and both e-mails are recorded as sent")
	require.Equal(t, 2, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND status = 'done'`, orderID),
		"order_paid and order_provisioned are done")
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}

// addNotifierPlugin copies the shipped webhook notifier plugin into the
// test's plugin directory.
func addNotifierPlugin(t *testing.T, dir string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "plugins", "notifier", "webhook.lua"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "notifier"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notifier", "webhook.lua"), src, 0o644))
}
