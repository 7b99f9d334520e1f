package adminui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"google.golang.org/protobuf/types/known/structpb"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/config"
)

// renewalsFixture is what the renewal screens must show (mode renewals):
// the Renewals screen's three parts, and the order the browser acts on.
type renewalsFixture struct {
	// Due in the next 30 days, CNY: "10.00 CNY", "1 service renews".
	DueCNY      string `json:"dueCNY"`
	DueCountCNY string `json:"dueCountCNY"`
	// The order whose renewal invoice is past due, and the one suspended
	// for non-payment.
	Overdue   renewalRow `json:"overdue"`
	Suspended renewalRow `json:"suspended"`
	// Order is the monthly order the browser suspends, resumes, extends
	// and turns the renewal of off.
	Order renewalOrder `json:"order"`
	// Charge is the saved card's declined charge for the overdue invoice.
	Charge chargeRow `json:"charge"`
	// CustomerID is the customer of the orders, whose saved card the
	// browser removes.
	CustomerID string `json:"customerId"`
	// PlanProductID is the dearer monthly product the browser changes the
	// order to now (then cancels the change); ProductID the order's own.
	PlanProductID string `json:"planProductId"`
	ProductID     string `json:"productId"`
	// The reasons the admin types.
	SuspendReason string `json:"suspendReason"`
	ResumeReason  string `json:"resumeReason"`
	ExtendReason  string `json:"extendReason"`
	// ExtendTo is the new end as the admin types it (datetime-local, UTC:
	// the browser's zone), ExtendedUntil as the page then shows it.
	ExtendTo      string `json:"extendTo"`
	ExtendedUntil string `json:"extendedUntil"`
}

// renewalRow is an order as a list of the Renewals screen shows it: each
// cell as the page writes it (times in UTC, the browser's zone).
type renewalRow struct {
	OrderID     string `json:"orderId"`
	InvoiceID   string `json:"invoiceId"`
	AmountDue   string `json:"amountDue"`
	Due         string `json:"due"`
	DaysOverdue string `json:"daysOverdue"`
	// NextStep is when it is suspended (overdue) or ends (suspended),
	// followed by the whole days left.
	NextStep string `json:"nextStep"`
}

// chargeRow is a saved-card charge as the Renewals screen shows it.
type chargeRow struct {
	OrderID   string `json:"orderId"`
	InvoiceID string `json:"invoiceId"`
	Made      string `json:"made"`
	Outcome   string `json:"outcome"`
}

// renewalOrder is a monthly order with one paid period.
type renewalOrder struct {
	ID          string `json:"id"`
	PaidUntil   string `json:"paidUntil"`
	PeriodStart string `json:"periodStart"`
}

// shown is an RFC 3339 time as the console writes it in UTC.
func shown(t *testing.T, rfc3339 string) string {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, rfc3339)
	require.NoError(t, err)
	// The browser's zone is UTC; the console names it after every time.
	return at.UTC().Format(time.DateTime) + " UTC"
}

