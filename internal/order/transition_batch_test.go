package order_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
)

// TransitionAll writes, for a batch of orders, what Transition writes for
// each of them: every order row, audit row, event and service period of
// a batch moved together equals its twin's, moved one at a time. The batch
// mixes the moves written together (paid → provisioning, one-time orders
// going active) with those that are not (a monthly order going active
// starts a period; a move unlike the batch's first), in one order.
func TestTransitionAllWritesWhatTransitionWritesForEachOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	at := store.Timestamp(time.Date(2026, 3, 31, 9, 30, 0, 0, time.UTC))
	paidAt := at.Add(-time.Minute)
	by := audit.System("node-a")

	type twin struct {
		status, cycle string
		to            order.Status
		instance      *uuid.UUID
	}
	inst := func() *uuid.UUID { id := uuid.New(); return &id }
	for _, batch := range [][]twin{
		{ // paid → provisioning together, the others alone
			{status: "paid", cycle: "one_time", to: order.StatusProvisioning},
			{status: "provisioning", cycle: "monthly", to: order.StatusActive, instance: inst()},
			{status: "paid", cycle: "one_time", to: order.StatusProvisioning},
			{status: "provisioning", cycle: "one_time", to: order.StatusActive, instance: inst()},
			{status: "paid", cycle: "one_time", to: order.StatusProvisioning},
		},
		{ // one-time orders active together, with their events
			{status: "provisioning", cycle: "one_time", to: order.StatusActive, instance: inst()},
			{status: "provisioning", cycle: "one_time", to: order.StatusActive},
			{status: "provisioning", cycle: "monthly", to: order.StatusActive, instance: inst()},
			{status: "provisioning", cycle: "one_time", to: order.StatusActive, instance: inst()},
		},
	} {
		newOrder := func(tw twin) uuid.UUID {
			var id uuid.UUID
			require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO orders (customer_id, total_amount, currency, status, billing_cycle, renewal_price, paid_at, description)
				VALUES ($1, 30, 'CNY', $2, $3, CASE WHEN $3 = 'one_time' THEN NULL ELSE $4::numeric END, $5, 'VPS') RETURNING id`,
				b.alice, tw.status, tw.cycle, money.MustParse("30.00"), paidAt).Scan(&id))
			return id
		}
		alone := make([]uuid.UUID, len(batch))
		together := make([]uuid.UUID, len(batch))
		for i, tw := range batch {
			alone[i], together[i] = newOrder(tw), newOrder(tw)
		}
		move := func(i int) order.Move {
			return order.Move{To: batch[i].to, By: by, At: at, InstanceID: batch[i].instance}
		}
		for i, id := range alone {
			_, err := b.move(t, id, move(i))
			require.NoError(t, err)
		}
		var moved []store.Order
		require.NoError(t, store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
			os, err := store.Q(tx).LockOrdersForUpdate(ctx, together)
			require.NoError(t, err)
			byID := map[uuid.UUID]store.Order{}
			for _, o := range os {
				byID[o.ID] = o
			}
			in := make([]store.Order, len(together))
			ms := make([]order.Move, len(together))
			for i, id := range together {
				in[i], ms[i] = byID[id], move(i)
			}
			moved, err = order.TransitionAll(ctx, tx, in, ms)
			return err
		}))
		require.Len(t, moved, len(batch))

		for i := range batch {
			want, got := b.getOrder(t, alone[i]), b.getOrder(t, together[i])
			require.Equal(t, together[i], moved[i].ID, "result %d is the order given at %d", i, i)
			require.Equal(t, got.Status, moved[i].Status, "the result is the row as written")
			require.Equal(t, want.Status, got.Status, "order %d", i)
			require.True(t, want.UpdatedAt.Equal(got.UpdatedAt), "order %d updated_at", i)
			require.Equal(t, want.PaidAt, got.PaidAt, "order %d paid_at", i)
			require.Equal(t, want.PaidUntil, got.PaidUntil, "order %d paid_until", i)
			require.Equal(t, want.SuspendReason, got.SuspendReason, "order %d", i)

			wantAudits, gotAudits := b.audits(t, "order", alone[i].String()), b.audits(t, "order", together[i].String())
			require.Len(t, gotAudits, 1, "order %d: one audit row", i)
			require.Equal(t, withoutIDs(wantAudits, alone[i]), withoutIDs(gotAudits, together[i]), "order %d's audit rows", i)

			wantEvents, gotEvents := b.events(t, alone[i]), b.events(t, together[i])
			require.Equal(t, len(wantEvents), len(gotEvents), "order %d's events", i)
			for j := range wantEvents {
				require.Equal(t, wantEvents[j].EventType, gotEvents[j].EventType)
				require.JSONEq(t, payloadOf(t, wantEvents[j], alone[i]), payloadOf(t, gotEvents[j], together[i]), "order %d's %s", i, gotEvents[j].EventType)
			}
			if batch[i].to == order.StatusActive {
				require.Len(t, gotEvents, 1, "order %d: order_provisioned", i)
			}
			require.Equal(t, len(b.periodsOf(t, alone[i])), len(b.periodsOf(t, together[i])), "order %d's service periods", i)
		}
	}
}

// withoutIDs is the audit rows with the order's own id blanked, so that
// twins compare.
func withoutIDs(rows []auditRow, id uuid.UUID) []auditRow {
	out := make([]auditRow, len(rows))
	for i, r := range rows {
		r.EntityID = ""
		for _, m := range []map[string]any{r.Before, r.After} {
			if m["id"] == id.String() {
				m["id"] = ""
			}
		}
		out[i] = r
	}
	return out
}

// payloadOf is an event's payload with the order's own id blanked.
func payloadOf(t *testing.T, e store.Event, id uuid.UUID) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(e.Payload, &m))
	if m["order_id"] == id.String() {
		m["order_id"] = ""
	}
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return string(out)
}
