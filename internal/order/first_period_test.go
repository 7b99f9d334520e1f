package order_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
)

// A recurring order that goes active is paid for one cycle from that
// moment: its first period, the order's paid_until and its instance's
// expiry all end a month later. (startFirstPeriod's SetPaidEnd skipped, as
// gremlins' negation of the insert's error check did, left the order paid
// until nothing and the instance without an expiry, and no test noticed.)
func TestARecurringOrderThatGoesActiveIsPaidUntilItsFirstPeriodEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	start := time.Date(2026, 1, 31, 10, 0, 0, 0, time.UTC)
	var id uuid.UUID
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO orders (customer_id, total_amount, currency, status, billing_cycle, renewal_price, paid_at, description)
		VALUES ($1, 30, 'CNY', 'provisioning', 'monthly', $2, $3, 'VPS') RETURNING id`, b.alice, money.MustParse("30.00"), start).Scan(&id))
	b.exec(t, `INSERT INTO instances (customer_id, order_id, status) VALUES ($1, $2, 'running')`, b.alice, id)

	moved, err := b.move(t, id, order.Move{To: order.StatusActive, At: start})
	require.NoError(t, err)
	require.Equal(t, string(order.StatusActive), moved.Order.Status)

	end := order.AddMonths(start, 1, time.UTC)
	ps := b.periodsOf(t, id)
	require.Len(t, ps, 1)
	require.True(t, ps[0].StartsAt.Equal(start), "starts %s", ps[0].StartsAt)
	require.True(t, ps[0].EndsAt.Equal(end), "ends %s, want %s", ps[0].EndsAt, end)
	require.Equal(t, store.PeriodPaid, ps[0].Status)

	o := b.getOrder(t, id)
	require.NotNil(t, o.PaidUntil, "the order is paid until its first period's end")
	require.True(t, o.PaidUntil.Equal(end), "paid_until %s, want %s", *o.PaidUntil, end)
	var expires *time.Time
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT expires_at FROM instances WHERE order_id = $1`, id).Scan(&expires))
	require.NotNil(t, expires, "the instance expires with the paid period")
	require.True(t, expires.Equal(end), "expires_at %s, want %s", *expires, end)
}
