package app_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/provider"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
)

// planWorld is a service with the test clock, the provider fake behind
// http_provider, and products on plans vps-1 (30.00 a month), vps-2
// (60.00), vps-3 (90.00), vps-1 yearly (300.00) and a USD one.
type planWorld struct {
	e                             *payBundle
	prov                          *provider.Server
	small, big, huge, yearly, usd string
	ctx                           context.Context
	customers                     identitypbconnect.CustomerAdminServiceClient
}

func startPlanWorld(t *testing.T, opts ...app.Option) *planWorld {
	t.Helper()
	prov := provider.New(provider.Options{})
	require.NoError(t, prov.Start())
	t.Cleanup(prov.Close)
	e := startPaymentsWith(t, opts, func(c *config.Config) {
		addProviderPlugin(t, c.Plugins.Dir)
		c.Billing.TestClock = true
		c.Events.PollInterval = 100 * time.Millisecond
		c.Events.RetryBase = 20 * time.Millisecond
		c.Events.RetryMax = 50 * time.Millisecond
	})
	w := &planWorld{e: e, prov: prov, ctx: context.Background(),
		customers: identitypbconnect.NewCustomerAdminServiceClient(http.DefaultClient, e.r.baseURL)}
	plugin := "http_provider"
	product := func(name, price, currency, cycle, plan string) string {
		t.Helper()
		res, err := e.orders.CreateProduct(w.ctx, with(&orderpb.CreateProductRequest{
			Name: name, Price: price, Currency: currency, BillingCycle: cycle, ProviderPlugin: &plugin,
			ProviderConfig: mustStruct(t, map[string]any{"api_url": prov.URL(), "token": prov.Token(), "plan": plan}),
		}, e.c.admin))
		require.NoError(t, err)
		return res.Msg.GetProduct().GetId()
	}
	w.small = product("VPS 2 GB", "30.00", "CNY", "monthly", "vps-1")
	w.big = product("VPS 4 GB", "60.00", "CNY", "monthly", "vps-2")
	w.huge = product("VPS 8 GB", "90.00", "CNY", "monthly", "vps-3")
	w.yearly = product("VPS 2 GB yearly", "300.00", "CNY", "annual", "vps-1")
	w.usd = product("VPS 2 GB (USD)", "5.00", "USD", "monthly", "vps-1")
	return w
}

func (w *planWorld) topUp(t *testing.T, amount string) {
	t.Helper()
	_, err := w.customers.AdjustBalance(w.ctx, with(&identitypb.AdjustBalanceRequest{CustomerId: w.e.c.customerID.String(), Amount: amount, Note: "top-up"}, w.e.c.admin))
	require.NoError(t, err)
}

func (w *planWorld) balance(t *testing.T) money.Amount {
	t.Helper()
	var b money.Amount
	require.NoError(t, w.e.r.app.Pool().QueryRow(w.ctx, `SELECT balance FROM customers WHERE id = $1`, w.e.c.customerID).Scan(&b))
	return b
}

// buy buys product with the balance and waits for its instance to run:
// the order id, its instance at the provider, and its first period.
func (w *planWorld) buy(t *testing.T, product string) (string, string, time.Time, time.Time) {
	t.Helper()
	placed, err := w.e.orders.CreateOrder(w.ctx, with(&orderpb.CreateOrderRequest{ProductId: product}, w.e.c.customer))
	require.NoError(t, err)
	id := placed.Msg.GetOrder().GetId()
	_, err = w.e.orders.PayWithBalance(w.ctx, with(&orderpb.PayWithBalanceRequest{OrderId: id}, w.e.c.customer))
	require.NoError(t, err)
	w.e.waitOrderStatus(t, id, "active")
	var inst string
	require.Eventually(t, func() bool {
		for _, in := range w.prov.Instances() {
			if in.OrderID == id && in.Status == provider.StatusRunning {
				inst = in.ID
				return true
			}
		}
		return false
	}, 15*time.Second, 20*time.Millisecond)
	p1 := w.get(t, id).GetPeriods()[0]
	return id, inst, planTime(t, p1.GetStartsAt()), planTime(t, p1.GetEndsAt())
}

