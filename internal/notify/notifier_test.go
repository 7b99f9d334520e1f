package notify_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rustbill/paymentd/internal/notify"
	"github.com/rustbill/paymentd/internal/notify/notifytest"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
	"github.com/rustbill/paymentd/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testdb.Main(m)) }

const secret = "whsec-0123456789abcdef"

type bundle struct {
	pool    *pgxpool.Pool
	plugins plugin.Plugins
	order   uuid.UUID
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool := testdb.Pool(t)
	webhook := plugintest.Load(t, "notifier/webhook.lua", plugin.Options{})
	customer := testfixture.Customer(t, pool)
	return &bundle{
		pool:  pool,
		order: testfixture.Order(t, pool, customer, "12.30"),
		plugins: plugin.PluginsFunc(func(name string) (plugin.Caller, string, bool) {
			if name == "webhook" {
				return webhook, "", true
			}
			return nil, "", false
		}),
	}
}

// event inserts an event of the bundle's order for notifications to name.
func (b *bundle) event(t *testing.T) uuid.UUID {
	t.Helper()
	e, err := store.Q(b.pool).InsertEvent(context.Background(), store.InsertEventParams{
		EventType: "order_provisioned", OrderID: b.order, Payload: []byte(`{}`),
	})
	require.NoError(t, err)
	return e.ID
}

func fast(o notify.Options) notify.Options {
	o.PollInterval = 50 * time.Millisecond
	o.RetryBase = 20 * time.Millisecond
	o.RetryMax = 50 * time.Millisecond
	return o
}

func (b *bundle) start(t *testing.T, o notify.Options) *notify.Notifier {
	t.Helper()
	n, err := notify.New(b.pool, b.plugins, fast(o), nil, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(n.Stop)
	return n
}

func (b *bundle) enqueue(t *testing.T, n *notify.Notifier, eventID uuid.UUID, email string) int {
	t.Helper()
	count, err := n.Enqueue(context.Background(), b.pool, notify.Notice{
		EventID: eventID, EventType: "order_cancelled", CustomerEmail: email, CustomerName: "Alice",
		Data: map[string]string{"order_id": b.order.String(), "description": "VPS 1G", "reason": "provisioning_failed", "refund_due": "true"},
	})
	require.NoError(t, err)
	return count
}

// notifications lists an event's notifications; t may be an
// EventuallyWithT condition's collector.
func (b *bundle) notifications(t testkit.T, eventID uuid.UUID) []store.Notification {
	t.Helper()
	rows, _, err := store.ListNotifications(context.Background(), b.pool, store.NotificationFilter{EventID: &eventID}, store.Page{Limit: 100})
	require.NoError(t, err)
	return rows
}

func (b *bundle) waitAll(t *testing.T, eventID uuid.UUID, status string, n int) []store.Notification {
	t.Helper()
	var rows []store.Notification
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rows = b.notifications(c, eventID)
		require.Len(c, rows, n, "notifications of event %s", eventID)
		for _, r := range rows {
			assert.Equal(c, status, r.Status, "notification %s", r.ID)
		}
	}, 10*time.Second, 10*time.Millisecond)
	return rows
}

func TestEmailGoesOutOverSTARTTLSWithAuthToTheCustomerAndTheAdmins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	srv := notifytest.StartSMTP(t, "mailer", "s3cret-pass")
	n := b.start(t, notify.Options{SMTP: srv.SMTP("Billing <billing@example.com>"), AdminEmails: []string{"ops@example.com"}})
	id := b.event(t)
	require.Equal(t, 2, b.enqueue(t, n, id, "alice@example.com"))

	rows := b.waitAll(t, id, store.NotificationSent, 2)
	mails := srv.Mails()
	require.Len(t, mails, 2)
	byTo := map[string]notifytest.Mail{}
	for _, m := range mails {
		require.True(t, m.TLS, "STARTTLS was used")
		require.Equal(t, "mailer", m.User)
		require.Equal(t, "billing@example.com", m.From)
		byTo[m.To[0]] = m
	}
	customer := byTo["alice@example.com"]
	require.Equal(t, "Your order was cancelled", customer.Header.Get("Subject"))
	require.Contains(t, customer.Body, "Hello Alice,")
	require.Contains(t, customer.Body, "we could not set up the service")
	require.Contains(t, customer.Body, "refunded in full")
	admin := byTo["ops@example.com"]
	require.Equal(t, "[paymentd] Order "+b.order.String()+" was cancelled", admin.Header.Get("Subject"))
	require.Contains(t, admin.Body, "reason: provisioning_failed")
	ids := map[string]bool{}
	for _, r := range rows {
		ids[r.ID.String()] = true
		require.NotNil(t, r.SentAt)
		require.EqualValues(t, 1, r.Attempts)
	}
	require.True(t, ids[customer.Header.Get("X-Paymentd-Notification-Id")])
}

func TestWebhookIsSignedRenderedByThePluginAndRetriedUntilDelivered(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hook := notifytest.StartWebhook(t, secret)
	hook.FailNext(1)
	n := b.start(t, notify.Options{Webhooks: []notify.Webhook{{Name: "ops", URL: hook.URL, Secret: secret}}})
	id := b.event(t)
	require.Equal(t, 1, b.enqueue(t, n, id, "alice@example.com"), "no e-mail channel: the webhook only")

	rows := b.waitAll(t, id, store.NotificationSent, 1)
	require.EqualValues(t, 2, rows[0].Attempts, "the 503 was retried")
	require.Equal(t, "Order "+b.order.String()+" was cancelled", rows[0].Subject, "rendered by webhook.lua")
	require.Empty(t, hook.Rejections())
	got := hook.Deliveries()
	require.Len(t, got, 1)
	require.Equal(t, rows[0].ID.String(), got[0].NotificationID)
	require.Equal(t, "ops", got[0].Payload["recipient"])
	require.JSONEq(t, rows[0].Body, got[0].Payload["body"].(string))
	require.Contains(t, rows[0].Body, `"reason":"provisioning_failed"`)
}

