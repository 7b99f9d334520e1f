package clustertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// chargeStripe is a fake of the few Stripe calls a saved-card renewal
// makes (charge_saved's off-session PaymentIntent, query_payment's search
// and retrieval), keeping what a charge test must count: the
// PaymentIntents created per invoice (a charge: money taken or a decline)
// and the Idempotency-Keys sent for it. As Stripe, it answers a key sent
// again with the first answer, and a key still being answered with 409.
// Charges are slowed (slow), one can be held until released (holdAt: the
// n-th charge, counted from 1), and the first try of every cutEvery-th
// charge is cut after the charge is made, as a connection lost on the
// way back: the service's resend with the same key must get the first
// charge back, not a second.
type chargeStripe struct {
	*httptest.Server
	slow     time.Duration
	holdAt   int
	cutEvery int
	// held is closed when the held charge has arrived (and is made);
	// release lets it answer.
	held, release chan struct{}

	mu sync.Mutex
	// intents by Idempotency-Key ("" keys are each a new charge); keys and
	// intents per invoice; tries of each key; busy keys being answered.
	intents   map[string]map[string]any
	keys      map[string][]string
	charged   map[string]int
	tries     map[string]int
	busy      map[string]bool
	made, cut int
}

var searchPayment = regexp.MustCompile(`^metadata\['payment_id'\]:'([0-9a-f-]+)'$`)

func newChargeStripe(t *testing.T, slow time.Duration, holdAt, cutEvery int) *chargeStripe {
	t.Helper()
	f := &chargeStripe{
		slow: slow, holdAt: holdAt, cutEvery: cutEvery, held: make(chan struct{}), release: make(chan struct{}),
		intents: map[string]map[string]any{}, keys: map[string][]string{}, charged: map[string]int{},
		tries: map[string]int{}, busy: map[string]bool{},
	}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		f.Release()
		f.Close()
	})
	return f
}

// Release lets the held charge answer (once; later calls do nothing).
func (f *chargeStripe) Release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.release:
	default:
		close(f.release)
	}
}

func (f *chargeStripe) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/payment_intents":
		f.charge(w, r)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/payment_intents/search":
		m := searchPayment.FindStringSubmatch(r.URL.Query().Get("query"))
		var found []map[string]any
		f.mu.Lock()
		for _, pi := range f.intents {
			if m != nil && pi["metadata"].(map[string]any)["payment_id"] == m[1] {
				found = append(found, pi)
			}
		}
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "search_result", "data": found})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/payment_intents/"):
		id := strings.TrimPrefix(r.URL.Path, "/v1/payment_intents/")
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, pi := range f.intents {
			if pi["id"] == id {
				_ = json.NewEncoder(w).Encode(pi)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"type":"invalid_request_error","code":"resource_missing"}}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"type":"invalid_request_error","code":"resource_missing"}}`)
	}
}

// charge is POST /v1/payment_intents: a customer's saved card charged
// off-session (pm_decline… methods are declined).
func (f *chargeStripe) charge(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	form, _ := url.ParseQuery(string(body))
	key := r.Header.Get("Idempotency-Key")
	invoice := form.Get("metadata[invoice_id]")
	f.mu.Lock()
	if key == "" {
		key = fmt.Sprintf("none-%d", f.made+1)
	}
	f.tries[key]++
	if f.busy[key] {
		f.mu.Unlock()
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"error":{"type":"idempotency_error","message":"a request with this key is in progress"}}`)
		return
	}
	pi, again := f.intents[key]
	n := 0
	if !again {
		f.made++
		n = f.made
		declined := strings.HasPrefix(form.Get("payment_method"), "pm_decline")
		status := "succeeded"
		if declined {
			status = "requires_payment_method"
		} else {
			f.charged[invoice]++
		}
		pi = map[string]any{
			"id": fmt.Sprintf("pi_off_%d", n), "object": "payment_intent", "status": status,
			"amount": json.Number(form.Get("amount")), "amount_received": json.Number("0"), "currency": form.Get("currency"),
			"metadata": map[string]any{"payment_id": form.Get("metadata[payment_id]"), "invoice_id": invoice, "off_session": "1"},
		}
		if !declined {
			pi["amount_received"] = json.Number(form.Get("amount"))
		}
		f.intents[key] = pi
		f.keys[invoice] = append(f.keys[invoice], key)
		f.busy[key] = true
	}
	f.mu.Unlock()
	if !again {
		defer func() {
			f.mu.Lock()
			delete(f.busy, key)
			f.mu.Unlock()
		}()
		time.Sleep(f.slow)
		if n == f.holdAt {
			close(f.held)
			<-f.release
		}
		if f.cutEvery > 0 && n%f.cutEvery == 0 {
			f.mu.Lock()
			f.cut++
			delete(f.busy, key)
			f.mu.Unlock()
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
	}
	if pi["status"] != "succeeded" {
		w.WriteHeader(http.StatusPaymentRequired)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
			"type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds", "message": "Your card has insufficient funds.",
			"payment_intent": pi,
		}})
		return
	}
	_ = json.NewEncoder(w).Encode(pi)
}