func (w *planWorld) get(t *testing.T, id string) *orderpb.GetOrderResponse {
	t.Helper()
	res, err := w.e.orders.GetOrder(w.ctx, with(&orderpb.GetOrderRequest{Id: id}, w.e.c.customer))
	require.NoError(t, err)
	return res.Msg
}

// advanceTo moves the billing clock to about at (from the real now, which
// the clock started at; it is moved by whole seconds).
func (w *planWorld) advanceTo(t *testing.T, at time.Time) *orderpb.AdvanceBillingClockResponse {
	t.Helper()
	now := w.clockNow(t)
	r, err := w.e.orders.AdvanceBillingClock(w.ctx, with(&orderpb.AdvanceBillingClockRequest{Seconds: int64(at.Sub(now) / time.Second)}, w.e.c.admin))
	require.NoError(t, err)
	return r.Msg
}

// clockNow is the billing clock's now, moved one second (the move runs the
// billing run too, which is harmless).
func (w *planWorld) clockNow(t *testing.T) time.Time {
	t.Helper()
	r, err := w.e.orders.AdvanceBillingClock(w.ctx, with(&orderpb.AdvanceBillingClockRequest{Seconds: 1}, w.e.c.admin))
	require.NoError(t, err)
	return planTime(t, r.Msg.GetNow())
}

func (w *planWorld) invoice(t *testing.T, id string) *orderpb.Invoice {
	t.Helper()
	inv, err := w.e.orders.GetInvoice(w.ctx, with(&orderpb.GetInvoiceRequest{Id: id}, w.e.c.customer))
	require.NoError(t, err)
	return inv.Msg.GetInvoice()
}

func (w *planWorld) change(t *testing.T, id, product, when string) *orderpb.ChangeOrderPlanResponse {
	t.Helper()
	res, err := w.e.orders.ChangeOrderPlan(w.ctx, with(&orderpb.ChangeOrderPlanRequest{OrderId: id, ProductId: product, When: when}, w.e.c.customer))
	require.NoError(t, err)
	return res.Msg
}

func planTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return v
}

