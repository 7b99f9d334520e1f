package fulfillment_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/fakes/provider"
	"github.com/rustbill/paymentd/internal/fulfillment"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/notify"
	"github.com/rustbill/paymentd/internal/notify/notifytest"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/outbound"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
	"github.com/rustbill/paymentd/internal/testkit"
)

const webhookSecret = "whsec-0123456789abcdef"

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// refunder counts refunds per order, like an idempotent payment domain.
type refunder struct {
	mu      sync.Mutex
	calls   map[uuid.UUID]int
	reasons map[uuid.UUID]string
	failFor atomic.Int32 // the next n calls fail
}

func (r *refunder) RefundOrder(_ context.Context, orderID uuid.UUID, reason string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls[orderID]++
	if r.failFor.Load() > 0 {
		r.failFor.Add(-1)
		return errors.New("gateway refund failed")
	}
	r.reasons[orderID] = reason
	return nil
}

func (r *refunder) count(orderID uuid.UUID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[orderID]
}

// flakyNotifier fails the first n Enqueue calls, then passes them on.
type flakyNotifier struct {
	next  fulfillment.Notifier
	fails atomic.Int32
}

func (f *flakyNotifier) Sends() bool { return f.next.Sends() }

func (f *flakyNotifier) Enqueue(ctx context.Context, db store.DB, n notify.Notice) (int, error) {
	if f.fails.Load() > 0 {
		f.fails.Add(-1)
		return 0, errors.New("notifications table unavailable")
	}
	return f.next.Enqueue(ctx, db, n)
}

// silentNotifier is a notifier without channels: it says so, and queues
// nothing.
type silentNotifier struct{ fulfillment.Notifier }

func (silentNotifier) Sends() bool { return false }

func (silentNotifier) Enqueue(context.Context, store.DB, notify.Notice) (int, error) { return 0, nil }

type rigOptions struct {
	maxAttempts int
	clock       func() time.Time
	provisioner fulfillment.Provisioner
	wrapNotify  func(fulfillment.Notifier) fulfillment.Notifier
	// batchSize and concurrency, when set, are the worker's.
	batchSize, concurrency int
	// wrapProvisioner, when set, wraps the provisioner (the plugin's, or
	// provisioner).
	wrapProvisioner func(fulfillment.Provisioner) fulfillment.Provisioner
	// workerDB, when set, is the pool of the event worker and of the
	// handlers (the rest of the rig uses rig.pool); pollInterval, when set,
	// is the worker's.
	workerDB     func(t *testing.T, url string) *pgxpool.Pool
	pollInterval time.Duration
	// providerHTTPAttempts, when set, is how many times the provider
	// plugin's HTTP client sends a retryable request (the test client's
	// default: three), so that a test counts the event's retries alone.
	providerHTTPAttempts int
}

// bundle is one paymentd instance doing fulfilment against the fake provider
// over HTTP (through plugins/provider/http_provider.lua), with the webhook
// notifier and an SMTP server as the channels.
type bundle struct {
	pool     *pgxpool.Pool
	api      *provider.Server
	hook     *notifytest.Webhook
	smtp     *notifytest.SMTPServer
	refunds  *refunder
	customer store.Customer
	product  uuid.UUID
}