// seedCardServices makes n monthly services of n customers, each active
// with its paid period ended a minute ago, each customer with a card saved
// at gateway interface gw and no balance: the billing run issues each a
// renewal invoice due now and charges the card. Every fourth card is
// declined (pm_decline…); the orders of the customers in off do not
// charge it (auto_charge off).
func seedCardServices(t *testing.T, b *bundle, n int, gw string, off []int) {
	t.Helper()
	ctx := context.Background()
	_, err := b.c.Pool.Exec(ctx, `
WITH c AS (
    INSERT INTO customers (email, password_hash, currency, balance)
    SELECT 'card' || i || '@example.com', 'x', 'CNY', 0
    FROM generate_series(1, $1) AS i
    RETURNING id, email
), m AS (
    INSERT INTO saved_payment_methods (id, customer_id, gateway_interface_id, gateway_customer_id, gateway_method_id, brand, last4, exp_month, exp_year, created_at)
    SELECT gen_random_uuid(), id, $2::uuid, 'cus_' || md5(email),
           CASE WHEN substring(email FROM '[0-9]+')::int % 4 = 0 THEN 'pm_decline' ELSE 'pm_card' END || substring(email FROM '[0-9]+'),
           'visa', '4242', 12, 2099, now()
    FROM c
), o AS (
    INSERT INTO orders (customer_id, total_amount, currency, status, billing_cycle, renewal_price, description, paid_until)
    SELECT id, 0, 'CNY', 'active', 'monthly', 10.00, 'VPS ' || email, now() - interval '1 minute' FROM c
    RETURNING id, paid_until, description
), a AS (
    INSERT INTO order_auto_charge (order_id, auto_charge, updated_at)
    SELECT id, false, now() FROM o WHERE substring(description FROM '[0-9]+')::int = ANY($3::int[])
)
INSERT INTO service_periods (order_id, seq, starts_at, ends_at, anchor_at, anchor_months, status, paid_at)
SELECT id, 1, paid_until - interval '1 month', paid_until, paid_until - interval '1 month', 1, 'paid', paid_until - interval '1 month'
FROM o`, n, gw, off)
	require.NoError(t, err)
}

// addStripe creates and enables a Stripe gateway interface talking to
// api, as the admin, and returns its id.
func addStripe(t *testing.T, b *bundle, api string) string {
	t.Helper()
	ctx := context.Background()
	cfg, err := structpb.NewStruct(map[string]any{"secret_key": "sk_test_cluster", "webhook_secret": "whsec_cluster", "api_base": api})
	require.NoError(t, err)
	gws := gatewaypbconnect.NewGatewayAdminServiceClient(http.DefaultClient, b.c.Alive()[0].URL)
	req := connect.NewRequest(&gatewaypb.CreateGatewayInterfaceRequest{PluginName: "stripe", DisplayName: "Card (fake Stripe)", Config: cfg})
	req.Header().Set("Cookie", b.w.Admin)
	res, err := gws.CreateGatewayInterface(ctx, req)
	require.NoError(t, err)
	id := res.Msg.GetGatewayInterface().GetId()
	en := connect.NewRequest(&gatewaypb.EnableGatewayInterfaceRequest{Id: id})
	en.Header().Set("Cookie", b.w.Admin)
	_, err = gws.EnableGatewayInterface(ctx, en)
	require.NoError(t, err)
	return id
}

