package renewal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// Saved-card answers of the model's Stripe (issue 39, 1): what an
// off-session PaymentIntent comes to.
const (
	cardSucceeds = "succeeded"
	cardDeclines = "declined"
	cardAuth     = "authentication_required"
)

// cardGateway is a Stripe, in the shape of its API, that answers the
// shipped stripe plugin's off-session charges (POST /v1/payment_intents)
// as the model says, once per Idempotency-Key (a resend gets the first
// answer), and its refunds (POST /v1/refunds) as succeeded. It records
// what it answered each payment and what it took for each invoice.
type cardGateway struct {
	srv *httptest.Server
	gw  payment.Gateway
	mu  sync.Mutex
	// mode is the answer to the next new charge.
	mode string
	// answered: the answer per paymentd payment id; taken: the money
	// taken per invoice, in cents, and how many charges took it.
	answered map[string]string
	taken    map[string]int64
	charges  map[string]int
	byKey    map[string]cardAnswer
	n        int
}

// cardAnswer is an answer kept for its Idempotency-Key.
type cardAnswer struct {
	status int
	body   []byte
}

func newCardGateway(t *testing.T, b *bundle) *cardGateway {
	t.Helper()
	g := &cardGateway{mode: cardSucceeds, answered: map[string]string{}, taken: map[string]int64{}, charges: map[string]int{}, byKey: map[string]cardAnswer{}}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.srv.Close)
	cfg, err := json.Marshal(map[string]any{"secret_key": "sk_test_model", "webhook_secret": "whsec_model", "api_base": g.srv.URL})
	require.NoError(t, err)
	g.gw = payment.Gateway{
		InterfaceID: testfixture.GatewayInterface(t, b.pool, "stripe"), PluginName: "stripe", DisplayName: "stripe", Enabled: true,
		ConfigJSON: string(cfg), Plugin: plugintest.Load(t, "gateway/stripe.lua", plugin.Options{}), Currencies: []string{"CNY"}, SavesMethods: true,
	}
	return g
}

func (g *cardGateway) setMode(m string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mode = m
}

func (g *cardGateway) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(body))
	key := r.Header.Get("Idempotency-Key")
	g.mu.Lock()
	defer g.mu.Unlock()
	status, out := http.StatusOK, []byte(nil)
	if prev, ok := g.byKey[key]; ok && key != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(prev.status)
		_, _ = w.Write(prev.body)
		return
	}
	g.n++
	amount, _ := strconv.ParseInt(form.Get("amount"), 10, 64)
	switch r.URL.Path {
	case "/v1/payment_intents":
		pid, inv := form.Get("metadata[payment_id]"), form.Get("metadata[invoice_id]")
		pi := fmt.Sprintf("pi_model%d", g.n)
		g.answered[pid] = g.mode
		switch g.mode {
		case cardSucceeds:
			g.taken[inv] += amount
			g.charges[inv]++
			out, _ = json.Marshal(map[string]any{"id": pi, "object": "payment_intent", "status": "succeeded", "amount": amount,
				"amount_received": amount, "currency": form.Get("currency"), "metadata": map[string]string{"payment_id": pid}})
		case cardDeclines:
			status = http.StatusPaymentRequired
			out, _ = json.Marshal(map[string]any{"error": map[string]any{"type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds",
				"message": "Your card has insufficient funds.", "payment_intent": map[string]any{"id": pi, "status": "requires_payment_method"}}})
		default:
			status = http.StatusPaymentRequired
			out, _ = json.Marshal(map[string]any{"error": map[string]any{"type": "card_error", "code": "authentication_required",
				"message": "This payment requires authentication.", "payment_intent": map[string]any{"id": pi, "status": "requires_payment_method"}}})
		}
	case "/v1/refunds":
		out, _ = json.Marshal(map[string]any{"id": fmt.Sprintf("re_model%d", g.n), "object": "refund", "status": "succeeded",
			"amount": amount, "currency": "cny", "payment_intent": form.Get("payment_intent")})
	default:
		status = http.StatusNotFound
		out = []byte(`{"error":{"type":"invalid_request_error","message":"unknown path"}}`)
	}
	if key != "" {
		g.byKey[key] = cardAnswer{status: status, body: out}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// saveCard gives customer a saved card at the model's Stripe, as a paid
// Checkout of a recurring order would.
func (g *cardGateway) saveCard(t testing.TB, b *bundle, customer uuid.UUID, at time.Time) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), `INSERT INTO saved_payment_methods (id, customer_id, gateway_interface_id, gateway_customer_id,
		gateway_method_id, brand, last4, exp_month, exp_year, created_at) VALUES ($1, $2, $3, $4, $5, 'visa', '4242', 12, 2099, $6)`,
		uuid.New(), customer, g.gw.InterfaceID, "cus_model"+customer.String()[:8], "pm_model"+customer.String()[:8], at)
	require.NoError(t, err)
}

