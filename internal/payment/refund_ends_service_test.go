package payment_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// A full refund of the payment of a running service's current period ends
// the service now (terminated, reason refunded) and answers the payment as
// refunded. Found by the mutation run: the end's error test turned around
// (a service ended answered with an empty payment, an end that failed went
// on to commit) passed every test of the package, which refunded no
// running service.
func TestAFullRefundOfTheCurrentPeriodsPaymentEndsTheServiceAndAnswersThePayment(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	ctx := context.Background()
	_, err := f.pool.Exec(ctx, `UPDATE customers SET balance = 100.00 WHERE id = $1`, f.alice)
	require.NoError(t, err)
	orderID := f.order(t, "30.00")
	paid, err := order.NewService(f.pool, []string{"CNY"}, nil, nil, nil).PayWithBalance(f.asAlice, orderID)
	require.NoError(t, err)
	// The order runs a monthly service whose first period it paid.
	now := time.Now().UTC()
	_, err = f.pool.Exec(ctx, `UPDATE orders SET status = 'active', billing_cycle = 'monthly', renewal_price = 30.00, renews = true,
		paid_until = $2 WHERE id = $1`, orderID, now.Add(29*24*time.Hour))
	require.NoError(t, err)
	_, err = f.pool.Exec(ctx, `INSERT INTO service_periods (order_id, seq, starts_at, ends_at, anchor_at, anchor_months, status, paid_at)
		VALUES ($1, 1, $2, $3, $2, 1, 'paid', $2)`, orderID, now.Add(-24*time.Hour), now.Add(29*24*time.Hour))
	require.NoError(t, err)

	res, err := f.svc.RefundPayment(f.admin, paid.Payment.ID, "", "left at once", "")
	require.NoError(t, err)
	require.Equal(t, paid.Payment.ID, res.Payment.ID, "the answer is the payment")
	require.Equal(t, "refunded", res.Payment.Status)
	require.Equal(t, "30.00", res.Payment.RefundedAmount.String())
	require.Equal(t, "terminated", f.orderStatus(t, orderID), "the service ends now")
	var outcome string
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT coalesce(outcome, '') FROM service_periods WHERE order_id = $1 AND seq = 1`, orderID).Scan(&outcome))
	require.Equal(t, "ended", outcome, "its period closes ended now")
	testfixture.CheckMoneyInvariants(t, f.pool)
}