// An upgrade on day 10 of the period (issue 38, §2), over the wire on the
// test clock: the proration invoice bills exactly (60.00 − 30.00) × the
// unused share, counted in seconds of the calendar period from the
// billing clock's now and rounded once; its two lines (the unused old
// plan, negative; the new plan's remainder) sum to it. Bad requests change
// nothing. Paid through the gateway, the order takes the new product and
// price, the provider's fake receives POST /v1/instances/{id}/plan, and
// the next renewal bills the new price.
func TestAnUpgradeOnDayTenBillsThePreciseProrationAndTheNextRenewalTheNewPrice(t *testing.T) {
	t.Parallel()
	w := startPlanWorld(t)
	e := w.e
	w.topUp(t, "30.00")
	id, inst, start, end := w.buy(t, w.small)
	w.advanceTo(t, start.Add(9*24*time.Hour))

	// Bad requests change nothing.
	for _, bad := range []struct {
		name string
		req  *orderpb.ChangeOrderPlanRequest
		who  credential
		code connect.Code
	}{
		{"unknown when", &orderpb.ChangeOrderPlanRequest{OrderId: id, ProductId: w.big, When: "tomorrow"}, e.c.customer, connect.CodeInvalidArgument},
		{"not a uuid", &orderpb.ChangeOrderPlanRequest{OrderId: id, ProductId: "vps-2", When: "now"}, e.c.customer, connect.CodeInvalidArgument},
		{"a cycle change now", &orderpb.ChangeOrderPlanRequest{OrderId: id, ProductId: w.yearly, When: "now"}, e.c.customer, connect.CodeInvalidArgument},
		{"another currency", &orderpb.ChangeOrderPlanRequest{OrderId: id, ProductId: w.usd, When: "period_end"}, e.c.customer, connect.CodeInvalidArgument},
		{"the same product", &orderpb.ChangeOrderPlanRequest{OrderId: id, ProductId: w.small, When: "now"}, e.c.customer, connect.CodeInvalidArgument},
		{"another customer's order", &orderpb.ChangeOrderPlanRequest{OrderId: id, ProductId: w.big, When: "now"}, e.c.other, connect.CodeNotFound},
		{"an unknown product", &orderpb.ChangeOrderPlanRequest{OrderId: id, ProductId: "00000000-0000-4000-8000-000000000000", When: "now"}, e.c.customer, connect.CodeNotFound},
	} {
		_, err := e.orders.ChangeOrderPlan(w.ctx, with(bad.req, bad.who))
		require.Equal(t, bad.code, connect.CodeOf(err), "%s: %v", bad.name, err)
	}
	_, err := e.orders.CancelPlanChange(w.ctx, with(&orderpb.CancelPlanChangeRequest{OrderId: id}, e.c.customer))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "no pending change: %v", err)
	got := w.get(t, id)
	require.Equal(t, w.small, got.GetOrder().GetProductId())
	require.Nil(t, got.GetOrder().GetPendingPlanChange())
	var n int
	require.NoError(t, e.r.app.Pool().QueryRow(w.ctx, `SELECT count(*) FROM plan_changes`).Scan(&n))
	require.Zero(t, n, "refused, nothing written")

	// The upgrade: the balance is empty, so the proration invoice stays
	// open and the change pending.
	res := w.change(t, id, w.big, "now")
	ch := res.GetChange()
	require.Equal(t, "pending", ch.GetStatus())
	inv := w.invoice(t, ch.GetInvoiceId())
	require.Equal(t, "issued", inv.GetStatus())
	lines := inv.GetLines()
	require.Len(t, lines, 2)
	at := planTime(t, lines[0].GetPeriodStart()) // the billing clock's now of the change
	require.Equal(t, end, planTime(t, lines[0].GetPeriodEnd()))
	want, err := order.ProrationAmount(money.MustParse("30.00"), money.MustParse("60.00"), start, end, at)
	require.NoError(t, err)
	require.Equal(t, want.String(), inv.GetAmount(), "exactly the prorated difference")
	require.Equal(t, want.String(), ch.GetAmount())
	oldShare, err := order.UnusedShare(money.MustParse("30.00"), start, end, at)
	require.NoError(t, err)
	require.Equal(t, oldShare.Neg().String(), lines[0].GetAmount(), "the unused old plan, negative")
	sum := money.MustParse(lines[0].GetAmount())
	sum, err = sum.Add(money.MustParse(lines[1].GetAmount()))
	require.NoError(t, err)
	require.Equal(t, want, sum, "the lines sum to the amount")
	// Day 10 of a 28- to 31-day period: about two thirds of 30.00.
	require.True(t, want.Cmp(money.MustParse("18.00")) > 0 && want.Cmp(money.MustParse("23.00")) < 0, "proration %s", want)
	got = w.get(t, id)
	require.Equal(t, ch.GetId(), got.GetOrder().GetPendingPlanChange().GetId(), "the order shows its pending change")
	require.Equal(t, w.small, got.GetOrder().GetProductId(), "not before it is paid")
	_, err = e.orders.ChangeOrderPlan(w.ctx, with(&orderpb.ChangeOrderPlanRequest{OrderId: id, ProductId: w.huge, When: "now"}, e.c.customer))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "one pending change per order: %v", err)
	require.Zero(t, w.prov.ActionCalls(inst, "plan"))

	// Paid through the gateway: the change takes effect, and the provider
	// changes the plan.
	started, err := e.payments.CreatePayment(w.ctx, with(&paymentpb.CreatePaymentRequest{InvoiceId: ch.GetInvoiceId(), GatewayInterfaceId: e.epayGW, ReturnUrl: "https://shop.example/done"}, e.c.customer))
	require.NoError(t, err)
	require.NoError(t, e.fake.Pay(started.Msg.GetPayment().GetId()))
	e.waitSettled(t, started.Msg.GetPayment().GetId())
	got = w.get(t, id)
	require.Equal(t, w.big, got.GetOrder().GetProductId())
	require.Equal(t, "60.00", got.GetOrder().GetRenewalPrice())
	require.Nil(t, got.GetOrder().GetPendingPlanChange())
	require.Eventually(t, func() bool {
		in, ok := w.prov.Instance(inst)
		return ok && in.Plan == "vps-2" && w.prov.ActionCalls(inst, "plan") == 1
	}, 15*time.Second, 20*time.Millisecond, "POST /v1/instances/{id}/plan reached the provider")
	var action string
	require.NoError(t, e.r.app.Pool().QueryRow(w.ctx, `SELECT action FROM audit_log WHERE entity_type = 'plan_change' AND entity_id = $1 ORDER BY created_at DESC LIMIT 1`, ch.GetId()).Scan(&action))
	require.Equal(t, "plan_change.apply", action)

	// The next renewal bills the new price.
	r := w.advanceTo(t, end.Add(-7*24*time.Hour+time.Minute))
	require.EqualValues(t, 1, r.GetIssued())
	periods := w.get(t, id).GetPeriods()
	require.Len(t, periods, 2)
	require.Equal(t, "60.00", w.invoice(t, periods[1].GetInvoiceId()).GetAmount())
	endLedgerClean(t, e.r.app.Pool())
}