// renewalWorld makes, through the API, three monthly orders of one
// customer paid from the balance (which they empty), and moves the billing
// test clock so that the Renewals screen has something in each part: the
// first order's paid end is E; the second's is moved to E + 2 days, the
// third's to E + 20 days (ExtendServicePeriod). The clock goes to 7 days
// before E (the first's renewal invoice is issued), just past E (it is
// overdue; the second's invoice is issued), then 3 days and a minute past
// E: the first is suspended for non-payment (ended 14 days past due), the
// second is a day overdue (suspended 3 days past due), and the third falls
// due within 30 days.
func renewalWorld(t *testing.T, s *service, stripe *detachStripe) (*renewalsFixture, orderpbconnect.OrderServiceClient) {
	t.Helper()
	ctx := context.Background()
	reg, err := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, s.baseURL).Register(ctx, connect.NewRequest(&identitypb.RegisterRequest{
		Email: fmt.Sprintf("renewals-%s@example.com", uuid.NewString()[:8]), Password: "customer-password", Name: "Renewals Customer",
	}))
	require.NoError(t, err)
	customer := &http.Client{Transport: bearer{reg.Msg.GetAccessToken()}}
	_, err = identitypbconnect.NewCustomerAdminServiceClient(s.admin, s.baseURL).AdjustBalance(ctx, connect.NewRequest(&identitypb.AdjustBalanceRequest{
		CustomerId: reg.Msg.GetCustomer().GetId(), Amount: "30.00", Note: "renewals e2e top-up",
	}))
	require.NoError(t, err)

	admin := orderpbconnect.NewOrderServiceClient(s.admin, s.baseURL)
	prod, err := admin.CreateProduct(ctx, connect.NewRequest(&orderpb.CreateProductRequest{
		Name: "VPS monthly (e2e)", Price: "10.00", Currency: "CNY", BillingCycle: "monthly",
	}))
	require.NoError(t, err)
	bigger, err := admin.CreateProduct(ctx, connect.NewRequest(&orderpb.CreateProductRequest{
		Name: "VPS monthly large (e2e)", Price: "20.00", Currency: "CNY", BillingCycle: "monthly",
	}))
	require.NoError(t, err)
	orders := orderpbconnect.NewOrderServiceClient(customer, s.baseURL)
	get := func(id string) *orderpb.GetOrderResponse {
		t.Helper()
		res, err := admin.GetOrder(ctx, connect.NewRequest(&orderpb.GetOrderRequest{Id: id}))
		require.NoError(t, err)
		return res.Msg
	}
	// Paid from the balance, the order goes active (nothing to provision)
	// once the event worker takes order_paid, and its first period starts.
	paidOrder := func() string {
		t.Helper()
		o, err := orders.CreateOrder(ctx, connect.NewRequest(&orderpb.CreateOrderRequest{ProductId: prod.Msg.GetProduct().GetId()}))
		require.NoError(t, err)
		_, err = orders.PayWithBalance(ctx, connect.NewRequest(&orderpb.PayWithBalanceRequest{OrderId: o.Msg.GetOrder().GetId()}))
		require.NoError(t, err)
		return o.Msg.GetOrder().GetId()
	}
	suspended, overdue, due := paidOrder(), paidOrder(), paidOrder()
	for _, id := range []string{suspended, overdue, due} {
		require.Eventually(t, func() bool { return get(id).GetOrder().GetStatus() == "active" }, 30*time.Second, 50*time.Millisecond, "order %s goes active", id)
	}
	end, err := time.Parse(time.RFC3339Nano, get(suspended).GetOrder().GetPaidUntil())
	require.NoError(t, err)
	extend := func(id string, to time.Time) {
		t.Helper()
		_, err := admin.ExtendServicePeriod(ctx, connect.NewRequest(&orderpb.ExtendServicePeriodRequest{
			OrderId: id, EndsAt: to.Format(time.RFC3339), Reason: "renewals e2e: staggered ends",
		}))
		require.NoError(t, err)
	}
	overdueEnd := end.Add(2 * 24 * time.Hour).Truncate(time.Minute)
	dueEnd := end.Add(20 * 24 * time.Hour).Truncate(time.Minute)
	extend(overdue, overdueEnd)
	extend(due, dueEnd)

	clock := time.Now() // the billing clock starts at the service's
	advance := func(to time.Time) {
		t.Helper()
		d := to.Sub(clock)
		clock = to
		res, err := admin.AdvanceBillingClock(ctx, connect.NewRequest(&orderpb.AdvanceBillingClockRequest{Seconds: int64(d / time.Second)}))
		require.NoError(t, err)
		t.Logf("billing clock at %s: %v", res.Msg.GetNow(), res.Msg)
	}
	advance(end.Add(-7*24*time.Hour + time.Minute))
	advance(end.Add(time.Minute))
	advance(end.Add(3*24*time.Hour + time.Minute))

	// A card the customer saved through a Stripe interface (the fake
	// answers the plugin's checks and the removal's detach) and its
	// declined charge on the overdue invoice's due day, written as SQL: no
	// Checkout runs here (saving and charging cards are internal/app's
	// card renewal tests' business; the screen shows what
	// GetRenewalOverview reads).
	c, err := structpb.NewStruct(map[string]any{"secret_key": "sk_test_renewals", "webhook_secret": "whsec_renewalsE2E0123456789", "api_base": stripe.URL})
	require.NoError(t, err)
	gi, err := gatewaypbconnect.NewGatewayAdminServiceClient(s.admin, s.baseURL).CreateGatewayInterface(ctx, connect.NewRequest(&gatewaypb.CreateGatewayInterfaceRequest{
		PluginName: "stripe", DisplayName: "Card (renewals e2e)", Config: c,
	}))
	require.NoError(t, err)
	var method string
	require.NoError(t, s.app.Pool().QueryRow(ctx, `INSERT INTO saved_payment_methods
		(id, customer_id, gateway_interface_id, gateway_customer_id, gateway_method_id, brand, last4, exp_month, exp_year, created_at)
		VALUES (gen_random_uuid(), $1, $2, 'cus_Renewals', 'pm_Renewals', 'visa', '4242', 7, 2031, now()) RETURNING id`,
		reg.Msg.GetCustomer().GetId(), gi.Msg.GetGatewayInterface().GetId()).Scan(&method))
	overdueInvoice := get(overdue).GetPeriods()[1].GetInvoiceId()
	_, err = s.app.Pool().Exec(ctx, `INSERT INTO saved_charge_attempts
		(invoice_id, attempt, payment_id, saved_method_id, outcome, code, message, created_at, answered_at)
		SELECT id, 0, gen_random_uuid(), $2, 'declined', 'card_declined', 'Your card was declined.', due_at, due_at FROM invoices WHERE id = $1`,
		overdueInvoice, method)
	require.NoError(t, err)

	ov, err := orderpbconnect.NewOrderAdminServiceClient(s.admin, s.baseURL).GetRenewalOverview(ctx, connect.NewRequest(&orderpb.GetRenewalOverviewRequest{Days: 30}))
	require.NoError(t, err)
	require.Len(t, ov.Msg.GetDue(), 1)
	require.EqualValues(t, 1, ov.Msg.GetDue()[0].GetCount())
	require.EqualValues(t, 1, ov.Msg.GetOverdueCount())
	require.EqualValues(t, 1, ov.Msg.GetSuspendedCount())
	o, sp := ov.Msg.GetOverdue()[0], ov.Msg.GetSuspended()[0]
	require.Equal(t, overdue, o.GetOrder().GetId())
	require.Equal(t, suspended, sp.GetOrder().GetId())
	require.EqualValues(t, 1, o.GetDaysOverdue())
	require.EqualValues(t, 3, sp.GetDaysOverdue())
	require.Equal(t, shown(t, overdueEnd.Add(3*24*time.Hour).Format(time.RFC3339)), shown(t, o.GetNextStepAt()), "suspended 3 days past due")
	require.Equal(t, shown(t, end.Add(14*24*time.Hour).Format(time.RFC3339)), shown(t, sp.GetNextStepAt()), "ended 14 days past due")
	require.Equal(t, "overdue", get(suspended).GetOrder().GetSuspendReason())

	require.Len(t, o.GetCardCharges(), 1, "the overview reads the charge")
	row := func(r *orderpb.RenewalInvoice, left string) renewalRow {
		return renewalRow{
			OrderID: r.GetOrder().GetId(), InvoiceID: r.GetInvoiceId(), AmountDue: r.GetAmountDue() + " CNY", Due: shown(t, r.GetDueAt()),
			DaysOverdue: fmt.Sprint(r.GetDaysOverdue()), NextStep: shown(t, r.GetNextStepAt()) + " " + left,
		}
	}
	first := get(due).GetPeriods()[0]
	extendTo := dueEnd.Add(10 * 24 * time.Hour)
	return &renewalsFixture{
		DueCNY: ov.Msg.GetDue()[0].GetAmount() + " CNY", DueCountCNY: "1 service renews",
		// 1 day 23 h 59 min before the suspension, 10 days 23 h 59 min
		// before the end: whole days.
		Overdue: row(o, "1 day left"), Suspended: row(sp, "10 days left"),
		Charge:        chargeRow{OrderID: overdue, InvoiceID: overdueInvoice, Made: shown(t, o.GetDueAt()), Outcome: "declined card_declined: Your card was declined."},
		CustomerID:    reg.Msg.GetCustomer().GetId(),
		PlanProductID: bigger.Msg.GetProduct().GetId(), ProductID: prod.Msg.GetProduct().GetId(),
		Order:         renewalOrder{ID: due, PaidUntil: shown(t, dueEnd.Format(time.RFC3339)), PeriodStart: shown(t, first.GetStartsAt())},
		SuspendReason: "abuse report #1234 (e2e)", ResumeReason: "abuse report #1234 resolved (e2e)", ExtendReason: "goodwill: two days of downtime (e2e)",
		ExtendTo: extendTo.UTC().Format("2006-01-02T15:04"), ExtendedUntil: shown(t, extendTo.Format(time.RFC3339)),
	}, admin
}

