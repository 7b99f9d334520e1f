package eventrpc_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	eventpb "github.com/rustbill/paymentd/gen/billing/event"
	"github.com/rustbill/paymentd/gen/billing/event/eventpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/event/eventrpc"
	"github.com/rustbill/paymentd/internal/rpctest"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// adminBundle is a database of one's own with a customer, and
// EventAdminService over it, served by rpctest with the service's policy.
type adminBundle struct {
	pool     *pgxpool.Pool
	customer uuid.UUID
	client   eventpbconnect.EventAdminServiceClient
	adminID  uuid.UUID
}

func setupAdmin(t *testing.T) *adminBundle {
	t.Helper()
	pool := testdb.Pool(t)
	admin := event.NewAdmin(pool, event.AdminOptions{MaxAttempts: 3, NodeLostAfter: 30 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	srv := rpctest.Serve(t, eventrpc.Policy, nil, func(opts ...connect.HandlerOption) (string, http.Handler) {
		return eventpbconnect.NewEventAdminServiceHandler(eventrpc.NewAdminHandler(admin), opts...)
	})
	return &adminBundle{pool: pool, customer: testfixture.Customer(t, pool),
		client: eventpbconnect.NewEventAdminServiceClient(srv.Client(), srv.URL), adminID: uuid.New()}
}

func (b *adminBundle) order(t *testing.T) uuid.UUID {
	t.Helper()
	return testfixture.Order(t, b.pool, b.customer, "10.00")
}

// insert queues one event of typ for an order.
func (b *adminBundle) insert(t *testing.T, typ string, orderID uuid.UUID) store.Event {
	t.Helper()
	e, err := store.Q(b.pool).InsertEvent(context.Background(), store.InsertEventParams{
		EventType: typ, OrderID: orderID, Payload: []byte(`{"order_id":"` + orderID.String() + `"}`),
	})
	require.NoError(t, err)
	return e
}

func (b *adminBundle) admin() string { return rpctest.Admin(b.adminID) }

func page(n, size uint32) *paymentpb.PageRequest {
	return &paymentpb.PageRequest{Page: n, PageSize: size}
}

func ptr[T any](v T) *T { return &v }

func TestEventAdminIsForAdminsOnly(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	ctx := context.Background()
	_, err := b.client.ListEvents(ctx, rpctest.As("", &eventpb.ListEventsRequest{Pagination: page(1, 10)}))
	rpctest.RequireCode(t, connect.CodeUnauthenticated, err)
	_, err = b.client.ListNodes(ctx, rpctest.As(rpctest.Customer(b.customer), &eventpb.ListNodesRequest{}))
	rpctest.RequireCode(t, connect.CodePermissionDenied, err)
	_, err = b.client.RetryEvent(ctx, rpctest.As(rpctest.Customer(b.customer), &eventpb.RetryEventRequest{Id: uuid.NewString()}))
	rpctest.RequireCode(t, connect.CodePermissionDenied, err)
	for proc := range eventrpc.Policy {
		require.Equal(t, auth.AdminOnly, eventrpc.Policy[proc])
	}
	require.Len(t, eventrpc.Policy, 6)
}

func TestListEventsFiltersAndPages(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	ctx := context.Background()
	o1, o2 := b.order(t), b.order(t)
	var ids []string
	for range 3 {
		ids = append(ids, b.insert(t, "order_paid", o1).ID.String())
	}
	b.insert(t, "order_cancelled", o2)

	res, err := b.client.ListEvents(ctx, rpctest.As(b.admin(), &eventpb.ListEventsRequest{Pagination: page(1, 2), OrderId: ptr(o1.String())}))
	require.NoError(t, err)
	require.Equal(t, uint64(3), res.Msg.Meta.Total)
	require.Equal(t, uint32(2), res.Msg.Meta.TotalPages)
	require.Len(t, res.Msg.Events, 2)
	require.Equal(t, ids[2], res.Msg.Events[0].Id, "newest first")
	require.Equal(t, int32(3), res.Msg.Events[0].MaxAttempts)
	require.Equal(t, "pending", res.Msg.Events[0].Status)
	require.Contains(t, res.Msg.Events[0].Payload, o1.String())

	res, err = b.client.ListEvents(ctx, rpctest.As(b.admin(), &eventpb.ListEventsRequest{Pagination: page(2, 2), OrderId: ptr(o1.String())}))
	require.NoError(t, err)
	require.Len(t, res.Msg.Events, 1)
	require.Equal(t, ids[0], res.Msg.Events[0].Id)

	res, err = b.client.ListEvents(ctx, rpctest.As(b.admin(), &eventpb.ListEventsRequest{Pagination: page(1, 10), EventType: ptr("order_cancelled")}))
	require.NoError(t, err)
	require.Len(t, res.Msg.Events, 1)
	require.Equal(t, o2.String(), res.Msg.Events[0].OrderId)

	res, err = b.client.ListEvents(ctx, rpctest.As(b.admin(), &eventpb.ListEventsRequest{Pagination: page(1, 10), Status: ptr("failed")}))
	require.NoError(t, err)
	require.Empty(t, res.Msg.Events)

	_, err = b.client.ListEvents(ctx, rpctest.As(b.admin(), &eventpb.ListEventsRequest{Pagination: page(1, 10), Status: ptr("weird")}))
	rpctest.RequireCode(t, connect.CodeInvalidArgument, err)
}

// RetryEvent answers with the event as it is after the retry; its refusals
// keep their codes on the wire (the rule and the worker taking the event
// again: internal/event's TestRetryEventPutsAFailedEventBackWithFreshAttempts).
func TestRetryEventOverTheWire(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	ctx := context.Background()
	e := b.insert(t, "order_paid", b.order(t))

	_, err := b.client.RetryEvent(ctx, rpctest.As(b.admin(), &eventpb.RetryEventRequest{Id: e.ID.String()}))
	rpctest.RequireCode(t, connect.CodeInvalidArgument, err)
	_, err = b.client.RetryEvent(ctx, rpctest.As(b.admin(), &eventpb.RetryEventRequest{Id: uuid.NewString()}))
	rpctest.RequireCode(t, connect.CodeNotFound, err)

	_, err = b.pool.Exec(ctx, `UPDATE events SET status = 'failed', attempts = 3, last_error = 'provider down' WHERE id = $1`, e.ID)
	require.NoError(t, err)
	got, err := b.client.GetEvent(ctx, rpctest.As(b.admin(), &eventpb.GetEventRequest{Id: e.ID.String()}))
	require.NoError(t, err)
	require.Equal(t, "failed", got.Msg.Event.Status)
	require.Equal(t, "provider down", got.Msg.Event.LastError)
	require.Equal(t, int32(3), got.Msg.Event.Attempts)

	res, err := b.client.RetryEvent(ctx, rpctest.As(b.admin(), &eventpb.RetryEventRequest{Id: e.ID.String()}))
	require.NoError(t, err)
	require.Equal(t, "pending", res.Msg.Event.Status)
	require.Equal(t, int32(0), res.Msg.Event.Attempts)
	require.Equal(t, "provider down", res.Msg.Event.LastError, "kept until the next attempt")
}

// ListNodes and ListLeaders answer the cluster's rows in their wire form:
// a heartbeat's age and whether the node is lost, a lease's holder and
// times (the rows a running cluster writes: internal/event's
// TestListNodesAndLeadersShowTheCluster).
func TestListNodesAndLeadersOverTheWire(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `INSERT INTO nodes (id, hostname, version, heartbeat_at, started_at) VALUES
		('node-a', 'host-a', 'v9', now(), now() - interval '1 hour'),
		('node-gone', 'host-b', 'v8', now() - interval '2 minutes', now() - interval '1 hour')`)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `INSERT INTO leader_leases (role, holder, elected_at, expires_at) VALUES ('event_worker', 'node-a', now(), now() + interval '1 minute')`)
	require.NoError(t, err)

	nodes, err := b.client.ListNodes(ctx, rpctest.As(b.admin(), &eventpb.ListNodesRequest{}))
	require.NoError(t, err)
	byID := map[string]*eventpb.Node{}
	for _, n := range nodes.Msg.Nodes {
		byID[n.Id] = n
	}
	require.Len(t, byID, 2)
	require.False(t, byID["node-a"].Lost)
	require.Equal(t, "host-a", byID["node-a"].Hostname)
	require.Equal(t, "v9", byID["node-a"].Version)
	require.Less(t, byID["node-a"].HeartbeatAgeSeconds, 10.0)
	require.True(t, byID["node-gone"].Lost, "a 2-minute-old heartbeat is lost after 30 s")
	require.InDelta(t, 120, byID["node-gone"].HeartbeatAgeSeconds, 5)
	_, err = time.Parse(time.RFC3339Nano, byID["node-gone"].StartedAt)
	require.NoError(t, err)

	leaders, err := b.client.ListLeaders(ctx, rpctest.As(b.admin(), &eventpb.ListLeadersRequest{}))
	require.NoError(t, err)
	require.Len(t, leaders.Msg.Leaders, 1)
	l := leaders.Msg.Leaders[0]
	require.Equal(t, "event_worker", l.Role)
	require.Equal(t, "node-a", l.Holder)
	require.True(t, l.Valid)
	expires, err := time.Parse(time.RFC3339Nano, l.ExpiresAt)
	require.NoError(t, err)
	require.True(t, expires.After(time.Now()))
}