// A downgrade now credits the unused difference to the balance at once (a
// refund of the period's payment to the balance: a ledger row), and the
// provider changes the plan; an upgrade the balance covers is paid at
// once; an upgrade left unpaid lapses after plan_change_days, its invoice
// cancelled; a change at the period end bills the new product at the
// renewal and takes effect when the new period starts.
func TestADowngradeCreditsTheBalanceAnUnpaidUpgradeLapsesAndAPeriodEndChangeBillsTheRenewal(t *testing.T) {
	t.Parallel()
	w := startPlanWorld(t)
	e := w.e
	w.topUp(t, "60.00")
	id, inst, start, end := w.buy(t, w.big)
	require.True(t, w.balance(t).IsZero())
	w.advanceTo(t, start.Add(9*24*time.Hour))

	// Downgrade now: credited at once.
	down := w.change(t, id, w.small, "now")
	ch := down.GetChange()
	require.Equal(t, "applied", ch.GetStatus())
	at := planTime(t, ch.GetEffectiveAt())
	want, err := order.ProrationAmount(money.MustParse("60.00"), money.MustParse("30.00"), start, end, at)
	require.NoError(t, err)
	require.Equal(t, want.String(), ch.GetAmount(), "negative: owed to the customer")
	require.Equal(t, want.Neg().String(), ch.GetCredited())
	require.Equal(t, want.Neg(), w.balance(t), "the balance rose by exactly the unused difference")
	var rows int
	require.NoError(t, e.r.app.Pool().QueryRow(w.ctx, `SELECT count(*) FROM balance_transactions
		WHERE customer_id = $1 AND type = 'refund' AND description LIKE '%' || $2 || '%downgraded%'`, e.c.customerID, id).Scan(&rows))
	require.Equal(t, 1, rows, "one ledger row naming the order")
	require.Equal(t, w.small, down.GetOrder().GetProductId())
	require.Equal(t, "30.00", down.GetOrder().GetRenewalPrice())
	require.Eventually(t, func() bool {
		in, ok := w.prov.Instance(inst)
		return ok && in.Plan == "vps-1"
	}, 15*time.Second, 20*time.Millisecond, "the provider changed the plan at once")

	// Back up to 60.00: the balance (the credit) covers it, and pays it.
	up := w.change(t, id, w.big, "now")
	require.Equal(t, "applied", up.GetChange().GetStatus(), "paid from the balance at once")
	require.Equal(t, "paid", w.invoice(t, up.GetChange().GetInvoiceId()).GetStatus())
	require.Equal(t, w.big, up.GetOrder().GetProductId())
	// The credit and the upgrade are both counted at about the same time:
	// what is left is a cent or so of rounding, never more than the credit.
	require.True(t, w.balance(t).Cmp(money.MustParse("0.05")) <= 0 && w.balance(t).Sign() >= 0, "balance %s", w.balance(t))

	// Up to 90.00 with the balance spent: the invoice stays open, and
	// lapses after plan_change_days (3).
	if b := w.balance(t); b.Sign() > 0 {
		w.topUp(t, b.Neg().String())
	}
	huge := w.change(t, id, w.huge, "now").GetChange()
	require.Equal(t, "pending", huge.GetStatus())
	lapse := planTime(t, huge.GetLapseAt())
	w.advanceTo(t, lapse.Add(-time.Hour))
	require.Equal(t, "pending", w.get(t, id).GetOrder().GetPendingPlanChange().GetStatus(), "not before its time")
	w.advanceTo(t, lapse.Add(time.Minute))
	require.Equal(t, "cancelled", w.invoice(t, huge.GetInvoiceId()).GetStatus(), "the lapse cancels the invoice")
	got := w.get(t, id)
	require.Nil(t, got.GetOrder().GetPendingPlanChange())
	require.Equal(t, w.big, got.GetOrder().GetProductId(), "the order keeps its plan")
	var status string
	require.NoError(t, e.r.app.Pool().QueryRow(w.ctx, `SELECT status FROM plan_changes WHERE id = $1`, huge.GetId()).Scan(&status))
	require.Equal(t, "lapsed", status)
	var lapsed int
	require.NoError(t, e.r.app.Pool().QueryRow(w.ctx, `SELECT count(*) FROM events WHERE event_type = 'plan_change_lapsed' AND order_id = $1`, id).Scan(&lapsed))
	require.Equal(t, 1, lapsed)

	// At the period end, down to 30.00: the renewal invoice bills it.
	pe := w.change(t, id, w.small, "period_end").GetChange()
	require.Equal(t, "pending", pe.GetStatus())
	r := w.advanceTo(t, end.Add(-7*24*time.Hour+time.Minute))
	require.EqualValues(t, 1, r.GetIssued())
	periods := w.get(t, id).GetPeriods()
	require.Len(t, periods, 2)
	require.Equal(t, "30.00", w.invoice(t, periods[1].GetInvoiceId()).GetAmount(), "the renewal bills the new product")
	_, err = e.orders.CancelPlanChange(w.ctx, with(&orderpb.CancelPlanChangeRequest{OrderId: id}, e.c.customer))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "billed already: %v", err)
	require.Equal(t, w.big, w.get(t, id).GetOrder().GetProductId(), "not before the period starts")
	w.topUp(t, "30.00") // the billing run pays the renewal from it
	w.advanceTo(t, end.Add(time.Minute))
	got = w.get(t, id)
	require.Equal(t, "paid", got.GetPeriods()[1].GetStatus())
	require.Equal(t, w.small, got.GetOrder().GetProductId(), "the new period started: the change took effect")
	require.Equal(t, "30.00", got.GetOrder().GetRenewalPrice())
	require.Nil(t, got.GetOrder().GetPendingPlanChange())
	require.Eventually(t, func() bool {
		in, ok := w.prov.Instance(inst)
		return ok && in.Plan == "vps-1" && w.prov.ActionCalls(inst, "plan") == 3
	}, 15*time.Second, 20*time.Millisecond, "down, up, then down at the period end: %d calls", w.prov.ActionCalls(inst, "plan"))
	endLedgerClean(t, e.r.app.Pool())
}

