package event_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/store"
)

// adminWorld is a world with the admin view over its database and an
// admin and a customer to call it as.
type adminWorld struct {
	*bundle
	admin      *event.Admin
	adminID    uuid.UUID
	asAdmin    context.Context
	asCustomer context.Context
}

func setupAdmin(t *testing.T) *adminWorld {
	t.Helper()
	w := &adminWorld{bundle: newWorld(t), adminID: uuid.New()}
	w.admin = event.NewAdmin(w.pool, event.AdminOptions{MaxAttempts: 3, NodeLostAfter: 30 * time.Second, Logger: quietLog()})
	w.asAdmin = auth.WithPrincipal(context.Background(), auth.Principal{Role: auth.RoleAdmin, ID: w.adminID, Kind: auth.KindSession})
	w.asCustomer = auth.WithPrincipal(context.Background(), auth.Principal{Role: auth.RoleCustomer, ID: w.customer, Kind: auth.KindJWT})
	return w
}

// Every operation of the admin view is an admin's, whoever mounts it.
func TestAdminRefusesEveryoneButAnAdmin(t *testing.T) {
	t.Parallel()
	w := setupAdmin(t)
	for name, ctx := range map[string]context.Context{"customer": w.asCustomer, "anonymous": context.Background()} {
		_, _, err := w.admin.ListEvents(ctx, store.EventFilter{}, 1, 10)
		require.Error(t, err, name)
		_, err = w.admin.RetryEvent(ctx, uuid.New())
		require.Error(t, err, name)
		_, err = w.admin.ListNodes(ctx)
		require.Error(t, err, name)
	}
	_, err := w.admin.ListNodes(w.asCustomer)
	require.True(t, apperr.Is(err, apperr.PermissionDenied), "%v", err)
}

func TestRetryEventPutsAFailedEventBackWithFreshAttempts(t *testing.T) {
	t.Parallel()
	w := setupAdmin(t)
	ctx := context.Background()
	e := w.insert(t, "order_paid", w.order(t))

	_, err := w.admin.RetryEvent(w.asAdmin, e.ID)
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "a pending event: %v", err)
	_, err = w.admin.RetryEvent(w.asAdmin, uuid.New())
	require.True(t, apperr.Is(err, apperr.NotFound), "%v", err)

	_, err = w.pool.Exec(ctx, `UPDATE events SET status = 'failed', attempts = 3, last_error = 'provider down' WHERE id = $1`, e.ID)
	require.NoError(t, err)
	got, err := w.admin.RetryEvent(w.asAdmin, e.ID)
	require.NoError(t, err)
	require.Equal(t, store.EventPending, got.Status)
	require.Equal(t, int32(0), got.Attempts)
	require.Equal(t, "provider down", got.LastError, "kept until the next attempt")

	var action, actor string
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT action, actor_id FROM audit_log WHERE entity_type = 'event' AND entity_id = $1`,
		e.ID.String()).Scan(&action, &actor))
	require.Equal(t, event.ActionEventRetry, action)
	require.Equal(t, w.adminID.String(), actor)

	// And the worker takes it again.
	rec := newRecorder(0)
	startNode(t, w.pool, "node-a", nodeOptions{handler: rec})
	w.waitStatus(t, e.ID, store.EventDone, 5*time.Second)
}

func TestListNodesAndLeadersShowTheCluster(t *testing.T) {
	t.Parallel()
	w := setupAdmin(t)
	ctx := context.Background()
	h, err := cluster.NewHeartbeat(w.pool, cluster.HeartbeatOptions{
		Node: cluster.NodeInfo{ID: "node-a", Hostname: "host-a", Version: "v9"}, Interval: 50 * time.Millisecond,
		LostAfter: 10 * time.Second, Logger: quietLog(), // a busy machine may delay beats
	})
	require.NoError(t, err)
	require.NoError(t, h.Start(ctx))
	t.Cleanup(h.Stop)
	_, err = w.pool.Exec(ctx, `INSERT INTO nodes (id, hostname, heartbeat_at, started_at) VALUES ('node-gone', 'host-b', now() - interval '2 minutes', now() - interval '1 hour')`)
	require.NoError(t, err)
	n := startNode(t, w.pool, "node-a", nodeOptions{handler: newRecorder(0)})
	waitLeader(t, 5*time.Second, n)

	var nodes []store.NodeState
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		nodes, err = w.admin.ListNodes(w.asAdmin)
		require.NoError(c, err)
		assert.Len(c, nodes, 2)
	}, 5*time.Second, 10*time.Millisecond)
	byID := map[string]store.NodeState{}
	for _, n := range nodes {
		byID[n.ID] = n
	}
	require.False(t, byID["node-a"].Lost)
	require.Equal(t, "v9", byID["node-a"].Version)
	require.Less(t, byID["node-a"].HeartbeatAge, 10*time.Second)
	require.True(t, byID["node-gone"].Lost, "a 2-minute-old heartbeat is lost after 30 s")
	require.InDelta(t, 120, byID["node-gone"].HeartbeatAge.Seconds(), 5)

	leaders, err := w.admin.ListLeaders(w.asAdmin)
	require.NoError(t, err)
	require.Len(t, leaders, 1)
	l := leaders[0]
	require.Equal(t, cluster.RoleEventWorker, l.Role)
	require.Equal(t, "node-a", l.Holder)
	require.True(t, l.Valid)
	require.True(t, l.ExpiresAt.After(time.Now()))
}