func TestListNotificationsFilters(t *testing.T) {
	t.Parallel()
	b := setupAdmin(t)
	ctx := context.Background()
	e := b.insert(t, "order_provisioned", b.order(t))
	n, err := store.InsertNotifications(ctx, b.pool, &e.ID, []store.NewNotification{
		{Recipient: "a@example.com", Channel: "email", Subject: "s", Body: "b"},
		{Recipient: "ops", Channel: "webhook", Subject: "s", Body: "{}"},
	})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = store.InsertNotifications(ctx, b.pool, &e.ID, []store.NewNotification{
		{Recipient: "ops", Channel: "webhook", Subject: "s", Body: "{}"},
	})
	require.NoError(t, err)
	require.Zero(t, n, "one per event, channel and recipient")

	res, err := b.client.ListNotifications(ctx, rpctest.As(b.admin(), &eventpb.ListNotificationsRequest{Pagination: page(1, 10), Channel: ptr("webhook")}))
	require.NoError(t, err)
	require.Len(t, res.Msg.Notifications, 1)
	got := res.Msg.Notifications[0]
	require.Equal(t, "ops", got.Recipient)
	require.Equal(t, e.ID.String(), got.EventId)
	require.Equal(t, "pending", got.Status)
	require.NotEmpty(t, got.NextAttemptAt)

	res, err = b.client.ListNotifications(ctx, rpctest.As(b.admin(), &eventpb.ListNotificationsRequest{Pagination: page(1, 10), EventId: ptr(e.ID.String())}))
	require.NoError(t, err)
	require.Equal(t, uint64(2), res.Msg.Meta.Total)
}