// checkCardCharges: every saved-card charge of customer's invoices is
// recorded as the gateway answered it: a success as the payment settled
// (the invoice paid by it), a decline or an authentication asked for as a
// failed payment with nothing captured, and a notice to the customer
// with the link to pay by hand; the gateway never took money twice for
// one invoice; each attempt came on its day (the due day, then each of
// retryDays after it).
func (g *cardGateway) checkCardCharges(rt *rapid.T, b *bundle, customer uuid.UUID, retryDays []int) {
	ctx := context.Background()
	type attempt struct {
		Invoice, Payment, Order uuid.UUID
		N                       int32
		Outcome, Status         string
		Captured, Amount        string
		CreatedAt               time.Time
		DueAt                   *time.Time
		Notices                 int
	}
	rows, err := b.pool.Query(ctx, `SELECT a.invoice_id, a.payment_id, i.order_id, a.attempt, a.outcome, p.status, p.captured_amount::text, p.amount::text,
		a.created_at, i.due_at,
		(SELECT count(*) FROM events e WHERE e.event_type = 'renewal_reminder' AND e.order_id = i.order_id
		   AND e.payload->>'invoice_id' = i.id::text AND e.payload->>'kind' IN ($2, $3))::int
		FROM saved_charge_attempts a JOIN payments p ON p.id = a.payment_id JOIN invoices i ON i.id = a.invoice_id
		WHERE i.customer_id = $1 ORDER BY a.invoice_id, a.attempt`, customer, payment.ReminderCardDeclined, payment.ReminderCardAuth)
	if err != nil {
		rt.Fatalf("attempts: %v", err)
	}
	as, err := pgx.CollectRows(rows, pgx.RowToStructByPos[attempt])
	if err != nil {
		rt.Fatalf("attempts: %v", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	failed := map[uuid.UUID]int{}
	for _, a := range as {
		said, ok := g.answered[a.Payment.String()]
		if !ok {
			rt.Fatalf("attempt %d of invoice %s: payment %s never reached the gateway", a.N, a.Invoice, a.Payment)
		}
		switch said {
		case cardSucceeds:
			if a.Outcome != "succeeded" || (a.Status != "success" && a.Status != "refunded") {
				rt.Fatalf("the card was charged for invoice %s (payment %s), recorded %q, payment %s", a.Invoice, a.Payment, a.Outcome, a.Status)
			}
		default:
			if a.Outcome != said || a.Status != "failed" || a.Captured != "0.00" {
				rt.Fatalf("the gateway answered %s for invoice %s (payment %s), recorded %q, payment %s with %s captured", said, a.Invoice, a.Payment, a.Outcome, a.Status, a.Captured)
			}
			failed[a.Invoice]++
			if a.Notices < failed[a.Invoice] {
				rt.Fatalf("invoice %s: %d failed charges, %d notices with the link to pay by hand", a.Invoice, failed[a.Invoice], a.Notices)
			}
		}
		if a.DueAt == nil {
			rt.Fatalf("invoice %s charged with no due day", a.Invoice)
		}
		day := *a.DueAt
		if a.N > 0 {
			if int(a.N) > len(retryDays) {
				rt.Fatalf("invoice %s: attempt %d, past the %d retries", a.Invoice, a.N, len(retryDays))
			}
			day = day.Add(time.Duration(retryDays[a.N-1]) * 24 * time.Hour)
		}
		if a.CreatedAt.Before(day) {
			rt.Fatalf("invoice %s: attempt %d at %s, before its day %s", a.Invoice, a.N, a.CreatedAt, day)
		}
	}
	for inv, n := range g.charges {
		if n > 1 {
			rt.Fatalf("invoice %s charged %d times at the gateway (%d cents)", inv, n, g.taken[inv])
		}
	}
}