func TestRefusedDeliveriesFailWithoutRetrying(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hook := notifytest.StartWebhook(t, secret)
	hook.Respond(http.StatusGone)
	srv := notifytest.StartSMTP(t, "mailer", "pw")
	srv.Reject("nobody@example.com")
	n := b.start(t, notify.Options{
		SMTP:     srv.SMTP("billing@example.com"),
		Webhooks: []notify.Webhook{{Name: "ops", URL: hook.URL, Secret: secret}},
	})
	id := b.event(t)
	require.Equal(t, 2, b.enqueue(t, n, id, "nobody@example.com"))
	rows := b.waitAll(t, id, store.NotificationFailed, 2)
	for _, r := range rows {
		require.EqualValues(t, 1, r.Attempts, "%s: a refusal is not retried", r.Channel)
		switch r.Channel {
		case notify.ChannelWebhook:
			require.Contains(t, r.LastError, "HTTP 410")
		case notify.ChannelEmail:
			require.Contains(t, r.LastError, "550")
		}
	}
	require.Equal(t, 1, hook.Requests())
}

func TestRetryableFailuresEndFailedAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hook := notifytest.StartWebhook(t, secret)
	hook.Respond(http.StatusInternalServerError)
	n := b.start(t, notify.Options{MaxAttempts: 3, Webhooks: []notify.Webhook{{Name: "ops", URL: hook.URL, Secret: secret}}})
	id := b.event(t)
	b.enqueue(t, n, id, "")
	rows := b.waitAll(t, id, store.NotificationFailed, 1)
	require.EqualValues(t, 3, rows[0].Attempts)
	require.Equal(t, 3, hook.Requests())
}

// Senders on several instances claim with SKIP LOCKED: every notification
// goes out once.
func TestTwoSendersDeliverEachNotificationOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hook := notifytest.StartWebhook(t, secret)
	opts := notify.Options{BatchSize: 3, Webhooks: []notify.Webhook{{Name: "ops", URL: hook.URL, Secret: secret}}}
	n1 := b.start(t, opts)
	n2 := b.start(t, opts)
	const count = 30
	events := make([]uuid.UUID, count)
	for i := range events {
		events[i] = b.event(t)
		b.enqueue(t, n1, events[i], "")
	}
	for _, id := range events {
		b.waitAll(t, id, store.NotificationSent, 1)
	}
	// Every row is sent, so neither sender claims anything more; once
	// both have stopped, a second delivery of any row has been seen.
	n1.Stop()
	n2.Stop()
	seen := map[string]int{}
	for _, d := range hook.Deliveries() {
		seen[d.NotificationID]++
	}
	require.Len(t, seen, count)
	for id, c := range seen {
		require.Equal(t, 1, c, id)
	}
}

func TestEnqueueingTheSameEventTwiceQueuesNothingNew(t *testing.T) {
	t.Parallel()
	b := setup(t)
	n, err := notify.New(b.pool, b.plugins, notify.Options{
		Webhooks: []notify.Webhook{{Name: "ops", URL: "http://127.0.0.1:9/x", Secret: secret}},
	}, nil, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	id := b.event(t)
	require.Equal(t, 1, b.enqueue(t, n, id, "a@example.com"))
	require.Equal(t, 0, b.enqueue(t, n, id, "a@example.com"))
	require.Len(t, b.notifications(t, id), 1)
}

// Without the webhook plugin the texts are rendered in Go, in the same shape.
func TestWebhookTextFallsBackWhenThePluginIsMissing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	none := plugin.PluginsFunc(func(string) (plugin.Caller, string, bool) { return nil, "", false })
	n, err := notify.New(b.pool, none, notify.Options{
		Webhooks: []notify.Webhook{{Name: "ops", URL: "http://127.0.0.1:9/x", Secret: secret}},
	}, nil, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	id := b.event(t)
	b.enqueue(t, n, id, "")
	rows := b.notifications(t, id)
	require.Len(t, rows, 1)
	require.Equal(t, "Order "+b.order.String()+" was cancelled", rows[0].Subject)
	require.JSONEq(t, `{"event_type":"order_cancelled","recipient":"ops","data":{"order_id":"`+b.order.String()+
		`","description":"VPS 1G","reason":"provisioning_failed","refund_due":"true"}}`, rows[0].Body)
}

func TestOptionsValidateNamesTheKey(t *testing.T) {
	t.Parallel()
	err := notify.Options{
		AdminEmails: []string{"not an address"},
		Webhooks:    []notify.Webhook{{Name: "a", URL: "ftp://x", Secret: "short"}, {Name: "a", URL: "http://x", Secret: secret}},
		SMTP:        notify.SMTP{Host: "smtp.example.com", From: "billing@example.com", TLSPolicy: "sometimes", Auth: "plain"},
	}.Validate()
	require.Error(t, err)
	for _, key := range []string{"[notify].admin_emails", "#1.url", "#1.secret", `repeats the name "a"`,
		"[notify.smtp].tls_policy", "[notify.smtp].username"} {
		require.ErrorContains(t, err, key)
	}
	require.NoError(t, notify.Options{}.Validate(), "nothing configured is valid: no channel")
	masked := notify.Options{Webhooks: []notify.Webhook{{Name: "a", Secret: secret}}, SMTP: notify.SMTP{Password: "pw"}}.Masked()
	require.NotContains(t, masked.Webhooks[0].Secret, "whsec")
	require.Equal(t, "********", masked.SMTP.Password)
}
