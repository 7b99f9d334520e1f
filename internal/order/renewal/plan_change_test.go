package renewal_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// A period-end change to a quarterly plan at 20.00, and one pass that
// catches up past the start of the period it billed and into the next
// one's invoice day (a leader down for weeks, or the test clock moved in
// one step): the change takes effect at the start of the period it
// billed, and the next period bills the plan the order now has. Found by
// the renewal model: the renewal step billed the change a second time, on
// the next period, so the order kept its old plan through the period the
// customer paid the new price for.
func TestAPassThatCatchesUpAppliesAPeriodEndChangeBeforeBillingTheNextPeriod(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.January, 10, 0), defaults())
	ctx := context.Background()
	orders := order.NewService(b.pool, []string{"CNY"}, nil, b.clock.Now, slog.New(slog.DiscardHandler))
	customer := testfixture.Customer(t, b.pool)
	id := b.activeOrder(t, customer, "monthly", "7.00")
	var quarterly uuid.UUID
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO products (name, price, currency, billing_cycle)
		VALUES ('VPS 4 GB quarterly', 20.00, 'CNY', 'quarterly') RETURNING id`).Scan(&quarterly))
	res, err := orders.ChangeOrderPlan(asCustomer(customer), id, quarterly, store.PlanChangePeriodEnd)
	require.NoError(t, err)
	b.topUp(t, customer, "100.00")

	// Period 2 (Feb 10 to May 10) bills the new plan, paid from the balance.
	b.clock.Set(at(time.February, 4, 0))
	r := b.pass(t)
	require.Equal(t, 1, r.Issued)
	ps := b.periods(t, id)
	require.Len(t, ps, 2)
	require.Equal(t, "20.00", b.invoice(t, *ps[1].InvoiceID).Amount.String())
	require.True(t, ps[1].EndsAt.Equal(at(time.May, 10, 0)), "a new cycle counts from the period's start: %s", ps[1].EndsAt)

	// No pass until May 4: period 3's invoice day, long after period 2
	// began.
	b.clock.Set(at(time.May, 4, 0))
	r = b.pass(t)
	require.Equal(t, 1, r.Issued)
	ch, err := store.Q(b.pool).GetPlanChangeForUpdate(ctx, res.Change.ID)
	require.NoError(t, err)
	require.Equal(t, store.PlanChangeApplied, ch.Status)
	require.NotNil(t, ch.PeriodSeq)
	require.EqualValues(t, 2, *ch.PeriodSeq, "the change bills period 2, not again the next one")
	require.True(t, ch.EffectiveAt.Equal(ps[1].StartsAt), "effective at period 2's start, not %s", ch.EffectiveAt)
	o := b.order(t, id)
	require.Equal(t, quarterly, *o.ProductID)
	require.Equal(t, "quarterly", o.BillingCycle)
	require.Equal(t, money.MustParse("20.00"), o.RenewalPrice.Amount)
	ps = b.periods(t, id)
	require.Len(t, ps, 3)
	require.Equal(t, "20.00", b.invoice(t, *ps[2].InvoiceID).Amount.String())
	require.True(t, ps[2].EndsAt.Equal(at(time.August, 10, 0)), "period 3 is the next quarter: %s", ps[2].EndsAt)
	require.Equal(t, []string{order.EventOrderPaid, order.EventPlanChanged}, planEvents(t, b, id), "plan_changed once")
	b.checkMoney(t)
}

// planEvents are the order's events but renewals and reminders, in order.
func planEvents(t *testing.T, b *bundle, id uuid.UUID) []string {
	t.Helper()
	var out []string
	for _, e := range b.eventTypes(t, id) {
		if e == order.EventOrderPaid || e == order.EventPlanChanged || e == order.EventPlanChangeLapsed {
			out = append(out, e)
		}
	}
	return out
}

// An upgrade asked nine days before the period's end and not paid when
// the billing run issues the next period's invoice (at the old price,
// seven days before the end) lapses then, before its own lapse time: paid
// later, it would have served the new plan through a period billed at the
// old price. The buyer who pays the proration at the gateway after that
// has the money recorded to return, and the order keeps its plan. Found
// writing the renewal model's rule that no period billed at the old plan
// is served on the new one (the model reaches the case rarely).
func TestAnUnpaidUpgradeLapsesWhenTheNextPeriodIsBilled(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.January, 1, 0), defaults())
	w := newPayWorld(t, b)
	ctx := context.Background()
	customer := testfixture.Customer(t, b.pool)
	id := b.activeOrder(t, customer, "monthly", "7.00")
	var dear uuid.UUID
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO products (name, price, currency, billing_cycle)
		VALUES ('VPS 4 GB', 13.37, 'CNY', 'monthly') RETURNING id`).Scan(&dear))
	b.clock.Set(at(time.January, 23, 0))
	res, err := w.orders.ChangeOrderPlan(asCustomer(customer), id, dear, store.PlanChangeNow)
	require.NoError(t, err)
	require.Equal(t, store.PlanChangePending, res.Change.Status)
	require.True(t, res.Change.LapseAt.Equal(at(time.January, 26, 0)))
	started, err := w.pays.CreatePayment(asCustomer(customer), payment.NewPayment{InvoiceID: &res.Invoice.ID, GatewayInterfaceID: w.gw.InterfaceID, ReturnURL: "https://shop.example/done"})
	require.NoError(t, err)

	// Jan 25: the February period is billed at the plan the order has, and
	// the upgrade lapses with its invoice.
	b.clock.Set(at(time.January, 25, 1))
	r := b.pass(t)
	require.Equal(t, 1, r.Issued)
	ps := b.periods(t, id)
	require.Len(t, ps, 2)
	require.Equal(t, "7.00", b.invoice(t, *ps[1].InvoiceID).Amount.String())
	ch, err := store.Q(b.pool).GetPlanChangeForUpdate(ctx, res.Change.ID)
	require.NoError(t, err)
	require.Equal(t, store.PlanChangeLapsed, ch.Status)
	require.Equal(t, string(order.InvoiceCancelled), b.invoice(t, res.Invoice.ID).Status)
	require.Equal(t, []string{order.EventOrderPaid, order.EventPlanChangeLapsed}, planEvents(t, b, id))

	// The buyer pays the proration at the gateway all the same: recorded,
	// to return; the order keeps its plan.
	var once sync.Once // the helpers want a *rapid.T; one run is the test
	rapid.Check(t, func(rt *rapid.T) {
		once.Do(func() {
			gp := &gatewayPayment{id: started.ID}
			w.take(rt, gp)
			w.deliver(rt, gp, 1)
			checkTakenMoneyRecorded(rt, b, []*gatewayPayment{gp})
		})
	})
	o := b.order(t, id)
	require.Equal(t, "7.00", o.RenewalPrice.Amount.String())
	require.Nil(t, o.ProductID)
	b.checkMoney(t)
}
