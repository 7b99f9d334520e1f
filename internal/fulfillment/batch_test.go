package fulfillment_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/fulfillment"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
)

// payAll pays the orders in one transaction, so that their order_paid
// events become visible together and one claim round takes them all.
func (r *bundle) payAll(t testing.TB, ids []uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, store.WithTx(ctx, r.pool, func(tx pgx.Tx) error {
		now := time.Now().UTC().Truncate(time.Microsecond)
		for _, id := range ids {
			if _, err := store.Q(tx).SetOrderStatus(ctx, store.SetOrderStatusParams{
				ID: id, FromStatus: "pending", ToStatus: "paid", PaidAt: &now, UpdatedAt: now,
			}); err != nil {
				return err
			}
			payload, err := json.Marshal(order.OrderPaidPayload{OrderID: id, Amount: money.MustParse("12.30"), Currency: "CNY", Method: order.MethodGateway})
			if err != nil {
				return err
			}
			if _, err := store.Q(tx).InsertEvent(ctx, store.InsertEventParams{EventType: order.EventOrderPaid, OrderID: id, Payload: payload}); err != nil {
				return err
			}
		}
		return nil
	}))
}

// refusesOnce is the plugin provisioner, but its first call for order
// fails.
type refusesOnce struct {
	fulfillment.Provisioner
	order uuid.UUID
	once  sync.Once
}

func (p *refusesOnce) Provision(ctx context.Context, req fulfillment.ProvisionRequest) (string, json.RawMessage, error) {
	var refuse bool
	if req.Order.ID == p.order {
		p.once.Do(func() { refuse = true })
	}
	if refuse {
		return "", nil, errors.New("provider busy, try again")
	}
	return p.Provisioner.Provision(ctx, req)
}

// Orders paid together are provisioned as a batch (one transaction per
// step for all of them, the provider called for each outside it): each
// ends exactly as one provisioned alone does — active, one instance
// running at the provider, the same audit rows, order_paid then
// order_provisioned, each done once — and the order whose provider call
// failed is retried alone and ends the same way, the others not held
// back by it.
func TestOrdersPaidTogetherAreProvisionedAsABatchEachAsIfAlone(t *testing.T) {
	t.Parallel()
	prov := &refusesOnce{}
	r := setup(t, rigOptions{wrapProvisioner: func(p fulfillment.Provisioner) fulfillment.Provisioner {
		prov.Provisioner = p
		return prov
	}})
	ids := make([]uuid.UUID, 6)
	for i := range ids {
		ids[i] = r.order(t, &r.product, time.Time{})
	}
	prov.order = ids[3]
	r.payAll(t, ids)

	var paidDone []time.Time
	for _, id := range ids {
		r.waitOrder(t, id, string(order.StatusActive))
		es := r.waitEventsDone(t, id, 2)
		require.Equal(t, order.EventOrderPaid, es[0].EventType)
		require.Equal(t, order.EventOrderProvisioned, es[1].EventType)
		inst := r.instance(t, id)
		require.Equal(t, store.InstanceRunning, inst.Status)
		require.Equal(t, 1, r.api.InstancesFor(id.String()), "order %s", id)
		require.Equal(t, []string{fulfillment.ActionInstanceCreate, fulfillment.ActionInstanceReady}, r.auditActions(t, "instance", inst.ID.String()))
		require.Equal(t, []string{order.ActionOrderProvisioning, order.ActionOrderActivate}, r.auditActions(t, "order", id.String()))
		if id == prov.order {
			require.EqualValues(t, 2, es[0].Attempts, "the refused order was retried")
			continue
		}
		require.EqualValues(t, 1, es[0].Attempts)
		paidDone = append(paidDone, es[0].UpdatedAt)
	}
	same := 0
	for _, at := range paidDone {
		if at.Equal(paidDone[0]) {
			same++
		}
	}
	require.Greater(t, same, 1, "order_paid events completed in one batch transaction: %v", paidDone)
}
