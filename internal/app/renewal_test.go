package app_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/provider"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// A month of a monthly service rehearsed over the wire with the test clock
// (issue 28, §1.11), as docs/api.md shows it with curl: the order is paid
// from the balance and provisioned; the clock moves to 7 days before the
// period's end and the renewal invoice is issued; past the due day it is
// overdue; 3 days later the service is suspended at the provider; the
// customer's balance is topped up and the next pass pays the invoice,
// extends the service by a month from the previous end and resumes it at
// the provider.
func TestAMonthOfRenewalRehearsedWithTheTestClock(t *testing.T) {
	t.Parallel()
	prov := provider.New(provider.Options{})
	require.NoError(t, prov.Start())
	t.Cleanup(prov.Close)
	e := startPayments(t, func(c *config.Config) {
		addProviderPlugin(t, c.Plugins.Dir)
		c.Billing.TestClock = true
		c.Events.PollInterval = 100 * time.Millisecond
		c.Events.RetryBase = 20 * time.Millisecond
		c.Events.RetryMax = 50 * time.Millisecond
	})
	ctx := context.Background()
	customers := identitypbconnect.NewCustomerAdminServiceClient(http.DefaultClient, e.r.baseURL)
	topUp := func(amount string) {
		_, err := customers.AdjustBalance(ctx, with(&identitypb.AdjustBalanceRequest{CustomerId: e.c.customerID.String(), Amount: amount, Note: "top-up"}, e.c.admin))
		require.NoError(t, err)
	}
	plugin := "http_provider"
	prod, err := e.orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{
		Name: "VPS monthly", Price: "10.00", Currency: "CNY", BillingCycle: "monthly", ProviderPlugin: &plugin,
		ProviderConfig: mustStruct(t, map[string]any{"api_url": prov.URL(), "token": prov.Token(), "plan": "vps-1"}),
	}, e.c.admin))
	require.NoError(t, err)
	placed, err := e.orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: prod.Msg.GetProduct().GetId()}, e.c.customer))
	require.NoError(t, err)
	id := placed.Msg.GetOrder().GetId()
	topUp("10.00")
	_, err = e.orders.PayWithBalance(ctx, with(&orderpb.PayWithBalanceRequest{OrderId: id}, e.c.customer))
	require.NoError(t, err)
	e.waitOrderStatus(t, id, "active")

	get := func() *orderpb.GetOrderResponse {
		res, err := e.orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: id}, e.c.customer))
		require.NoError(t, err)
		return res.Msg
	}
	first := get()
	require.True(t, first.GetOrder().GetRenews())
	require.Len(t, first.GetPeriods(), 1)
	end, err := time.Parse(time.RFC3339, first.GetOrder().GetPaidUntil())
	require.NoError(t, err)
	require.Equal(t, first.GetPeriods()[0].GetEndsAt(), first.GetOrder().GetPaidUntil())

	clock := time.Now() // the billing clock starts at the service's
	advance := func(to time.Time) *orderpb.AdvanceBillingClockResponse {
		t.Helper()
		d := to.Sub(clock)
		clock = to
		res, err := e.orders.AdvanceBillingClock(ctx, with(&orderpb.AdvanceBillingClockRequest{Seconds: int64(d / time.Second)}, e.c.admin))
		require.NoError(t, err)
		return res.Msg
	}
	instance := func() string {
		t.Helper()
		for _, in := range prov.Instances() {
			if in.OrderID == id {
				return in.Status
			}
		}
		return ""
	}
	require.Equal(t, "running", instance())

	// A customer cannot move the clock.
	_, err = e.orders.AdvanceBillingClock(ctx, with(&orderpb.AdvanceBillingClockRequest{Seconds: 60}, e.c.customer))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%v", err)

	r := advance(end.Add(-7*24*time.Hour + time.Minute))
	require.EqualValues(t, 1, r.GetIssued())
	require.Zero(t, r.GetAutoPaid(), "the balance is spent")
	periods := get().GetPeriods()
	require.Len(t, periods, 2)
	require.Equal(t, "unpaid", periods[1].GetStatus())
	inv, err := e.orders.GetInvoice(ctx, with(&orderpb.GetInvoiceRequest{Id: periods[1].GetInvoiceId()}, e.c.customer))
	require.NoError(t, err)
	require.Equal(t, "10.00", inv.Msg.GetInvoice().GetAmount())
	require.Equal(t, first.GetOrder().GetPaidUntil(), inv.Msg.GetInvoice().GetDueAt(), "due at the period's end")
	lines := inv.Msg.GetInvoice().GetLines()
	require.Len(t, lines, 1, "a renewal invoice has one line, the period")
	require.Equal(t, []string{"10.00", "10.00", periods[1].GetStartsAt(), periods[1].GetEndsAt()},
		[]string{lines[0].GetUnitAmount(), lines[0].GetAmount(), lines[0].GetPeriodStart(), lines[0].GetPeriodEnd()})
	require.Regexp(t, `^INV-\d{4}-\d{6}$`, inv.Msg.GetInvoice().GetNumber(), "numbered in its year's series")

	// The overview's own service and its deprecated first home on
	// OrderService (kept for the first release's clients) answer the same,
	// field for field, at every step of the month.
	orderAdmin := orderpbconnect.NewOrderAdminServiceClient(http.DefaultClient, e.r.baseURL)
	overview := func() *orderpb.GetRenewalOverviewResponse {
		t.Helper()
		res, err := orderAdmin.GetRenewalOverview(ctx, with(&orderpb.GetRenewalOverviewRequest{}, e.c.admin))
		require.NoError(t, err)
		old, err := e.orders.GetRenewalOverview(ctx, with(&orderpb.GetRenewalOverviewRequest{}, e.c.admin))
		require.NoError(t, err)
		require.True(t, proto.Equal(res.Msg, old.Msg), "OrderAdminService and OrderService answer the same overview:\n%v\n%v", res.Msg, old.Msg)
		return res.Msg
	}
	for _, ask := range []func() error{
		func() error {
			_, err := orderAdmin.GetRenewalOverview(ctx, with(&orderpb.GetRenewalOverviewRequest{}, e.c.customer))
			return err
		},
		func() error {
			_, err := e.orders.GetRenewalOverview(ctx, with(&orderpb.GetRenewalOverviewRequest{}, e.c.customer))
			return err
		},
	} {
		err := ask()
		require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "a customer reads no overview: %v", err)
	}
	ov := overview()
	require.EqualValues(t, 30, ov.GetDays())
	require.Len(t, ov.GetDue(), 1)
	require.Equal(t, "CNY", ov.GetDue()[0].GetCurrency())
	require.EqualValues(t, 1, ov.GetDue()[0].GetCount())
	require.Equal(t, "10.00", ov.GetDue()[0].GetAmount())
	require.Zero(t, ov.GetOverdueCount())

	r = advance(end.Add(time.Minute))
	require.EqualValues(t, 1, r.GetOverdue())
	ov = overview()
	require.EqualValues(t, 1, ov.GetOverdueCount())
	require.Equal(t, id, ov.GetOverdue()[0].GetOrder().GetId())
	requireTime(t, end.Add(3*24*time.Hour), ov.GetOverdue()[0].GetNextStepAt(), "suspended 3 days past due")
	r = advance(end.Add(3*24*time.Hour + time.Minute))
	require.EqualValues(t, 1, r.GetSuspended())
	ov = overview()
	require.Zero(t, ov.GetOverdueCount())
	require.EqualValues(t, 1, ov.GetSuspendedCount())
	requireTime(t, end.Add(14*24*time.Hour), ov.GetSuspended()[0].GetNextStepAt(), "ended 14 days past due")
	require.EqualValues(t, 3, ov.GetSuspended()[0].GetDaysOverdue())
	require.Equal(t, "overdue", get().GetOrder().GetSuspendReason())
	require.Eventually(t, func() bool { return instance() == "suspended" }, 15*time.Second, 20*time.Millisecond, "suspended at the provider")

	topUp("10.00")
	r = advance(clock.Add(time.Minute))
	require.EqualValues(t, 1, r.GetAutoPaid())
	after := get()
	require.Equal(t, "active", after.GetOrder().GetStatus())
	require.Empty(t, after.GetOrder().GetSuspendReason())
	require.Equal(t, after.GetPeriods()[1].GetEndsAt(), after.GetOrder().GetPaidUntil())
	require.Equal(t, "renewed", after.GetPeriods()[0].GetOutcome())
	require.Eventually(t, func() bool { return instance() == "running" }, 15*time.Second, 20*time.Millisecond, "resumed at the provider")

	// The customer turns renewal off: no further invoice.
	off, err := e.orders.SetOrderRenewal(ctx, with(&orderpb.SetOrderRenewalRequest{OrderId: id, Renews: false}, e.c.customer))
	require.NoError(t, err)
	require.False(t, off.Msg.GetOrder().GetRenews())
	next, err := time.Parse(time.RFC3339, after.GetOrder().GetPaidUntil())
	require.NoError(t, err)
	r = advance(next.Add(-24 * time.Hour))
	require.Zero(t, r.GetIssued())
	r = advance(next.Add(time.Minute))
	require.EqualValues(t, 1, r.GetEnded())
	e.waitOrderStatus(t, id, "completed")
	require.Eventually(t, func() bool { return instance() == "terminated" }, 15*time.Second, 20*time.Millisecond, "ended at the provider")
	// Every event of the month was handled: the provider's, and the
	// notices (the invoice issued, the reminders).
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 0, e.count(c, `SELECT count(*) FROM events WHERE order_id = $1 AND status <> 'done'`, id))
	}, 15*time.Second, 20*time.Millisecond, "every event of the order done")
	require.Equal(t, 2, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'renewal_reminder'`, id),
		"issued, and 1 day overdue (the clock jumped over the reminder 3 days before the due day, which is then not sent late)")
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}

// Without [billing].test_clock the clock does not move, and the refusal
// names the setting.
func TestTheTestClockIsOffUnlessConfigured(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	_, err := e.orders.AdvanceBillingClock(context.Background(), with(&orderpb.AdvanceBillingClockRequest{Seconds: 60}, e.c.admin))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "[billing].test_clock")
}

// requireTime checks that the RFC 3339 time got is want.
func requireTime(t *testing.T, want time.Time, got, what string) {
	t.Helper()
	at, err := time.Parse(time.RFC3339, got)
	require.NoError(t, err, what)
	require.True(t, want.Equal(at), "%s: want %s, got %s", what, want.Format(time.RFC3339Nano), got)
}