// stoppable is a service clock that runs with time.Now until Stop holds
// it at one instant, so that a quote and the call after it price the same
// second.
type stoppable struct{ at atomic.Pointer[time.Time] }

func (c *stoppable) Now() time.Time {
	if at := c.at.Load(); at != nil {
		return *at
	}
	return time.Now()
}

func (c *stoppable) Stop() { now := time.Now(); c.at.Store(&now) }

// A quote (dry_run, what the console shows before the admin confirms) is
// what the change then does, at the same instant: the downgrade's credit
// to the balance, the upgrade's proration invoice, the renewal price at
// the period end; and a quote changes nothing: no plan change, invoice,
// audit row, event, ledger row or balance move, and refusals are the
// call's.
func TestAPlanChangeQuoteIsWhatTheChangeThenDoesAndChangesNothing(t *testing.T) {
	t.Parallel()
	clock := &stoppable{}
	w := startPlanWorld(t, app.WithClock(clock.Now))
	e := w.e
	w.topUp(t, "60.00")
	id, _, start, end := w.buy(t, w.big)
	w.advanceTo(t, start.Add(9*24*time.Hour))
	clock.Stop()

	written := func() []int {
		t.Helper()
		return []int{
			e.count(t, `SELECT count(*) FROM plan_changes`),
			e.count(t, `SELECT count(*) FROM invoices`),
			// The worker's own rows (the provisioning's) may land meanwhile.
			e.count(t, `SELECT count(*) FROM audit_log WHERE actor_kind <> 'system'`),
			e.count(t, `SELECT count(*) FROM events`),
			e.count(t, `SELECT count(*) FROM balance_transactions`),
			e.count(t, `SELECT count(*) FROM refunds`),
		}
	}
	quote := func(product, when string) *orderpb.ChangeOrderPlanResponse {
		t.Helper()
		before, balance := written(), w.balance(t)
		res, err := e.orders.ChangeOrderPlan(w.ctx, with(&orderpb.ChangeOrderPlanRequest{OrderId: id, ProductId: product, When: when, DryRun: true}, e.c.admin))
		require.NoError(t, err)
		require.True(t, res.Msg.GetDryRun())
		require.Empty(t, res.Msg.GetChange().GetId(), "a quote is not recorded")
		require.Equal(t, before, written(), "a quote writes nothing")
		require.Equal(t, balance, w.balance(t), "a quote moves no money")
		require.Nil(t, w.get(t, id).GetOrder().GetPendingPlanChange())
		return res.Msg
	}

	// Refused as the call is.
	_, err := e.orders.ChangeOrderPlan(w.ctx, with(&orderpb.ChangeOrderPlanRequest{OrderId: id, ProductId: w.yearly, When: "now", DryRun: true}, e.c.admin))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "a cycle change now: %v", err)
	_, err = e.orders.ChangeOrderPlan(w.ctx, with(&orderpb.ChangeOrderPlanRequest{OrderId: id, ProductId: w.small, When: "now", DryRun: true}, e.c.other))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "another customer's order: %v", err)

	// At the period end: the next renewal's price, nothing now.
	pe := quote(w.small, "period_end").GetChange()
	require.Equal(t, "30.00", pe.GetToPrice())
	require.Equal(t, "0.00", pe.GetAmount())
	require.Equal(t, "pending", pe.GetStatus())
	require.Equal(t, end, planTime(t, pe.GetEffectiveAt()))

	// A downgrade now: the quoted credit is what the balance then gets.
	q := quote(w.small, "now").GetChange()
	require.Equal(t, "applied", q.GetStatus())
	require.Equal(t, "-"+q.GetCredited(), q.GetAmount(), "the whole difference is credited")
	require.True(t, money.MustParse(q.GetCredited()).Sign() > 0)
	down := w.change(t, id, w.small, "now").GetChange()
	require.Equal(t, q.GetAmount(), down.GetAmount())
	require.Equal(t, q.GetCredited(), down.GetCredited())
	require.Equal(t, q.GetCredited(), w.balance(t).String(), "the balance got the quoted credit")

	// An upgrade now, beyond the balance: the quoted proration is the
	// invoice's amount.
	q = quote(w.huge, "now").GetChange()
	require.Equal(t, "pending", q.GetStatus())
	require.Empty(t, q.GetInvoiceId())
	require.NotEmpty(t, q.GetLapseAt())
	up := w.change(t, id, w.huge, "now").GetChange()
	require.Equal(t, q.GetAmount(), up.GetAmount())
	require.Equal(t, q.GetAmount(), w.invoice(t, up.GetInvoiceId()).GetAmount(), "the invoice bills the quote")
	require.Equal(t, q.GetLapseAt(), up.GetLapseAt())

	// A pending change refuses a quote as it refuses a change.
	_, err = e.orders.ChangeOrderPlan(w.ctx, with(&orderpb.ChangeOrderPlanRequest{OrderId: id, ProductId: w.big, When: "period_end", DryRun: true}, e.c.admin))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
	endLedgerClean(t, e.r.app.Pool())
}

