package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// The test clock is the one clock of billing (issue 38, §5): a rehearsal
// that moves the clock 40 days and then buys behaves as one that bought
// first. The monthly order's first period starts at the billing clock's
// now (before the fix: at the real now, 40 days earlier, so that the next
// pass issued its renewal invoice at once and, that invoice 10 days past
// due, suspended the brand-new service); its renewal invoice is issued 7
// days before the period's end on the billing clock, due at that end; and
// the gateway payment of that invoice pays the period at a time on the
// billing clock.
func TestAnOrderBoughtAfterMovingTheTestClockRunsOnTheBillingClock(t *testing.T) {
	t.Parallel()
	e := startPayments(t, func(c *config.Config) {
		c.Billing.TestClock = true
		c.Events.PollInterval = 100 * time.Millisecond
		c.Events.RetryBase = 20 * time.Millisecond
		c.Events.RetryMax = 50 * time.Millisecond
	})
	ctx := context.Background()
	advance := func(d time.Duration) *orderpb.AdvanceBillingClockResponse {
		t.Helper()
		res, err := e.orders.AdvanceBillingClock(ctx, with(&orderpb.AdvanceBillingClockRequest{Seconds: int64(d / time.Second)}, e.c.admin))
		require.NoError(t, err)
		return res.Msg
	}
	at := func(s, what string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err, what)
		return v
	}

	// 1. The clock moves 40 days (nothing to bill yet).
	moved := advance(40 * 24 * time.Hour)
	billingNow := at(moved.GetNow(), "now")
	require.WithinDuration(t, time.Now().Add(40*24*time.Hour), billingNow, time.Minute)
	offset := billingNow.Sub(time.Now())

	// 2. A monthly order is bought and paid through the gateway.
	prod, err := e.orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{Name: "VPS monthly", Price: "10.00", Currency: "CNY", BillingCycle: "monthly"}, e.c.admin))
	require.NoError(t, err)
	placed, err := e.orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: prod.Msg.GetProduct().GetId()}, e.c.customer))
	require.NoError(t, err)
	id := placed.Msg.GetOrder().GetId()
	before := time.Now().Add(offset).Add(-2 * time.Second)
	first := e.createPaymentVia(t, id, e.epayGW).GetPayment()
	require.NoError(t, e.fake.Pay(first.GetId()))
	e.waitSettled(t, first.GetId())
	e.waitOrderStatus(t, id, "active")
	after := time.Now().Add(offset).Add(2 * time.Second)

	get := func() *orderpb.GetOrderResponse {
		t.Helper()
		res, err := e.orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: id}, e.c.customer))
		require.NoError(t, err)
		return res.Msg
	}
	got := get()
	require.Len(t, got.GetPeriods(), 1)
	p1 := got.GetPeriods()[0]
	start := at(p1.GetStartsAt(), "starts_at")
	require.True(t, !start.Before(before) && !start.After(after),
		"the first period starts at the billing clock's now (%s..%s), not the real one: %s", before, after, start)
	require.Equal(t, p1.GetStartsAt(), p1.GetPaidAt(), "paid when it started, on the billing clock")
	end := at(got.GetOrder().GetPaidUntil(), "paid_until")
	require.Equal(t, p1.GetEndsAt(), got.GetOrder().GetPaidUntil())
	require.True(t, end.Sub(start) >= 28*24*time.Hour && end.Sub(start) <= 31*24*time.Hour, "one month: %s .. %s", start, end)

	// 3. The next pass leaves the brand-new service alone: no invoice, no
	// suspension.
	r := advance(time.Minute)
	require.Zero(t, r.GetIssued())
	require.Zero(t, r.GetOverdue())
	require.Zero(t, r.GetSuspended())
	got = get()
	require.Len(t, got.GetPeriods(), 1, "no renewal invoice yet")
	require.Equal(t, "active", got.GetOrder().GetStatus())

	// 4. The renewal invoice comes 7 days before the period's end on the
	// billing clock, due at that end.
	now := at(r.GetNow(), "now")
	r = advance(end.Add(-7*24*time.Hour - time.Minute).Sub(now))
	require.Zero(t, r.GetIssued(), "not before 7 days ahead")
	require.Len(t, get().GetPeriods(), 1)
	r = advance(2 * time.Minute)
	require.EqualValues(t, 1, r.GetIssued())
	require.Zero(t, r.GetSuspended())
	got = get()
	require.Len(t, got.GetPeriods(), 2)
	require.Equal(t, "active", got.GetOrder().GetStatus())
	invoiceID := got.GetPeriods()[1].GetInvoiceId()
	inv, err := e.orders.GetInvoice(ctx, with(&orderpb.GetInvoiceRequest{Id: invoiceID}, e.c.customer))
	require.NoError(t, err)
	require.Equal(t, got.GetOrder().GetPaidUntil(), inv.Msg.GetInvoice().GetDueAt(), "due at the period's end")

	// 5. The gateway payment of the renewal invoice pays the period at a
	// time on the billing clock (after its issue), and the service runs a
	// month from the previous end.
	issuedAt := at(r.GetNow(), "now")
	started, err := e.payments.CreatePayment(ctx, with(&paymentpb.CreatePaymentRequest{InvoiceId: invoiceID, GatewayInterfaceId: e.epayGW, ReturnUrl: "https://shop.example/done"}, e.c.customer))
	require.NoError(t, err)
	require.NoError(t, e.fake.Pay(started.Msg.GetPayment().GetId()))
	e.waitSettled(t, started.Msg.GetPayment().GetId())
	got = get()
	p2 := got.GetPeriods()[1]
	require.Equal(t, "paid", p2.GetStatus())
	paidAt := at(p2.GetPaidAt(), "paid_at")
	require.True(t, !paidAt.Before(issuedAt.Add(-2*time.Second)) && paidAt.Before(end),
		"paid on the billing clock, after the issue (%s) and before the period (%s): %s", issuedAt, end, paidAt)
	require.Equal(t, p2.GetEndsAt(), got.GetOrder().GetPaidUntil())
	require.Equal(t, p1.GetEndsAt(), p2.GetStartsAt())
	require.Equal(t, "active", got.GetOrder().GetStatus())
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}