func setup(t testing.TB, o rigOptions) *bundle {
	t.Helper()
	if o.maxAttempts == 0 {
		o.maxAttempts = 3
	}
	dbURL := testdb.URL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	workerDB := pool
	if o.workerDB != nil {
		workerDB = o.workerDB(t.(*testing.T), dbURL)
	}
	if o.pollInterval == 0 {
		o.pollInterval = 200 * time.Millisecond
	}
	r := &bundle{pool: pool, refunds: &refunder{calls: map[uuid.UUID]int{}, reasons: map[uuid.UUID]string{}}}
	r.api = provider.New(provider.Options{})
	require.NoError(t, r.api.Start())
	t.Cleanup(r.api.Close)
	r.hook = notifytest.StartWebhook(t, webhookSecret)
	r.smtp = notifytest.StartSMTP(t, "mailer", "mail-pass")

	var providerOpts plugin.Options
	if o.providerHTTPAttempts > 0 {
		c := outbound.New(outbound.Options{
			Attempts: o.providerHTTPAttempts, BaseBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
			Timeout: 5 * time.Second, Logger: quietLog(),
		})
		t.Cleanup(c.CloseIdleConnections)
		providerOpts.HTTP = plugintest.Doer(c)
	}
	providerPlugin := plugintest.Load(t, "provider/http_provider.lua", providerOpts)
	webhookPlugin := plugintest.Load(t, "notifier/webhook.lua", plugin.Options{})
	providerConfig := `{"api_url":"` + r.api.URL() + `/","token":"` + r.api.Token() + `"}`
	plugins := plugin.PluginsFunc(func(name string) (plugin.Caller, string, bool) {
		switch name {
		case "http_provider":
			return providerPlugin, providerConfig, true
		case "webhook":
			return webhookPlugin, "", true
		}
		return nil, "", false
	})

	ctx := context.Background()
	custID := testfixture.Customer(t, pool)
	r.customer, err = store.GetCustomer(ctx, pool, custID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO plugins (name, type, source, sha256) VALUES ('http_provider', 'first_party_provider', '-- test', repeat('a', 64))`)
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO products (name, price, currency, provider_plugin, provider_config)
		VALUES ('VPS 1G', 12.30, 'CNY', 'http_provider', '{"plan":"vps-1g"}') RETURNING id`).Scan(&r.product))

	node := cluster.NewNodeID()
	lctx, cancel := context.WithCancel(ctx)
	listener := cluster.NewListener(cluster.ConnectLike(pool, node), cluster.ListenerOptions{Logger: quietLog(), MinBackoff: 20 * time.Millisecond})
	elector, err := cluster.NewElector(pool, cluster.ElectorOptions{
		Role: cluster.RoleEventWorker, Holder: node, TTL: 2 * time.Second, RenewInterval: 300 * time.Millisecond,
		Waker: listener, Logger: quietLog(),
	})
	require.NoError(t, err)
	worker, err := event.NewWorker(workerDB, elector, event.WorkerOptions{
		Node: node, PollInterval: o.pollInterval, MaxAttempts: o.maxAttempts, BatchSize: o.batchSize, Concurrency: o.concurrency,
		RetryBase: 20 * time.Millisecond, RetryMax: 50 * time.Millisecond, HandlerTimeout: 10 * time.Second,
		Waker: listener, Logger: quietLog(),
	})
	require.NoError(t, err)
	notifier, err := notify.New(pool, plugins, notify.Options{
		PollInterval: 100 * time.Millisecond, RetryBase: 20 * time.Millisecond, RetryMax: 50 * time.Millisecond,
		AdminEmails: []string{"ops@example.com"},
		Webhooks:    []notify.Webhook{{Name: "ops-hook", URL: r.hook.URL, Secret: webhookSecret}},
		SMTP:        r.smtp.SMTP("Billing <billing@example.com>"),
	}, listener, quietLog())
	require.NoError(t, err)
	var n fulfillment.Notifier = notifier
	if o.wrapNotify != nil {
		n = o.wrapNotify(n)
	}
	prov := o.provisioner
	if prov == nil {
		prov = fulfillment.NewPluginProvisioner(plugins, nil)
	}
	if o.wrapProvisioner != nil {
		prov = o.wrapProvisioner(prov)
	}
	svc := fulfillment.New(workerDB, prov, r.refunds, n, fulfillment.Options{
		Node: node, PaymentTimeout: 24 * time.Hour, TimeoutScanInterval: 100 * time.Millisecond, Clock: o.clock, Logger: quietLog(),
	})
	svc.Register(worker)

	require.NoError(t, listener.Start(lctx))
	require.NoError(t, elector.Start(lctx))
	require.NoError(t, worker.Start(lctx))
	require.NoError(t, notifier.Start(lctx))
	t.Cleanup(func() {
		worker.Stop()
		notifier.Stop()
		elector.Stop()
		listener.Stop()
		cancel()
	})
	return r
}