// Ending now after an upgrade credits the unused share at the new price,
// paid by the period's payment and the proration's (issue 38): 30.00 a
// month, upgraded to 90.00 on day 1 (the proration, about 58.00, paid
// from the balance), ended on day 2. The unused share at 90.00, about
// 84.00, is more than the 30.00 the period's own payment holds: the
// proration's payment pays the rest. Before, the credit stopped at 30.00
// and the proration's money stayed with the service.
func TestEndingNowAfterAnUpgradeCreditsTheProrationsMoneyToo(t *testing.T) {
	t.Parallel()
	w := startPlanWorld(t)
	w.topUp(t, "200.00")
	id, _, start, end := w.buy(t, w.small)
	w.advanceTo(t, start.Add(24*time.Hour))
	up := w.change(t, id, w.huge, "now")
	require.Equal(t, "applied", up.GetChange().GetStatus(), "paid from the balance at once")
	proration := money.MustParse(up.GetChange().GetAmount())
	require.True(t, proration.Cmp(money.MustParse("50.00")) > 0, "about 58.00: %s", proration)
	w.advanceTo(t, start.Add(2*24*time.Hour))
	before := w.balance(t)

	ended, err := w.e.orders.EndService(w.ctx, with(&orderpb.EndServiceRequest{OrderId: id, Credit: "balance"}, w.e.c.customer))
	require.NoError(t, err)
	endedAt := planTime(t, w.get(t, id).GetOrder().GetPaidUntil())
	want, err := order.UnusedShare(money.MustParse("90.00"), start, end, endedAt)
	require.NoError(t, err)
	require.True(t, want.Cmp(money.MustParse("80.00")) > 0, "about 84.00: %s", want)
	require.Equal(t, want.String(), ended.Msg.GetUnused())
	require.Equal(t, want.String(), ended.Msg.GetCredited(), "the whole unused share: the period's 30.00 and the rest of the proration's payment")
	after := w.balance(t)
	rise, err := after.Sub(before)
	require.NoError(t, err)
	require.Equal(t, want.String(), rise.String())

	// The period's payment is refunded first (30.00, in full), the
	// proration's with the rest.
	var first, second money.Amount
	require.NoError(t, w.e.r.app.Pool().QueryRow(w.ctx, `SELECT
		(SELECT refunded_amount FROM payments WHERE order_id = $1 AND invoice_id IS NULL),
		(SELECT refunded_amount FROM payments WHERE order_id = $1 AND invoice_id IS NOT NULL)`, id).Scan(&first, &second))
	require.Equal(t, "30.00", first.String())
	rest, err := want.Sub(money.MustParse("30.00"))
	require.NoError(t, err)
	require.Equal(t, rest.String(), second.String())
	endLedgerClean(t, w.e.r.app.Pool())
}