// detachStripe is as much of Stripe's API as a saved card's removal
// needs: the balance (the plugin's check of its key) and a PaymentMethod's
// detach, which it records.
type detachStripe struct {
	*httptest.Server
	mu       sync.Mutex
	detached []string
}

func newDetachStripe(t *testing.T) *detachStripe {
	t.Helper()
	f := &detachStripe{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/balance":
			_, _ = io.WriteString(w, `{"object":"balance","available":[]}`)
		case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/payment_methods/") && strings.HasSuffix(r.URL.Path, "/detach"):
			pm := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/payment_methods/"), "/detach")
			f.mu.Lock()
			f.detached = append(f.detached, pm)
			f.mu.Unlock()
			_, _ = fmt.Fprintf(w, `{"id":%q,"object":"payment_method","customer":null}`, pm)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"type":"invalid_request_error","message":"not in this fake"}}`)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *detachStripe) Detached() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.detached...)
}

// renewalsRunScreens are the screenshots a renewals run takes.
var renewalsRunScreens = []string{
	"renewals", "order-renewal-overdue", "order-suspended-overdue", "order-renewal", "order-suspended-by-admin", "order-plan-change-pending", "order-renewal-off", "renewals-after",
}

// TestRenewalsEndToEnd drives the renewal screens in Chromium against the
// world of renewalWorld (the billing test clock on): the Renewals screen
// shows what falls due, the overdue order with its invoice, amount, days
// overdue and suspension day, and the suspended one with its end; the
// overdue order's page shows its second period invoiced and unpaid, the
// suspended one's refuses to resume it by hand with the service's message;
// and on the due order's page the admin suspends it with a reason,
// resumes it, extends its paid period and turns its renewal off, after
// which nothing is due. With PAYMENTD_E2E_DOCS_SCREENSHOT=1 it writes
// docs/screenshots/renewals.png.
func TestRenewalsEndToEnd(t *testing.T) {
	t.Parallel()
	s := startService(t, "/admin", func(c *config.Config) {
		c.Billing.TestClock = true
		c.Events.PollInterval = 100 * time.Millisecond
	})
	stripe := newDetachStripe(t)
	rf, admin := renewalWorld(t, s, stripe)
	runBrowser(t, fixture{Mode: "renewals", BaseURL: s.baseURL, AdminPath: "/admin", Username: "admin", Password: adminPassword, Renewals: rf})

	// What the browser did, as the service has it: the order suspended,
	// resumed, its period extended and its renewal off (the admin's reasons
	// in its audit trail), then ended now by the last step: terminated, its
	// paid end moved back from the extended one to the moment it ended.
	ctx := context.Background()
	res, err := admin.GetOrder(ctx, connect.NewRequest(&orderpb.GetOrderRequest{Id: rf.Order.ID}))
	require.NoError(t, err)
	require.Equal(t, "terminated", res.Msg.GetOrder().GetStatus())
	require.False(t, res.Msg.GetOrder().GetRenews())
	require.Equal(t, rf.ProductID, res.Msg.GetOrder().GetProductId(), "the plan change was cancelled before it was paid")
	require.Nil(t, res.Msg.GetOrder().GetPendingPlanChange())
	ac, err := paymentpbconnect.NewPaymentServiceClient(s.admin, s.baseURL).GetAutoCharge(ctx, connect.NewRequest(&paymentpb.GetAutoChargeRequest{OrderId: rf.Order.ID}))
	require.NoError(t, err)
	require.False(t, ac.Msg.GetAutoCharge(), "the admin turned the card charging off")
	require.Equal(t, []string{"pm_Renewals"}, stripe.Detached(), "the removed card was detached at the gateway")
	require.NotEqual(t, rf.ExtendedUntil, shown(t, res.Msg.GetOrder().GetPaidUntil()), "ending now moves the paid end to the end")
	trail, err := paymentpbconnect.NewPaymentAdminServiceClient(s.admin, s.baseURL).ListAuditEntries(ctx, connect.NewRequest(&paymentpb.ListAuditEntriesRequest{
		EntityType: "order", EntityId: rf.Order.ID, Pagination: &paymentpb.PageRequest{PageSize: 50},
	}))
	require.NoError(t, err)
	notes := map[string][]string{}
	for _, e := range trail.Msg.GetEntries() {
		var after struct {
			Note string `json:"note"`
		}
		if e.GetAfter() != "" {
			require.NoError(t, json.Unmarshal([]byte(e.GetAfter()), &after), e.GetAction())
		}
		notes[e.GetAction()] = append(notes[e.GetAction()], after.Note)
	}
	require.Equal(t, []string{rf.SuspendReason}, notes["order.suspend"])
	require.Equal(t, []string{rf.ResumeReason}, notes["order.resume"])
	require.Contains(t, notes["order.extend"], rf.ExtendReason)
	require.Len(t, notes["order.renewal"], 1)
	require.Len(t, notes["order.terminate"], 1, "the End service now step: %v", notes)
}