// order inserts a pending order of the rig's customer for product (nil:
// none) created at createdAt (zero: now).
func (r *bundle) order(t testing.TB, product *uuid.UUID, createdAt time.Time) uuid.UUID {
	t.Helper()
	if createdAt.IsZero() {
		createdAt = time.Now()
	}
	o, err := store.InsertOrder(context.Background(), r.pool, store.NewOrder{
		CustomerID: r.customer.ID, ProductID: product, TotalAmount: money.MustParse("12.30"), Currency: "CNY",
		Description: "VPS 1G", CreatedAt: createdAt.UTC().Truncate(time.Microsecond),
	})
	require.NoError(t, err)
	return o.ID
}

// pay moves a pending order to paid and queues order_paid in one
// transaction, as a gateway callback does.
func (r *bundle) pay(t *testing.T, orderID uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, store.WithTx(ctx, r.pool, func(tx pgx.Tx) error {
		now := time.Now().UTC().Truncate(time.Microsecond)
		if _, err := store.Q(tx).SetOrderStatus(ctx, store.SetOrderStatusParams{
			ID: orderID, FromStatus: "pending", ToStatus: "paid", PaidAt: &now, UpdatedAt: now,
		}); err != nil {
			return err
		}
		payload, err := json.Marshal(order.OrderPaidPayload{OrderID: orderID, Amount: money.MustParse("12.30"), Currency: "CNY", Method: order.MethodGateway})
		if err != nil {
			return err
		}
		_, err = store.Q(tx).InsertEvent(ctx, store.InsertEventParams{
			EventType: order.EventOrderPaid, OrderID: orderID, Payload: payload,
		})
		return err
	}))
}

// getOrder reads an order; t may be an EventuallyWithT condition's collector.
func (r *bundle) getOrder(t testkit.T, id uuid.UUID) store.Order {
	t.Helper()
	o, err := store.Q(r.pool).GetOrder(context.Background(), id)
	require.NoError(t, err)
	return o
}

func (r *bundle) waitOrder(t *testing.T, id uuid.UUID, status string) store.Order {
	t.Helper()
	var o store.Order
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		o = r.getOrder(c, id)
		assert.Equal(c, status, o.Status, "order %s", id)
	}, 20*time.Second, 10*time.Millisecond, "order %s did not become %s", id, status)
	return o
}

// events lists an order's events; t may be an EventuallyWithT condition's
// collector.
func (r *bundle) events(t testkit.T, id uuid.UUID) []store.Event {
	t.Helper()
	es, err := store.Q(r.pool).ListOrderEvents(context.Background(), id)
	require.NoError(t, err)
	return es
}

// waitEventsDone waits until the order has n events, all done.
func (r *bundle) waitEventsDone(t *testing.T, id uuid.UUID, n int) []store.Event {
	t.Helper()
	var es []store.Event
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		es = r.events(c, id)
		require.Len(c, es, n, "events of order %s", id)
		for _, e := range es {
			assert.Equal(c, store.EventDone, e.Status, "event %s (%s)", e.ID, e.EventType)
		}
	}, 20*time.Second, 10*time.Millisecond)
	return es
}

// notifications lists an event's notifications; t may be an
// EventuallyWithT condition's collector.
func (r *bundle) notifications(t testkit.T, eventID uuid.UUID) []store.Notification {
	t.Helper()
	rows, _, err := store.ListNotifications(context.Background(), r.pool, store.NotificationFilter{EventID: &eventID}, store.Page{Limit: 100})
	require.NoError(t, err)
	return rows
}

