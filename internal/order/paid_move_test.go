package order_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
)

// A pending order becomes paid only with the order_paid event its worker
// needs; the worker's own move, paid → provisioning, carries none and is
// taken. (transition.go's guard with `from != StatusPending` refused the
// worker's move as Internal, and no test of this package made it.)
func TestAnOrderIsPaidWithItsOrderPaidEventAndTheWorkerMovesItOnWithout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := b.order(t, b.asAlice, "10.00")

	_, err := b.move(t, o.ID, order.Move{To: order.StatusPaid})
	requireKind(t, err, apperr.Internal)
	require.Equal(t, string(order.StatusPending), b.getOrder(t, o.ID).Status)
	require.Empty(t, b.events(t, o.ID))

	paid := &order.OrderPaidPayload{OrderID: o.ID, Amount: money.MustParse("10.00"), Currency: "CNY", Method: order.MethodGateway}
	moved, err := b.move(t, o.ID, order.Move{To: order.StatusPaid, Paid: paid})
	require.NoError(t, err)
	require.Equal(t, string(order.StatusPaid), moved.Order.Status)
	ev := b.events(t, o.ID)
	require.Len(t, ev, 1)
	require.Equal(t, order.EventOrderPaid, ev[0].EventType)
	var got order.OrderPaidPayload
	require.NoError(t, json.Unmarshal(ev[0].Payload, &got))
	require.Equal(t, "10.00", got.Amount.String())

	moved, err = b.move(t, o.ID, order.Move{To: order.StatusProvisioning})
	require.NoError(t, err)
	require.Equal(t, string(order.StatusProvisioning), moved.Order.Status)
	require.Len(t, b.events(t, o.ID), 1, "the worker's move queues nothing")
	a := b.audits(t, "order", o.ID.String())
	require.Equal(t, order.ActionOrderProvisioning, a[len(a)-1].Action)
}
