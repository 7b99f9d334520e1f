package plugintest_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	stripe "github.com/stripe/stripe-go/v84"

	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
)

// The Stripe plugin's pinned API version and the events that end a
// payment or a refund (issue 39, 3).

// stripeVersion is the Stripe-Version the plugin pins (STRIPE_VERSION in
// stripe.lua).
const stripeVersion = "2026-02-25.clover"

// TestStripeSendsItsPinnedAPIVersionOnEveryRequest: every request of every
// function carries Stripe-Version, so the account's default API version
// never decides the shapes the plugin reads.
func TestStripeSendsItsPinnedAPIVersionOnEveryRequest(t *testing.T) {
	t.Parallel()
	// The plugin was written against stripe-go v84's API version; moving
	// stripe-go in go.mod moves this, and the pin must be moved with it
	// (docs/plugins.md, "Stripe's API version").
	require.Equal(t, stripe.APIVersion, stripeVersion, "stripe-go's API version moved: move STRIPE_VERSION in stripe.lua after checking Stripe's changelog")

	const pid = "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"
	var mu sync.Mutex
	seen := map[string]string{} // "METHOD path" → Stripe-Version
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Method+" "+r.URL.Path] = r.Header.Get("Stripe-Version")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/checkout/sessions":
			if r.Method == http.MethodPost {
				_, _ = w.Write([]byte(`{"id":"cs_test_1","object":"checkout.session","url":"https://checkout.stripe.com/c/pay/cs_test_1"}`))
				return
			}
			_, _ = w.Write([]byte(`{"object":"list","data":[` + session("complete", "paid", 1230, "usd", pid) + `]}`))
		case "/v1/checkout/sessions/cs_test_1":
			_, _ = w.Write([]byte(session("complete", "paid", 1230, "usd", pid)))
		case "/v1/payment_intents/search":
			_, _ = w.Write([]byte(`{"object":"search_result","data":[{"id":"pi_3Abc","object":"payment_intent","metadata":{"payment_id":"` + pid + `"}}]}`))
		case "/v1/refunds":
			_, _ = w.Write([]byte(`{"id":"re_1","object":"refund","status":"succeeded"}`))
		case "/v1/balance":
			_, _ = w.Write([]byte(`{"object":"balance"}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(api.Close)
	p := loadStripe(t)
	cfg := stripeConfig(api.URL)

	plugintest.Call(t, p, "create_payment", cfg, paymentInput("USD", "12.30"))
	for _, id := range []string{"cs_test_1", ""} { // by session, and by the PaymentIntent search
		q := plugintest.Call(t, p, "query_payment", cfg, map[string]any{"payment_id": pid, "gateway_payment_id": id, "amount": "12.30", "currency": "USD"})
		require.Equal(t, "success", q["status"])
	}
	for _, tx := range []string{"pi_3Abc", ""} { // with the PaymentIntent, and through the session
		r := plugintest.Call(t, p, "refund", cfg, map[string]any{
			"payment_id": pid, "refund_id": "5c4b9c0e-3d0b-4e57-8f5b-0b9f7d0e1a2b", "gateway_payment_id": "cs_test_1", "gateway_tx_id": tx,
			"amount": "5.00", "payment_amount": "12.30", "currency": "USD", "reason": "asked",
		})
		require.Equal(t, "succeeded", r["status"])
	}
	require.Equal(t, true, plugintest.Call(t, p, "test_config", cfg, nil)["ok"])

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]string{
		"POST /v1/checkout/sessions":          stripeVersion,
		"GET /v1/checkout/sessions":           stripeVersion,
		"GET /v1/checkout/sessions/cs_test_1": stripeVersion,
		"GET /v1/payment_intents/search":      stripeVersion,
		"POST /v1/refunds":                    stripeVersion,
		"GET /v1/balance":                     stripeVersion,
	}, seen, "every request the plugin makes, each with the pinned version")

	page, err := plugintest.CallErr(p, plugin.AdminPage, nil, nil)
	require.NoError(t, err)
	require.Contains(t, page, "API version "+stripeVersion, "the admin sets the webhook endpoint to the same version")
}

// refundEvent is a Stripe refund.* event for refund rid (our id in its
// metadata; "" for a refund made elsewhere).
func refundEvent(typ, status string, amount int, currency, rid string) []byte {
	meta := map[string]any{}
	if rid != "" {
		meta = map[string]any{"refund_id": rid, "payment_id": "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f", "reason": "asked"}
	}
	obj := map[string]any{
		"id": "re_3Abc", "object": "refund", "amount": amount, "currency": currency, "status": status,
		"payment_intent": "pi_3Abc", "metadata": meta,
	}
	if status == "failed" {
		obj["failure_reason"] = "expired_or_canceled_card"
	}
	b, _ := json.Marshal(map[string]any{
		"id": "evt_r1", "object": "event", "type": typ, "api_version": stripeVersion, "created": stripeNow.Unix(),
		"data": map[string]any{"object": obj},
	})
	return b
}

func TestStripeParseCallbackEndsPaymentsAndRefunds(t *testing.T) {
	t.Parallel()
	const pid = "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"
	const rid = "5c4b9c0e-3d0b-4e57-8f5b-0b9f7d0e1a2b"
	p := loadStripe(t)
	cfg := stripeConfig("https://api.stripe.com")
	call := func(payload []byte) map[string]any {
		return plugintest.Call(t, p, "parse_callback", cfg, callbackInput(payload, signed(payload, whsec, stripeNow)))
	}

	// A session that can never be paid: a final failure, with its amount.
	for typ, reason := range map[string]string{
		"checkout.session.expired":              "expired unpaid",
		"checkout.session.async_payment_failed": "payment failed",
	} {
		ev := event(typ, "unpaid", 1230, "usd", pid)
		r := call(ev)
		require.Equal(t, true, r["valid"], typ)
		require.Equal(t, "failed", r["status"], typ)
		require.Equal(t, true, r["final"], typ)
		require.Contains(t, r["reason"], reason, typ)
		require.Equal(t, pid, r["payment_id"], typ)
		require.Equal(t, "12.30", r["amount"], typ)
		require.Equal(t, "USD", r["currency"], typ)
		require.Equal(t, "cs_test_1", r["gateway_payment_id"], typ)
	}
	// Not final: a paid or pending session.
	require.NotContains(t, call(event("checkout.session.completed", "unpaid", 1230, "usd", pid)), "final")
	require.NotContains(t, call(event("checkout.session.completed", "paid", 1230, "usd", pid)), "final")
	// An expired session of another integration is ignored.
	require.Equal(t, "ignored", call(event("checkout.session.expired", "unpaid", 1230, "usd", ""))["status"])

	for _, tc := range []struct {
		name, typ, status string
		amount            int
		currency          string
		want, amountOut   string
		message           string
	}{
		{"updated to succeeded", "refund.updated", "succeeded", 500, "usd", "succeeded", "5.00", ""},
		{"updated, still pending", "refund.updated", "pending", 500, "usd", "pending", "5.00", ""},
		{"requires action", "refund.updated", "requires_action", 500, "usd", "pending", "5.00", ""},
		{"updated to canceled", "refund.updated", "canceled", 500, "usd", "failed", "5.00", "Stripe reports the refund canceled"},
		{"failed", "refund.failed", "failed", 500, "usd", "failed", "5.00", "Stripe reports the refund failed: expired_or_canceled_card"},
		{"yen", "refund.updated", "succeeded", 500, "jpy", "succeeded", "500", ""},
	} {
		r := call(refundEvent(tc.typ, tc.status, tc.amount, tc.currency, rid))
		require.Equal(t, true, r["valid"], tc.name)
		require.Equal(t, "refund", r["status"], tc.name)
		require.Equal(t, pid, r["payment_id"], tc.name)
		require.Equal(t, `{"received":true}`, r["ack"], tc.name)
		require.Equal(t, map[string]any{
			"refund_id": rid, "status": tc.want, "gateway_refund_id": "re_3Abc", "amount": tc.amountOut,
			"currency": map[string]string{"usd": "USD", "jpy": "JPY"}[tc.currency], "message": tc.message,
		}, r["refund"], tc.name)
	}
	// A refund made in the dashboard carries no refund id of ours.
	r := call(refundEvent("refund.updated", "succeeded", 500, "usd", ""))
	require.Equal(t, true, r["valid"])
	require.Equal(t, "ignored", r["status"])
	// A refund event is verified like any other: a bad signature is refused.
	ev := refundEvent("refund.failed", "failed", 500, "usd", rid)
	r = plugintest.Call(t, p, "parse_callback", cfg, callbackInput(ev, signed(ev, "whsec_notOurs", stripeNow)))
	require.Equal(t, false, r["valid"])
	require.Contains(t, r["reason"], "bad signature")
	// Not a refund, or a status Stripe does not document.
	for name, obj := range map[string]map[string]any{
		"not a refund":   {"id": "ch_1", "object": "charge"},
		"unknown status": {"id": "re_1", "object": "refund", "status": "weird", "metadata": map[string]any{"refund_id": rid}},
	} {
		b, _ := json.Marshal(map[string]any{"id": "evt_x", "object": "event", "type": "refund.updated", "data": map[string]any{"object": obj}})
		r := call(b)
		require.Equal(t, false, r["valid"], name)
	}

	page, err := plugintest.CallErr(p, plugin.AdminPage, nil, nil)
	require.NoError(t, err)
	for _, typ := range []string{
		"checkout.session.completed", "checkout.session.async_payment_succeeded", "checkout.session.async_payment_failed",
		"checkout.session.expired", "refund.updated", "refund.failed",
	} {
		require.Contains(t, page, typ)
	}
}
