package order_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
)

// Suspending, resuming and ending a running service each queue the event
// its provider acts on, naming the order's instance and the reason.
// (transition.go's `err != nil` after the suspension's and the
// resumption's instance lookups, negated, returned before queueing
// anything, and no test of this package looked.)
func TestSuspendResumeAndTerminateQueueTheServiceEventsOfTheInstance(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var id, inst uuid.UUID
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO orders (customer_id, total_amount, currency, status, billing_cycle, renewal_price, paid_at, description)
		VALUES ($1, 30, 'CNY', 'provisioning', 'monthly', $2, now(), 'VPS') RETURNING id`, b.alice, money.MustParse("30.00")).Scan(&id))
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO instances (customer_id, order_id, status) VALUES ($1, $2, 'running') RETURNING id`, b.alice, id).Scan(&inst))
	_, err := b.move(t, id, order.Move{To: order.StatusActive, InstanceID: &inst})
	require.NoError(t, err)

	last := func(want string) order.ServicePayload {
		t.Helper()
		ev := b.events(t, id)
		require.Equal(t, want, ev[len(ev)-1].EventType)
		var p order.ServicePayload
		require.NoError(t, json.Unmarshal(ev[len(ev)-1].Payload, &p))
		require.Equal(t, id, p.OrderID)
		require.NotNil(t, p.InstanceID, "%s names the instance", want)
		require.Equal(t, inst, *p.InstanceID)
		return p
	}

	moved, err := b.move(t, id, order.Move{To: order.StatusSuspended, SuspendReason: order.SuspendReasonAdmin, At: time.Now().Add(time.Second)})
	require.NoError(t, err)
	require.Equal(t, string(order.StatusSuspended), moved.Order.Status)
	require.Equal(t, order.SuspendReasonAdmin, last(order.EventServiceSuspended).Reason)

	moved, err = b.move(t, id, order.Move{To: order.StatusActive, At: time.Now().Add(2 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, string(order.StatusActive), moved.Order.Status)
	require.Empty(t, last(order.EventServiceResumed).Reason)

	moved, err = b.move(t, id, order.Move{To: order.StatusTerminated, EndReason: order.EndReasonAdmin, At: time.Now().Add(3 * time.Second)})
	require.NoError(t, err)
	require.Equal(t, string(order.StatusTerminated), moved.Order.Status)
	require.Equal(t, order.EndReasonAdmin, last(order.EventServiceTerminated).Reason)
	require.Len(t, b.events(t, id), 4, "order_provisioned, then one event a move")
}
