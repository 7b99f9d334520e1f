package order

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/store"
)

// TransitionAll is Transition for the orders of one batch of the event
// worker: os[i] (locked in tx by the caller, with LockOrdersForUpdate)
// moves by ms[i], and the result's i-th order is os[i] as it is now.
//
// The moves whose consequences read nothing of their own — paid →
// provisioning, and provisioning → active of a one-time order (no service
// period to start) — that share the first such move's from, To, By and At
// are written together: the orders in one statement (MoveOrders), their
// order_provisioned events in one (AppendEvents), and their audit rows as
// Transition writes them (a pipelined transaction sends the waiting rows
// as one statement). What they write is what Transition writes for each,
// in the same transaction; only the statements are fewer. Every other move
// goes through Transition, one order at a time, in the order given.
func TransitionAll(ctx context.Context, tx pgx.Tx, os []store.Order, ms []Move) ([]store.Order, error) {
	if len(os) != len(ms) {
		return nil, store.Bug(errBatchShape, "TransitionAll: %d orders, %d moves", len(os), len(ms))
	}
	out := make([]store.Order, len(os))
	var together []int // indexes of the moves written together
	for i, o := range os {
		if len(together) == 0 && batchable(o, ms[i]) ||
			len(together) > 0 && batchable(o, ms[i]) && sameMove(os[together[0]], ms[together[0]], o, ms[i]) {
			together = append(together, i)
			continue
		}
		moved, err := Transition(ctx, tx, o, ms[i])
		if err != nil {
			return nil, err
		}
		out[i] = moved.Order
	}
	if len(together) == 0 {
		return out, nil
	}
	first := together[0]
	from, m := Status(os[first].Status), ms[first]
	ids := make([]uuid.UUID, len(together))
	for j, i := range together {
		ids[j] = os[i].ID
	}
	rows, err := store.Q(tx).MoveOrders(ctx, store.MoveOrdersParams{
		Ids: ids, FromStatus: string(from), ToStatus: string(m.To), UpdatedAt: m.At,
	})
	if err != nil {
		return nil, err
	}
	if len(rows) != len(ids) {
		// The rows are locked by the caller in status from: a miss is a bug.
		return nil, store.Bug(errBatchShape, "%d of %d orders moved %s → %s", len(rows), len(ids), from, m.To)
	}
	byID := store.ByKey(rows, func(r store.Order) uuid.UUID { return r.ID })
	action := TransitionAction(from, m.To)
	var payloads [][]byte
	for _, i := range together {
		o := os[i]
		out[i] = byID[o.ID]
		after := orderSnapshot(out[i])
		after.Note = ms[i].Note
		if err := audit.Write(ctx, tx, ms[i].By, ms[i].At, action, entityOrder, o.ID.String(), orderSnapshot(o), after); err != nil {
			return nil, err
		}
		if m.To == StatusActive {
			body, err := json.Marshal(OrderProvisionedPayload{OrderID: o.ID, InstanceID: ms[i].InstanceID})
			if err != nil {
				return nil, err
			}
			payloads = append(payloads, body)
		}
	}
	if m.To == StatusActive {
		return out, store.AppendEvents(ctx, tx, EventOrderProvisioned, ids, payloads)
	}
	return out, nil
}

// errBatchShape is what a TransitionAll that cannot be written as asked
// wraps.
var errBatchShape = apperr.New(apperr.Internal, "order batch")

// batchable reports whether TransitionAll may write the move m of o with
// others: a move Transition allows whose consequences read nothing.
func batchable(o store.Order, m Move) bool {
	from := Status(o.Status)
	if !CanTransition(from, m.To) || m.EndCredit != nil {
		return false
	}
	switch {
	case from == StatusPaid && m.To == StatusProvisioning:
		return true
	case from == StatusProvisioning && m.To == StatusActive:
		return BillingCycle(o.BillingCycle).Months() == 0
	}
	return false
}

// sameMove reports whether two batchable moves can share one statement.
func sameMove(a store.Order, am Move, b store.Order, bm Move) bool {
	return a.Status == b.Status && am.To == bm.To && am.At.Equal(bm.At) && am.By == bm.By
}