// Renewal invoices due now are charged to saved cards (issue 39, 1) and
// the billing leader is killed with SIGKILL while a charge is at the
// gateway: Stripe took the money, the leader never heard. The other
// instance takes the role over, leaves the claimed attempt alone (its
// pending payment is settled from the gateway's search by the
// reconciler) and charges the rest. Every due invoice is paid exactly
// once, each by one charge under one Idempotency-Key (the payment id of
// its one attempt); the charges whose answer was cut on the way back were
// resent with the same key and got the first charge back; declined cards
// are charged once, not again on every pass, and noticed once; the
// attempt whose answer died with the leader is answered from the status
// query; auto_charge off charges nothing; no payment is left pending; the
// ledger is clean.
func TestABillingLeaderKilledMidChargeChargesEachSavedCardOnce(t *testing.T) {
	t.Parallel()
	const (
		cards  = 48
		holdAt = 12
	)
	off := []int{5, 15, 25, 35, 45}
	b := setup(t, 2, testdb.URL(t), "PAYMENTD_BILLING__RUN_INTERVAL=1s")
	ctx := context.Background()
	fake := newChargeStripe(t, 30*time.Millisecond, holdAt, 5)
	gw := addStripe(t, b, fake.URL)
	count := func(t testkit.T, sql string, args ...any) int {
		var n int
		require.NoError(t, b.c.Pool.QueryRow(ctx, sql, args...).Scan(&n))
		return n
	}
	var declining, charging int
	for i := 1; i <= cards; i++ {
		switch {
		case containsInt(off, i):
		case i%4 == 0:
			declining++
		default:
			charging++
		}
	}
	seedCardServices(t, b, cards, gw, off)

	select {
	case <-fake.held:
	case <-time.After(60 * time.Second):
		t.Fatal("no charge reached the gateway")
	}
	leader, err := b.c.WaitLeader(ctx, "billing", nil)
	require.NoError(t, err)
	killedAt, err := leader.Kill()
	require.NoError(t, err)
	fake.Release() // Stripe charged it; nobody hears the answer
	fake.mu.Lock()
	atKill := fake.made
	fake.mu.Unlock()
	t.Logf("billing leader %s killed while charge %d of %d was at the gateway", leader.Name, atKill, charging+declining)
	require.Less(t, atKill, charging+declining, "killed in the middle of the charges")

	next, err := b.c.WaitLeader(ctx, "billing", leader)
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, charging, count(c, `SELECT count(*) FROM invoices WHERE status = 'paid'`))
		assert.Equal(c, declining, count(c, `SELECT count(*) FROM payments WHERE status = 'failed'`))
		assert.Zero(c, count(c, `SELECT count(*) FROM payments WHERE status = 'pending'`))
		assert.Zero(c, count(c, `SELECT count(*) FROM saved_charge_attempts WHERE outcome = ''`), "every attempt answered")
	}, 90*time.Second, 100*time.Millisecond)
	t.Logf("%s took over and finished the charges %s after the kill", next.Name, time.Since(killedAt).Round(time.Millisecond))
	// A pass or two more: nothing is charged again.
	time.Sleep(2500 * time.Millisecond)

	// The database: one attempt per charged invoice, its payment settled;
	// each paid invoice paid by exactly one payment; none for the orders
	// that turned auto_charge off.
	require.Equal(t, cards, count(t, `SELECT count(*) FROM invoices`), "one invoice per service")
	require.Equal(t, charging+declining, count(t, `SELECT count(*) FROM saved_charge_attempts`), "one attempt per charged invoice")
	require.Equal(t, charging+declining, count(t, `SELECT count(DISTINCT invoice_id) FROM saved_charge_attempts WHERE attempt = 0`))
	require.Equal(t, charging, count(t, `SELECT count(*) FROM payments WHERE status = 'success'`), "each paid once")
	require.Zero(t, count(t, `SELECT count(*) FROM (SELECT invoice_id FROM payments WHERE status = 'success' GROUP BY invoice_id HAVING count(*) > 1) d`))
	require.Equal(t, charging+declining, count(t, `SELECT count(*) FROM payments`), "no payment but the attempts'")
	require.Zero(t, count(t, `SELECT count(*) FROM payments p JOIN invoices i ON i.id = p.invoice_id JOIN order_auto_charge a ON a.order_id = i.order_id`),
		"auto_charge off: not charged")
	require.Equal(t, charging, count(t, `SELECT count(*) FROM service_periods WHERE seq = 2 AND status = 'paid'`))
	// The attempt whose answer died with the leader was answered from the
	// reconciler's status query.
	require.Equal(t, charging, count(t, `SELECT count(*) FROM saved_charge_attempts a JOIN payments p ON p.id = a.payment_id
		WHERE a.outcome = 'succeeded' AND p.status = 'success'`))
	require.Equal(t, 1, count(t, `SELECT count(*) FROM saved_charge_attempts WHERE message LIKE '%answer was lost%'`))
	require.Equal(t, declining, count(t, `SELECT count(*) FROM events WHERE event_type = 'renewal_reminder' AND payload->>'kind' = 'card_declined'`),
		"each decline noticed once")

	// The gateway: per invoice one key, the attempt's payment id; at most
	// one charge; the cut answers were sent again under their key.
	rows, err := b.c.Pool.Query(ctx, `SELECT invoice_id::text, payment_id::text FROM saved_charge_attempts`)
	require.NoError(t, err)
	attempts := map[string]string{}
	for rows.Next() {
		var inv, pay string
		require.NoError(t, rows.Scan(&inv, &pay))
		attempts[inv] = pay
	}
	require.NoError(t, rows.Err())
	fake.mu.Lock()
	defer fake.mu.Unlock()
	require.Len(t, fake.keys, charging+declining, "the gateway saw each charged invoice")
	resent := 0
	for inv, keys := range fake.keys {
		require.LessOrEqual(t, fake.charged[inv], 1, "invoice %s charged once", inv)
		require.Equal(t, []string{"paymentd-charge-" + attempts[inv]}, keys, "invoice %s: one key, its attempt's payment id", inv)
		if fake.tries[keys[0]] > 1 {
			resent++
		}
	}
	require.Equal(t, charging+declining, fake.made)
	require.Positive(t, fake.cut)
	require.GreaterOrEqual(t, resent, fake.cut, "each cut answer was asked again under its key")
	t.Logf("gateway: %d charges, %d answers cut and resent under their key (%d keys sent more than once)", fake.made, fake.cut, resent)

	require.NoError(t, b.c.CheckLeadership("billing"))
	rep, err := ledger.Verify(ctx, b.c.Pool)
	require.NoError(t, err)
	require.True(t, rep.OK(), rep.String())
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