func (r *bundle) waitNotificationsSent(t *testing.T, eventID uuid.UUID, n int) []store.Notification {
	t.Helper()
	var rows []store.Notification
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rows = r.notifications(c, eventID)
		require.Len(c, rows, n, "notifications of event %s", eventID)
		for _, row := range rows {
			assert.Equal(c, store.NotificationSent, row.Status, "notification %s", row.ID)
		}
	}, 20*time.Second, 10*time.Millisecond)
	return rows
}

func (r *bundle) auditActions(t *testing.T, entityType, entityID string) []string {
	t.Helper()
	rows, err := r.pool.Query(context.Background(), `SELECT action FROM audit_log WHERE entity_type = $1 AND entity_id = $2 ORDER BY id`, entityType, entityID)
	require.NoError(t, err)
	actions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return actions
}

// provisioned returns a paid order of the rig's product once it is active
// and its instance running, its order_paid and order_provisioned done.
func (r *bundle) provisioned(t *testing.T) (uuid.UUID, store.Instance) {
	t.Helper()
	id := r.order(t, &r.product, time.Time{})
	r.pay(t, id)
	r.waitOrder(t, id, string(order.StatusActive))
	r.waitEventsDone(t, id, 2)
	inst, err := store.Q(r.pool).GetOrderInstance(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, store.InstanceRunning, inst.Status)
	return id, inst
}

// move is one step of the renewal cycle as order.Transition makes it: the
// order goes to To (suspend_reason Reason while suspended) and Event is
// queued with a ServicePayload {order_id, instance_id, reason}.
type move struct {
	To     order.Status
	Reason string
	Event  string
	// Due, when set, holds the event back this long, as a retry's backoff
	// would (events.run_at).
	Due time.Duration
}

// moveOrder makes the steps in one transaction, by SQL: the moves of the
// renewal cycle are order.Transition's, and these tests are about what the
// worker makes of their events, whatever writes them.
func (r *bundle) moveOrder(t *testing.T, id uuid.UUID, steps ...move) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, store.WithTx(ctx, r.pool, func(tx pgx.Tx) error {
		var instanceID *uuid.UUID
		if inst, err := store.Q(tx).GetOrderInstance(ctx, id); err == nil {
			instanceID = &inst.ID
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		for _, m := range steps {
			suspendReason := ""
			if m.To == order.StatusSuspended {
				suspendReason = m.Reason
			}
			if _, err := tx.Exec(ctx, `UPDATE orders SET status = $2, suspend_reason = $3, updated_at = now() WHERE id = $1`,
				id, string(m.To), suspendReason); err != nil {
				return err
			}
			payload, err := json.Marshal(order.ServicePayload{OrderID: id, InstanceID: instanceID, Reason: m.Reason})
			if err != nil {
				return err
			}
			e, err := store.Q(tx).InsertEvent(ctx, store.InsertEventParams{
				EventType: m.Event, OrderID: id, Payload: payload,
			})
			if err != nil {
				return err
			}
			if m.Due > 0 {
				if _, err := tx.Exec(ctx, `UPDATE events SET run_at = now() + make_interval(secs => $2) WHERE id = $1`, e.ID, m.Due.Seconds()); err != nil {
					return err
				}
			}
		}
		return nil
	}))
}

func (r *bundle) instance(t *testing.T, orderID uuid.UUID) store.Instance {
	t.Helper()
	inst, err := store.Q(r.pool).GetOrderInstance(context.Background(), orderID)
	require.NoError(t, err)
	return inst
}

// providerStatus is the instance's status at the fake provider.
func (r *bundle) providerStatus(t *testing.T, externalID string) string {
	t.Helper()
	in, ok := r.api.Instance(externalID)
	require.True(t, ok, "the provider has instance %s", externalID)
	return in.Status
}