// An order that ends takes its pending plan change with it (issue 38): an
// unpaid upgrade's proration invoice is cancelled, so nobody pays for a
// plan of a service that has ended, and a change waiting for the period
// end is cancelled rather than left pending for good.
func TestAnOrderThatEndsCancelsItsPendingPlanChange(t *testing.T) {
	t.Parallel()
	w := startPlanWorld(t)
	w.topUp(t, "60.00")
	up, _, start, _ := w.buy(t, w.small)
	later, _, _, _ := w.buy(t, w.small)
	w.advanceTo(t, start.Add(24*time.Hour))
	// The balance is spent: the upgrade's proration waits for a payment.
	changed := w.change(t, up, w.huge, "now")
	require.Equal(t, "pending", changed.GetChange().GetStatus())
	proration := changed.GetChange().GetInvoiceId()
	require.NotEmpty(t, proration)
	require.Equal(t, "issued", w.invoice(t, proration).GetStatus())
	require.Equal(t, "pending", w.change(t, later, w.big, "period_end").GetChange().GetStatus())

	for _, id := range []string{up, later} {
		_, err := w.e.orders.EndService(w.ctx, with(&orderpb.EndServiceRequest{OrderId: id, Credit: "balance"}, w.e.c.customer))
		require.NoError(t, err)
		got := w.get(t, id)
		require.Equal(t, "terminated", got.GetOrder().GetStatus())
		require.Nil(t, got.GetOrder().GetPendingPlanChange(), "order %s keeps no pending plan change", id)
	}
	require.Equal(t, "cancelled", w.invoice(t, proration).GetStatus(), "the proration of an ended service is not payable")
	var statuses []string
	rows, err := w.e.r.app.Pool().Query(w.ctx, `SELECT status FROM plan_changes WHERE order_id = ANY($1::uuid[]) ORDER BY created_at`, []string{up, later})
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		statuses = append(statuses, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"cancelled", "cancelled"}, statuses)
	endLedgerClean(t, w.e.r.app.Pool())
}
