package order_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/ordertest"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// maxPlanChangeRoundTrips bounds the round trips of an upgrade paid from
// the balance, BEGIN to COMMIT.
const maxPlanChangeRoundTrips = 14

// An upgrade paid from the balance at once answers the invoice, the change
// and the order as its own statements wrote them: it reads none of them
// back, and paying its proration invoice neither looks the change and the
// order up again nor looks for a renewal period the invoice cannot bill
// (docs/performance.md, "A plan change against a renewal").
func TestAnUpgradePaidFromTheBalanceReadsBackNothingItWrote(t *testing.T) {
	t.Parallel()
	pool, trips := testdb.TracedPool(t, testdb.URL(t))

	start := time.Date(2027, time.February, 1, 0, 0, 0, 0, time.UTC)
	ob := ordertest.SetupWithPool(t, pool)
	clock := testkit.NewClockAt(start.Add(9 * 24 * time.Hour))
	svc := order.NewService(pool, ordertest.Currencies, nil, clock.Now, slog.New(slog.DiscardHandler)).
		WithBillingClock(clock.Now).WithPlanChanges(7, order.CreditBalance)
	small, big := ob.Product(t, "10.00", "CNY"), ob.Product(t, "30.00", "CNY")
	_, err := pool.Exec(context.Background(), `UPDATE products SET billing_cycle = 'monthly' WHERE id = ANY($1)`, []any{small.ID, big.ID})
	require.NoError(t, err)
	ids := seedPlanServices(t, pool, 2, small.ID, start, start.AddDate(0, 1, 0))

	var sent []string
	for _, id := range ids { // the first prepares the statements
		trips.Reset()
		res, err := svc.ChangeOrderPlan(ob.AsAdmin, id, big.ID, store.PlanChangeNow)
		sent = trips.Reset()
		require.NoError(t, err)
		require.Equal(t, store.PlanChangeApplied, res.Change.Status)
		require.Equal(t, big.ID, *res.Order.ProductID)
		require.Equal(t, "30.00", res.Order.RenewalPrice.Amount.String())
		require.Equal(t, "paid", res.Invoice.Status)
		require.True(t, res.Invoice.PaidAmount.Equal(res.Invoice.Amount), "the invoice as paid")
		require.Equal(t, res.Invoice.ID, *res.Change.InvoiceID)
	}
	for i, s := range sent {
		t.Logf("  %2d %s", i+1, s)
	}
	// BEGIN goes with the first locks, and the audit rows, the invoice's
	// lines and the event with the next statement that answers, and the
	// change is written once, applied: 14 round trips, not 26.
	require.LessOrEqual(t, len(sent), maxPlanChangeRoundTrips)
	for _, name := range []string{"GetInvoice", "GetPlanChangeForUpdate", "GetOrder", "PlanChangeByInvoiceForUpdate", "GetOrderForUpdate", "GetServicePeriodByInvoiceForUpdate", "SetPlanChangeStatus"} {
		require.NotContains(t, sent, name)
	}
}
