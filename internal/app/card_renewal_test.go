package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/internal/config"
)

// Saved cards over the wire (issue 39, 1): a monthly order paid through
// Stripe Checkout saves its card; on the renewal invoice's due day the
// billing run, driven by the test clock, charges it off-session, and the
// invoice is paid through the same settlement as a callback. The Stripe
// here is a fake of the API's few objects these calls touch (stripe-mock
// keeps no state: its PaymentIntent would not carry the amount charged),
// answering as Stripe documents.

// cardStripe is the fake: it makes Customers and Checkout Sessions, shows
// the card that paid a PaymentIntent, and charges off-session
// PaymentIntents as decline says — once per Idempotency-Key, as Stripe.
type cardStripe struct {
	*httptest.Server
	mu sync.Mutex
	// charges are the off-session charges made, by Idempotency-Key.
	charges map[string]url.Values
	posts   int
	// detached are the PaymentMethods detached, by id.
	detached []string
	decline  string // "": charges succeed; else the error code
	// expMonth and expYear are the saved card's expiry.
	expMonth, expYear int
}

func newCardStripe(t *testing.T) *cardStripe {
	t.Helper()
	f := &cardStripe{charges: map[string]url.Values{}, expMonth: 12, expYear: 2035}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		w.Header().Set("Content-Type", "application/json")
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/balance":
			_, _ = io.WriteString(w, `{"object":"balance","available":[]}`)
		case r.URL.Path == "/v1/customers":
			_, _ = io.WriteString(w, `{"id":"cus_Card1","object":"customer"}`)
		case r.URL.Path == "/v1/checkout/sessions":
			_, _ = io.WriteString(w, `{"id":"cs_test_card","object":"checkout.session","url":"https://checkout.stripe.com/c/pay/cs_test_card"}`)
		case r.Method == http.MethodGet && r.URL.Path == "/v1/payment_intents/pi_checkout":
			_, _ = fmt.Fprintf(w, `{"id":"pi_checkout","object":"payment_intent","status":"succeeded","payment_method":{"id":"pm_Card1","object":"payment_method","type":"card","card":{"brand":"visa","last4":"4242","exp_month":%d,"exp_year":%d}}}`, f.expMonth, f.expYear)
		case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/payment_methods/") && strings.HasSuffix(r.URL.Path, "/detach"):
			pm := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/payment_methods/"), "/detach")
			f.detached = append(f.detached, pm)
			_, _ = fmt.Fprintf(w, `{"id":%q,"object":"payment_method","customer":null}`, pm)
		case r.Method == http.MethodPost && r.URL.Path == "/v1/payment_intents":
			f.posts++
			key := r.Header.Get("Idempotency-Key")
			if _, again := f.charges[key]; !again {
				f.charges[key] = form
			}
			if f.decline != "" {
				w.WriteHeader(http.StatusPaymentRequired)
				_, _ = fmt.Fprintf(w, `{"error":{"type":"card_error","code":%q,"message":"declined"}}`, f.decline)
				return
			}
			_, _ = fmt.Fprintf(w, `{"id":"pi_off_%d","object":"payment_intent","status":"succeeded","amount":%s,"amount_received":%s,"currency":%q}`,
				len(f.charges), form.Get("amount"), form.Get("amount"), form.Get("currency"))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"type":"invalid_request_error","code":"resource_missing"}}`)
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *cardStripe) chargesMade() (distinct, posts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.charges), f.posts
}

// cardOrder is a monthly USD order paid through Stripe Checkout, its card
// saved, with the billing test clock at the service's now.
type cardOrder struct {
	e       *payBundle
	fake    *cardStripe
	db      *pgx.Conn
	id      string
	end     time.Time
	advance func(to time.Time) *orderpb.AdvanceBillingClockResponse
}

func startCardOrder(t *testing.T) *cardOrder { return startCardOrderIn(t, "USD") }

// startCardOrderIn is startCardOrder in currency.
func startCardOrderIn(t *testing.T, currency string) *cardOrder {
	t.Helper()
	return startCardOrderWith(t, currency, newCardStripe(t))
}

// startCardOrderWith is startCardOrderIn with the Stripe fake given.
func startCardOrderWith(t *testing.T, currency string, fake *cardStripe) *cardOrder {
	t.Helper()
	var dbURL string
	e := startPayments(t, func(c *config.Config) {
		c.Billing.TestClock = true
		dbURL = c.DB.URL
	})
	e.installGateway(t, "stripe", "stripe", nil)
	gw := e.addGateway(t, "stripe", "Card (Stripe)", map[string]any{
		"secret_key": "sk_test_paymentd", "webhook_secret": stripeWhsec, "api_base": fake.URL,
	})
	s := &stripeBundle{payBundle: e, gw: gw}
	ctx := context.Background()
	prod, err := e.orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{Name: "VPS monthly", Price: "12.30", Currency: currency, BillingCycle: "monthly"}, e.c.admin))
	require.NoError(t, err)
	placed, err := e.orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: prod.Msg.GetProduct().GetId()}, e.c.customer))
	require.NoError(t, err)
	id := placed.Msg.GetOrder().GetId()
	created := e.createPaymentVia(t, id, gw)
	p := e.getPayment(t, created.GetPayment().GetId())

	// Stripe's checkout.session.completed for the saving session.
	ev, _ := json.Marshal(map[string]any{
		"id": "evt_card", "object": "event", "type": "checkout.session.completed", "created": time.Now().Unix(),
		"data": map[string]any{"object": map[string]any{
			"id": "cs_test_card", "object": "checkout.session", "mode": "payment", "status": "complete",
			"payment_status": "paid", "amount_total": 1230, "currency": strings.ToLower(currency), "client_reference_id": p.GetId(),
			"payment_intent": "pi_checkout", "customer": "cus_Card1",
			"metadata": map[string]any{"payment_id": p.GetId(), "order_id": id, "save_method": "1"},
		}},
	})
	code, body := s.post(t, ev, stripeSign(ev, stripeWhsec, time.Now()))
	require.Equal(t, http.StatusOK, code, body)
	e.waitOrderStatus(t, id, "active")

	db, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	var brand, last4, method string
	var month, year int
	require.NoError(t, db.QueryRow(ctx, `SELECT brand, last4, exp_month, exp_year, gateway_method_id FROM saved_payment_methods`).
		Scan(&brand, &last4, &month, &year, &method))
	require.Equal(t, []any{"visa", "4242", fake.expMonth, fake.expYear, "pm_Card1"}, []any{brand, last4, month, year, method},
		"only the gateway's references, brand, last four digits and expiry are kept")

	got, err := e.orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: id}, e.c.customer))
	require.NoError(t, err)
	end, err := time.Parse(time.RFC3339, got.Msg.GetOrder().GetPaidUntil())
	require.NoError(t, err)
	clock := time.Now()
	advance := func(to time.Time) *orderpb.AdvanceBillingClockResponse {
		t.Helper()
		d := to.Sub(clock)
		clock = to
		res, err := e.orders.AdvanceBillingClock(ctx, with(&orderpb.AdvanceBillingClockRequest{Seconds: int64(d / time.Second)}, e.c.admin))
		require.NoError(t, err)
		return res.Msg
	}

	return &cardOrder{e: e, fake: fake, db: db, id: id, end: end, advance: advance}
}

func TestAMonthlyOrderPaidByCardRenewsByItselfOnItsDueDay(t *testing.T) {
	t.Parallel()
	c := startCardOrder(t)
	e, fake, db, id, end, advance := c.e, c.fake, c.db, c.id, c.end, c.advance
	ctx := context.Background()
	r := advance(end.Add(-7*24*time.Hour + time.Minute))
	require.EqualValues(t, 1, r.GetIssued())
	distinct, _ := fake.chargesMade()
	require.Zero(t, distinct, "nothing is charged before the due day")

	advance(end.Add(-time.Minute))
	distinct, _ = fake.chargesMade()
	require.Zero(t, distinct, "nor a minute before it")

	advance(end.Add(time.Minute))
	distinct, posts := fake.chargesMade()
	require.Equal(t, 1, distinct, "the due day charges the saved card once")
	require.Equal(t, 1, posts)

	got, err := e.orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: id}, e.c.customer))
	require.NoError(t, err)
	periods := got.Msg.GetPeriods()
	require.Len(t, periods, 2)
	require.Equal(t, "paid", periods[1].GetStatus(), "the charge paid the renewal invoice")
	inv, err := e.orders.GetInvoice(ctx, with(&orderpb.GetInvoiceRequest{Id: periods[1].GetInvoiceId()}, e.c.customer))
	require.NoError(t, err)
	require.Equal(t, "paid", inv.Msg.GetInvoice().GetStatus())

	var payID, outcome string
	require.NoError(t, db.QueryRow(ctx, `SELECT payment_id::text, outcome FROM saved_charge_attempts WHERE invoice_id = $1`, periods[1].GetInvoiceId()).Scan(&payID, &outcome))
	require.Equal(t, "succeeded", outcome)
	charged := e.getPayment(t, payID)
	require.Equal(t, "success", charged.GetStatus())
	require.Equal(t, "12.30", charged.GetAmount())
	fake.mu.Lock()
	form := fake.charges["paymentd-charge-"+payID]
	fake.mu.Unlock()
	require.NotNil(t, form, "the attempt's payment id is the Idempotency-Key")
	require.Equal(t, []string{"1230", "usd", "cus_Card1", "pm_Card1", "true", "true"},
		[]string{form.Get("amount"), form.Get("currency"), form.Get("customer"), form.Get("payment_method"), form.Get("confirm"), form.Get("off_session")})

	// Later passes charge nothing more: the invoice is paid.
	advance(end.Add(3 * 24 * time.Hour))
	distinct, posts = fake.chargesMade()
	require.Equal(t, []int{1, 1}, []int{distinct, posts}, "no invoice is charged twice")
}

func TestADeclinedCardIsRetriedOnTheRetryDaysNoticedAndResumesTheServiceWhenItPays(t *testing.T) {
	t.Parallel()
	c := startCardOrder(t)
	e, fake, db, id, end, advance := c.e, c.fake, c.db, c.id, c.end, c.advance
	ctx := context.Background()
	attempts := func() []string {
		t.Helper()
		rows, err := db.Query(ctx, `SELECT a.outcome || '/' || a.code || '/' || p.status FROM saved_charge_attempts a JOIN payments p ON p.id = a.payment_id ORDER BY a.attempt`)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	notices := func() int {
		t.Helper()
		var n int
		require.NoError(t, db.QueryRow(ctx, `SELECT count(*) FROM events WHERE event_type = 'renewal_reminder' AND payload->>'kind' = 'card_declined'`).Scan(&n))
		return n
	}
	fake.mu.Lock()
	fake.decline = "card_declined"
	fake.mu.Unlock()
	advance(end.Add(-7*24*time.Hour + time.Minute))
	advance(end.Add(time.Minute))
	require.Equal(t, []string{"declined/card_declined/failed"}, attempts(), "the due day's charge is declined: its payment failed")
	require.Equal(t, 1, notices(), "and the customer is told, with the invoice to pay by hand")
	// The renewal overview shows the admin the declined charge beside the
	// overdue invoice.
	ov, err := e.orders.GetRenewalOverview(ctx, with(&orderpb.GetRenewalOverviewRequest{}, e.c.admin))
	require.NoError(t, err)
	require.Len(t, ov.Msg.GetOverdue(), 1)
	charges := ov.Msg.GetOverdue()[0].GetCardCharges()
	require.Len(t, charges, 1)
	require.Equal(t, []any{int32(0), "declined", "card_declined"}, []any{charges[0].GetAttempt(), charges[0].GetOutcome(), charges[0].GetCode()})
	require.NotEmpty(t, charges[0].GetPaymentId())

	advance(end.Add(24*time.Hour + time.Minute))
	require.Len(t, attempts(), 1, "no retry the day after")
	advance(end.Add(2*24*time.Hour + time.Minute))
	require.Len(t, attempts(), 2, "the first retry, 2 days past due")
	require.Equal(t, 2, notices())

	advance(end.Add(4*24*time.Hour + time.Minute))
	got, err := e.orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: id}, e.c.customer))
	require.NoError(t, err)
	require.Equal(t, "suspended", got.Msg.GetOrder().GetStatus(), "3 days past due the service is suspended")
	require.Len(t, attempts(), 2)

	fake.mu.Lock()
	fake.decline = ""
	fake.mu.Unlock()
	advance(end.Add(5*24*time.Hour + time.Minute))
	require.Equal(t, []string{"declined/card_declined/failed", "declined/card_declined/failed", "succeeded//success"}, attempts())
	e.waitOrderStatus(t, id, "active")
	distinct, _ := fake.chargesMade()
	require.Equal(t, 3, distinct, "three attempts, three keys")

	advance(end.Add(9*24*time.Hour + time.Minute))
	require.Len(t, attempts(), 3, "a paid invoice is not charged on the last retry day")
}

func TestTheBalancePaysFirstAndTheCardIsNotChargedForWhatItCovers(t *testing.T) {
	t.Parallel()
	// The balance is kept in the customer's currency, CNY.
	c := startCardOrderIn(t, "CNY")
	e, fake, id, end, advance := c.e, c.fake, c.id, c.end, c.advance
	ctx := context.Background()
	advance(end.Add(-7*24*time.Hour + time.Minute))
	// Topped up after the invoice was issued: the run on the due day pays
	// it from the balance, and the card is left alone.
	customers := identitypbconnect.NewCustomerAdminServiceClient(http.DefaultClient, e.r.baseURL)
	_, err := customers.AdjustBalance(ctx, with(&identitypb.AdjustBalanceRequest{CustomerId: e.c.customerID.String(), Amount: "12.30", Note: "top-up"}, e.c.admin))
	require.NoError(t, err)
	advance(end.Add(time.Minute))
	got, err := e.orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: id}, e.c.customer))
	require.NoError(t, err)
	require.Equal(t, "paid", got.Msg.GetPeriods()[1].GetStatus())
	distinct, posts := fake.chargesMade()
	require.Equal(t, []int{0, 0}, []int{distinct, posts}, "the balance covered the invoice: the card is not charged")
}

func TestACardExpiringBeforeTheNextRenewalIsNoticedOnceTheMonthBefore(t *testing.T) {
	t.Parallel()
	fake := newCardStripe(t)
	now := time.Now().UTC()
	fake.expMonth, fake.expYear = int(now.Month()), now.Year() // valid through this month only
	c := startCardOrderWith(t, "USD", fake)
	ctx := context.Background()
	expiring := func() int {
		t.Helper()
		var n int
		require.NoError(t, c.db.QueryRow(ctx, `SELECT count(*) FROM events WHERE event_type = 'renewal_reminder' AND payload->>'kind' = 'card_expiring'`).Scan(&n))
		return n
	}
	c.advance(c.end.Add(-7*24*time.Hour + time.Minute))
	require.Equal(t, 1, expiring(), "the card expires before the renewal a month away: the customer is told")
	c.advance(c.end.Add(-time.Hour))
	require.Equal(t, 1, expiring(), "once")
}
