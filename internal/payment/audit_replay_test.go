package payment_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/store"
)

// replay applies an entity's audit history in order, as internal/audit
// promises it can be read: a creation (no before) sets the whole state, a
// change removes what before names and after does not, and sets after.
// Notes (payment.anomaly) record an observation, not a change, and are
// skipped; "source" tells what settled a payment, a mark of that row
// rather than a field of the payment, and is left out.
func replay(t *testing.T, f *flowBundle, entityType, entityID string) map[string]any {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT before, after FROM audit_log
		WHERE entity_type = $1 AND entity_id = $2 AND action <> $3 ORDER BY id`, entityType, entityID, payment.ActionPaymentAnomaly)
	require.NoError(t, err)
	defer rows.Close()
	var state map[string]any
	for rows.Next() {
		var before, after map[string]any
		require.NoError(t, rows.Scan(&before, &after))
		if before == nil {
			state = after
			continue
		}
		require.NotNil(t, state, "a change before the %s's creation", entityType)
		for k := range before {
			if _, kept := after[k]; !kept {
				delete(state, k)
			}
		}
		for k, v := range after {
			state[k] = v
		}
	}
	require.NoError(t, rows.Err())
	delete(state, "source")
	return state
}

// asJSON is a snapshot as its audit rows read back.
func asJSON(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

// A payment's and an invoice's rows are written by internal/order and
// internal/payment in turn; each entity has one snapshot, so its history
// replays to the snapshot of the row as it is now.
func TestAuditHistoriesReplayToTheEntitysOneSnapshot(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	ctx := context.Background()
	orders := order.NewService(f.pool, []string{"CNY"}, nil, nil, nil)
	checkPayment := func(t *testing.T, id uuid.UUID) {
		t.Helper()
		require.Equal(t, asJSON(t, order.PaymentSnapshot(f.payment(t, id))), replay(t, f, "payment", id.String()))
	}

	t.Run("BalancePaymentCreatedByOrderRefundedByPayment", func(t *testing.T) {
		_, err := f.pool.Exec(ctx, `UPDATE customers SET balance = 100.00 WHERE id = $1`, f.alice)
		require.NoError(t, err)
		paid, err := orders.PayWithBalance(f.asAlice, f.order(t, "30.00"))
		require.NoError(t, err)
		checkPayment(t, paid.Payment.ID)
		_, err = f.svc.RefundPayment(f.admin, paid.Payment.ID, "10.00", "partly unused", "")
		require.NoError(t, err)
		checkPayment(t, paid.Payment.ID)
	})

	t.Run("GatewayPaymentFailedByOrderThenCaptured", func(t *testing.T) {
		orderID := f.order(t, "15.00")
		p := f.pay(t, orderID)
		_, err := orders.CancelOrder(f.asAlice, orderID)
		require.NoError(t, err)
		checkPayment(t, p.ID)
		_, err = f.svc.HandleCallback(ctx, f.callbackOf(notify(p.ID, "T9", "15.00")))
		require.Error(t, err, "a late success is captured, not applied")
		require.Equal(t, "15.00", f.payment(t, p.ID).CapturedAmount.String())
		checkPayment(t, p.ID)
	})

	t.Run("InvoiceCreatedByOrderPaidByPayment", func(t *testing.T) {
		inv, err := orders.CreateInvoice(f.admin, order.NewInvoice{
			CustomerID: &f.alice, Amount: money.MustParse("12.00"), Currency: "CNY", Description: "extras",
			DueAt: time.Now().Add(24 * time.Hour),
		})
		require.NoError(t, err)
		p, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{InvoiceID: &inv.ID, GatewayInterfaceID: f.epayGW, ReturnURL: "https://x.example"})
		require.NoError(t, err)
		_, err = f.svc.HandleCallback(ctx, f.callbackOf(notify(p.ID, "T1", "12.00")))
		require.NoError(t, err)
		now, err := store.Q(f.pool).GetInvoice(ctx, inv.ID)
		require.NoError(t, err)
		require.Equal(t, "paid", now.Status)
		require.Equal(t, asJSON(t, order.InvoiceSnapshot(now)), replay(t, f, "invoice", inv.ID.String()))
		checkPayment(t, p.ID)
	})
}
