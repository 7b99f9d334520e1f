package plugintest_test

import (
	"encoding/base64"
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
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v84/webhook"

	"github.com/rustbill/paymentd/internal/fakes/stripemock"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
)

// The Stripe plugin's tests. Against stripe-mock (Stripe's simulator,
// which validates every request against Stripe's OpenAPI description) they
// prove the requests are ones Stripe takes. stripe-mock keeps no state and
// answers fixtures — an unpaid session, amounts of its own — so what
// depends on Stripe's state (a paid or expired session, the amount coming
// back, refund outcomes other than success, errors) is tested against
// httptest servers answering what Stripe documents. Webhooks are signed
// with stripe-go's own signer (webhook.GenerateTestSignedPayload).

const whsec = "whsec_paymentdTestSecret0123456789"

// stripeNow is the service clock of the callback tests.
var stripeNow = time.Date(2026, 11, 25, 18, 0, 0, 0, time.UTC)

func stripeConfig(api string) map[string]any {
	return map[string]any{"secret_key": stripemock.Key, "webhook_secret": whsec, "api_base": api}
}

func loadStripe(t testing.TB) *plugin.Plugin {
	t.Helper()
	return plugintest.Load(t, "gateway/stripe.lua", plugin.Options{Now: func() time.Time { return stripeNow }})
}

func paymentInput(currency, amount string) map[string]any {
	return map[string]any{
		"payment_id": "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f", "order_id": "0d6a3a44-1f55-4c53-9a55-3a1c3f0c8e21", "invoice_id": "",
		"amount": amount, "currency": currency, "subject": "VPS 1G", "return_url": "https://shop.example/done",
		"notify_url": "https://pay.example/callbacks/x", "client_ip": "203.0.113.9",
	}
}

func TestStripeDeclaresItsCurrenciesSecretsAndAdminPage(t *testing.T) {
	t.Parallel()
	p := loadStripe(t)
	info := plugintest.Call(t, p, "info", nil, nil)
	cur := info["currencies"].([]any)
	require.Contains(t, cur, "USD")
	require.Contains(t, cur, "JPY")
	require.Contains(t, cur, "BHD")
	require.NotContains(t, cur, "HUF", "Stripe's special cases are left out")
	schema := plugintest.Call(t, p, "config_schema", nil, nil)
	props := schema["properties"].(map[string]any)
	require.Equal(t, true, props["secret_key"].(map[string]any)["x-secret"])
	require.Equal(t, true, props["webhook_secret"].(map[string]any)["x-secret"])
	require.Contains(t, props, "api_base")
	require.Equal(t, []any{"secret_key", "webhook_secret"}, schema["required"])
	page, err := plugintest.CallErr(p, plugin.AdminPage, nil, nil)
	require.NoError(t, err)
	require.Contains(t, page, "checkout.session.completed")
}

// TestStripeRequestsAreOnesStripeMockTakes runs every outbound call of the
// plugin against stripe-mock.
func TestStripeRequestsAreOnesStripeMockTakes(t *testing.T) {
	t.Parallel()
	sm := stripemock.Start(t)
	p := loadStripe(t)
	cfg := stripeConfig(sm.URL())

	var session string
	for _, tc := range []struct{ currency, amount string }{{"USD", "12.30"}, {"JPY", "1230.00"}, {"BHD", "12.34"}} {
		res := plugintest.Call(t, p, "create_payment", cfg, paymentInput(tc.currency, tc.amount))
		require.Regexp(t, `^cs_`, res["gateway_payment_id"], tc.currency)
		require.Regexp(t, `^https://checkout\.stripe\.com/`, res["payment_url"], tc.currency)
		session = res["gateway_payment_id"].(string)
	}

	q := plugintest.Call(t, p, "query_payment", cfg, map[string]any{
		"payment_id": "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f", "gateway_payment_id": session, "amount": "12.30", "currency": "USD",
	})
	require.Equal(t, "pending", q["status"], "stripe-mock's session fixture is open and unpaid")
	require.Regexp(t, `^pi_`, q["gateway_tx_id"])
	// Without a session id the PaymentIntent is searched for; stripe-mock's
	// fixture carries no payment id of ours, so nothing is found.
	q = plugintest.Call(t, p, "query_payment", cfg, map[string]any{
		"payment_id": "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f", "gateway_payment_id": "", "amount": "12.30", "currency": "USD",
	})
	require.Equal(t, map[string]any{"status": "pending", "gateway_payment_id": "", "gateway_tx_id": "", "amount": "", "currency": "", "paid_at": ""}, q)

	for name, tx := range map[string]string{"with the PaymentIntent": "pi_1PgafyB7WZ01zgkWSjxsAJo3", "through the session": ""} {
		r := plugintest.Call(t, p, "refund", cfg, map[string]any{
			"payment_id": "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f", "refund_id": "5c4b9c0e-3d0b-4e57-8f5b-0b9f7d0e1a2b",
			"gateway_payment_id": session, "gateway_tx_id": tx, "amount": "5.00", "payment_amount": "12.30", "currency": "USD", "reason": "customer asked",
		})
		require.Equal(t, "succeeded", r["status"], name)
		require.Regexp(t, `^re_`, r["gateway_refund_id"], name)
	}

	ok := plugintest.Call(t, p, "test_config", cfg, nil)
	require.Equal(t, true, ok["ok"], ok["message"])
	require.Equal(t, "secret key accepted (test mode)", ok["message"])
}

// stripeAPI is an httptest Stripe answering what each test says, recording
// each request.
type stripeAPI struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []stripeRequest
}

type stripeRequest struct {
	Method, Path, Auth, Key, ContentType string
	Form                                 url.Values
}

func newStripeAPI(t *testing.T, answer func(r *http.Request, n int) (int, string)) *stripeAPI {
	t.Helper()
	s := &stripeAPI{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		s.mu.Lock()
		s.reqs = append(s.reqs, stripeRequest{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), r.Header.Get("Content-Type"), form})
		n := len(s.reqs)
		s.mu.Unlock()
		status, out := answer(r, n)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, out)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *stripeAPI) requests() []stripeRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]stripeRequest(nil), s.reqs...)
}

func TestStripeCreatePaymentSendsTheSessionInMinorUnits(t *testing.T) {
	t.Parallel()
	api := newStripeAPI(t, func(*http.Request, int) (int, string) {
		return 200, `{"id":"cs_test_1","object":"checkout.session","url":"https://checkout.stripe.com/c/pay/cs_test_1"}`
	})
	p := loadStripe(t)
	for _, tc := range []struct{ currency, amount, minor string }{
		{"USD", "12.30", "1230"}, {"EUR", "0.50", "50"}, {"usd", "1000000.00", "100000000"},
		{"JPY", "1230.00", "1230"}, {"KRW", "50000.00", "50000"}, {"BHD", "12.34", "12340"}, {"KWD", "0.05", "50"},
	} {
		res := plugintest.Call(t, p, "create_payment", stripeConfig(api.URL), paymentInput(tc.currency, tc.amount))
		require.Equal(t, map[string]any{
			"payment_url": "https://checkout.stripe.com/c/pay/cs_test_1", "qr_code": "", "instructions": "", "gateway_payment_id": "cs_test_1",
		}, res)
		reqs := api.requests()
		r := reqs[len(reqs)-1]
		require.Equal(t, "POST /v1/checkout/sessions", r.Method+" "+r.Path)
		require.Equal(t, "Bearer "+stripemock.Key, r.Auth)
		require.Equal(t, "paymentd-payment-7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f", r.Key)
		require.Equal(t, "application/x-www-form-urlencoded", r.ContentType)
		require.Equal(t, url.Values{
			"mode":                                          {"payment"},
			"line_items[0][quantity]":                       {"1"},
			"line_items[0][price_data][currency]":           {strings.ToLower(tc.currency)},
			"line_items[0][price_data][unit_amount]":        {tc.minor},
			"line_items[0][price_data][product_data][name]": {"VPS 1G"},
			"client_reference_id":                           {"7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"},
			"success_url":                                   {"https://shop.example/done"},
			"cancel_url":                                    {"https://shop.example/done"},
			"metadata[payment_id]":                          {"7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"},
			"metadata[order_id]":                            {"0d6a3a44-1f55-4c53-9a55-3a1c3f0c8e21"},
			"payment_intent_data[metadata][payment_id]":     {"7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"},
			"payment_intent_data[metadata][order_id]":       {"0d6a3a44-1f55-4c53-9a55-3a1c3f0c8e21"},
		}, r.Form, tc.currency)
	}
	// Without a subject the line item is named after the order, or the
	// invoice (Stripe refuses an empty name).
	for _, tc := range []struct{ order, invoice, want string }{{"ord-1", "", "Order ord-1"}, {"", "inv-1", "Invoice inv-1"}} {
		in := paymentInput("USD", "12.30")
		in["subject"], in["order_id"], in["invoice_id"] = "", tc.order, tc.invoice
		plugintest.Call(t, p, "create_payment", stripeConfig(api.URL), in)
		reqs := api.requests()
		require.Equal(t, tc.want, reqs[len(reqs)-1].Form.Get("line_items[0][price_data][product_data][name]"))
	}
	n := len(api.requests())
	for _, tc := range []struct{ currency, amount, want string }{
		{"JPY", "12.30", "JPY has no minor unit: 12.30 cannot be charged"},
		{"HUF", "100.00", "does not take HUF"},
		{"USD", "12.3", "is not a decimal with two places"},
		{"USD", "-1.00", "is not a decimal with two places"},
	} {
		_, err := plugintest.CallErr(p, "create_payment", stripeConfig(api.URL), paymentInput(tc.currency, tc.amount))
		require.ErrorContains(t, err, tc.want)
	}
	require.Len(t, api.requests(), n, "nothing is sent for an amount Stripe cannot take")
}

func TestStripeCreatePaymentIsResentWithTheSameKeyAfterA5xx(t *testing.T) {
	t.Parallel()
	api := newStripeAPI(t, func(_ *http.Request, n int) (int, string) {
		if n == 1 {
			return 503, `{"error":{"message":"try again","type":"api_error"}}`
		}
		return 200, `{"id":"cs_test_2","url":"https://checkout.stripe.com/c/pay/cs_test_2"}`
	})
	p := loadStripe(t)
	res := plugintest.Call(t, p, "create_payment", stripeConfig(api.URL), paymentInput("USD", "12.30"))
	require.Equal(t, "cs_test_2", res["gateway_payment_id"])
	reqs := api.requests()
	require.Len(t, reqs, 2, "the Idempotency-Key makes the POST safe to resend")
	require.Equal(t, reqs[0].Key, reqs[1].Key)
	require.Equal(t, reqs[0].Form, reqs[1].Form)

	refused := newStripeAPI(t, func(*http.Request, int) (int, string) {
		return 400, `{"error":{"message":"Invalid currency: xxx","type":"invalid_request_error"}}`
	})
	_, err := plugintest.CallErr(p, "create_payment", stripeConfig(refused.URL), paymentInput("USD", "12.30"))
	require.ErrorContains(t, err, "stripe create refused: HTTP 400: Invalid currency: xxx")
	require.Len(t, refused.requests(), 1, "a 4xx is not resent")
}

func session(status, paymentStatus string, amount any, currency, ref string) string {
	b, _ := json.Marshal(map[string]any{
		"id": "cs_test_1", "object": "checkout.session", "mode": "payment", "status": status, "payment_status": paymentStatus,
		"amount_total": amount, "currency": currency, "client_reference_id": ref, "payment_intent": "pi_3Abc",
		"metadata": map[string]any{"payment_id": ref},
	})
	return string(b)
}

func TestStripeQueryPaymentReadsTheSession(t *testing.T) {
	t.Parallel()
	const pid = "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"
	p := loadStripe(t)
	for _, tc := range []struct {
		name, answer string
		want         map[string]any
		err          string
	}{
		{"paid", session("complete", "paid", 1230, "usd", pid), map[string]any{"status": "success", "amount": "12.30", "currency": "USD"}, ""},
		{"paid in yen", session("complete", "paid", 1230, "jpy", pid), map[string]any{"status": "success", "amount": "1230", "currency": "JPY"}, ""},
		{"paid in dinars", session("complete", "paid", 12340, "bhd", pid), map[string]any{"status": "success", "amount": "12.34", "currency": "BHD"}, ""},
		{"paid in cents below one unit", session("complete", "paid", 5, "usd", pid), map[string]any{"status": "success", "amount": "0.05", "currency": "USD"}, ""},
		{"expired", session("expired", "unpaid", 1230, "usd", pid), map[string]any{"status": "failed", "amount": "12.30", "currency": "USD"}, ""},
		{"open", session("open", "unpaid", 1230, "usd", pid), map[string]any{"status": "pending", "amount": "12.30", "currency": "USD"}, ""},
		{"completed, debit still pending", session("complete", "unpaid", 1230, "usd", pid), map[string]any{"status": "pending", "amount": "12.30", "currency": "USD"}, ""},
		{"another payment's session", session("complete", "paid", 1230, "usd", "someone-else"), nil, "belongs to payment someone-else"},
		{"paid without an amount", session("complete", "paid", nil, "usd", pid), nil, "a paid session without amount_total"},
	} {
		api := newStripeAPI(t, func(*http.Request, int) (int, string) { return 200, tc.answer })
		out, err := plugintest.CallErr(p, "query_payment", stripeConfig(api.URL), map[string]any{
			"payment_id": pid, "gateway_payment_id": "cs_test_1", "amount": "12.30", "currency": "USD",
		})
		r := api.requests()
		require.Len(t, r, 1)
		require.Equal(t, "GET /v1/checkout/sessions/cs_test_1", r[0].Method+" "+r[0].Path)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &got))
		tc.want["gateway_payment_id"], tc.want["gateway_tx_id"], tc.want["paid_at"] = "cs_test_1", "pi_3Abc", ""
		require.Equal(t, tc.want, got, tc.name)
	}
}

// A pending payment has no session id (the service keeps the gateway's
// id once a payment settles): its PaymentIntent is searched for by the
// payment id in its metadata, and the session listed by PaymentIntent.
func TestStripeQueryPaymentFindsTheSessionOfAPendingPayment(t *testing.T) {
	t.Parallel()
	const pid = "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"
	p := loadStripe(t)
	for _, tc := range []struct {
		name, search, list string
		want               string
		calls              int
	}{
		{"paid", `{"object":"search_result","data":[{"id":"pi_3Abc","object":"payment_intent","metadata":{"payment_id":"` + pid + `"}}]}`,
			`{"object":"list","data":[` + session("complete", "paid", 1230, "usd", pid) + `]}`, "success", 2},
		{"not paid yet: no PaymentIntent", `{"object":"search_result","data":[]}`, "", "pending", 1},
		{"a PaymentIntent of another payment", `{"object":"search_result","data":[{"id":"pi_9","metadata":{"payment_id":"other"}}]}`, "", "pending", 1},
		{"a session of another payment", `{"object":"search_result","data":[{"id":"pi_3Abc","metadata":{"payment_id":"` + pid + `"}}]}`,
			`{"object":"list","data":[` + session("complete", "paid", 1230, "usd", "other") + `]}`, "pending", 2},
	} {
		api := newStripeAPI(t, func(r *http.Request, _ int) (int, string) {
			if r.URL.Path == "/v1/payment_intents/search" {
				return 200, tc.search
			}
			return 200, tc.list
		})
		q := plugintest.Call(t, p, "query_payment", stripeConfig(api.URL), map[string]any{
			"payment_id": pid, "gateway_payment_id": "", "amount": "12.30", "currency": "USD",
		})
		require.Equal(t, tc.want, q["status"], tc.name)
		reqs := api.requests()
		require.Len(t, reqs, tc.calls, tc.name)
		require.Equal(t, "/v1/payment_intents/search", reqs[0].Path)
		if tc.want == "success" {
			require.Equal(t, "cs_test_1", q["gateway_payment_id"])
			require.Equal(t, "12.30", q["amount"])
		}
	}
	queries := make(chan string, 1)
	api := newStripeAPI(t, func(r *http.Request, _ int) (int, string) {
		queries <- r.URL.RawQuery
		return 200, `{"object":"search_result","data":[]}`
	})
	plugintest.Call(t, p, "query_payment", stripeConfig(api.URL), map[string]any{"payment_id": pid, "gateway_payment_id": ""})
	v, err := url.ParseQuery(<-queries)
	require.NoError(t, err)
	require.Equal(t, "metadata['payment_id']:'"+pid+"'", v.Get("query"))
	_, err = plugintest.CallErr(p, "query_payment", stripeConfig(api.URL), map[string]any{"payment_id": "x' OR status:'succeeded", "gateway_payment_id": ""})
	require.ErrorContains(t, err, "cannot be searched for")
}

func TestStripeRefundMapsStripesAnswers(t *testing.T) {
	t.Parallel()
	p := loadStripe(t)
	in := map[string]any{
		"payment_id": "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f", "refund_id": "5c4b9c0e-3d0b-4e57-8f5b-0b9f7d0e1a2b",
		"gateway_payment_id": "cs_test_1", "gateway_tx_id": "pi_3Abc", "amount": "5.00", "payment_amount": "12.30", "currency": "USD", "reason": "asked",
	}
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
		sent   int
	}{
		{"succeeded", 200, `{"id":"re_1","object":"refund","status":"succeeded"}`, "succeeded", 1},
		{"pending", 200, `{"id":"re_1","object":"refund","status":"pending"}`, "pending", 1},
		{"failed", 200, `{"id":"re_1","object":"refund","status":"failed","failure_reason":"expired_or_canceled_card"}`, "failed", 1},
		{"refused", 400, `{"error":{"message":"Refund amount ($20.00) is greater than unrefunded amount on charge ($12.30)","type":"invalid_request_error"}}`, "failed", 1},
		{"key reused with other parameters", 400, `{"error":{"message":"Keys for idempotent requests can only be used with the same parameters","type":"idempotency_error"}}`, "unknown", 1},
		{"server error, resent with the same key", 500, `{"error":{"type":"api_error"}}`, "unknown", 3},
		{"an answer that is not a refund", 200, `{"weird":true}`, "unknown", 1},
	} {
		api := newStripeAPI(t, func(*http.Request, int) (int, string) { return tc.status, tc.body })
		r := plugintest.Call(t, p, "refund", stripeConfig(api.URL), in)
		require.Equal(t, tc.want, r["status"], tc.name)
		reqs := api.requests()
		require.Len(t, reqs, tc.sent, tc.name)
		for _, req := range reqs {
			require.Equal(t, "POST /v1/refunds", req.Method+" "+req.Path)
			require.Equal(t, "paymentd-refund-5c4b9c0e-3d0b-4e57-8f5b-0b9f7d0e1a2b", req.Key)
			require.Equal(t, url.Values{
				"payment_intent": {"pi_3Abc"}, "amount": {"500"}, "metadata[refund_id]": {"5c4b9c0e-3d0b-4e57-8f5b-0b9f7d0e1a2b"},
				"metadata[payment_id]": {"7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"}, "metadata[reason]": {"asked"},
			}, req.Form, tc.name)
		}
	}
	// A yen refund of a fraction is refused before anything is sent.
	api := newStripeAPI(t, func(*http.Request, int) (int, string) { return 200, `{}` })
	yen := map[string]any{}
	for k, v := range in {
		yen[k] = v
	}
	yen["currency"], yen["amount"] = "JPY", "0.50"
	r := plugintest.Call(t, p, "refund", stripeConfig(api.URL), yen)
	require.Equal(t, "failed", r["status"])
	require.Empty(t, api.requests())
}

func TestStripeTestConfigTellsAWrongKey(t *testing.T) {
	t.Parallel()
	p := loadStripe(t)
	api := newStripeAPI(t, func(*http.Request, int) (int, string) {
		return 401, `{"error":{"message":"Invalid API Key provided: sk_test_****","type":"invalid_request_error"}}`
	})
	r := plugintest.Call(t, p, "test_config", stripeConfig(api.URL), nil)
	require.Equal(t, false, r["ok"])
	require.Contains(t, r["message"], "Stripe refused the secret key")
	r = plugintest.Call(t, p, "test_config", map[string]any{"secret_key": "pk_test_1", "webhook_secret": whsec}, nil)
	require.Equal(t, false, r["ok"])
	require.Contains(t, r["message"], "secret_key must be")
}

// event is a Stripe event around a Checkout Session.
func event(typ, paymentStatus string, amount int, currency, ref string) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": "evt_1", "object": "event", "type": typ, "api_version": "2025-09-30.clover", "created": stripeNow.Unix(),
		"data": map[string]any{"object": map[string]any{
			"id": "cs_test_1", "object": "checkout.session", "mode": "payment", "status": "complete", "payment_status": paymentStatus,
			"amount_total": amount, "currency": currency, "client_reference_id": ref, "payment_intent": "pi_3Abc",
			"metadata": map[string]any{"payment_id": ref, "order_id": "0d6a3a44-1f55-4c53-9a55-3a1c3f0c8e21"},
		}},
	})
	return b
}

// signed is Stripe's signature header over payload at t, made by stripe-go.
func signed(payload []byte, secret string, at time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: at}).Header
}

func callbackInput(payload []byte, sig string) map[string]any {
	h := map[string]any{"content-type": "application/json; charset=utf-8"}
	if sig != "" {
		h["stripe-signature"] = sig
	}
	in := map[string]any{"method": "POST", "content_type": "application/json; charset=utf-8", "payload": string(payload), "headers": h}
	// As the service hands a body that is not UTF-8 (payment.Callback).
	if !utf8.Valid(payload) {
		in["payload_base64"] = base64.StdEncoding.EncodeToString(payload)
	}
	return in
}

func TestStripeParseCallbackVerifiesStripeSignatures(t *testing.T) {
	t.Parallel()
	const pid = "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"
	p := loadStripe(t)
	cfg := stripeConfig("https://api.stripe.com")
	paid := event("checkout.session.completed", "paid", 1230, "usd", pid)
	good := signed(paid, whsec, stripeNow)
	call := func(payload []byte, sig string) map[string]any {
		return plugintest.Call(t, p, "parse_callback", cfg, callbackInput(payload, sig))
	}

	require.Equal(t, map[string]any{
		"valid": true, "reason": "", "payment_id": pid, "amount": "12.30", "currency": "USD", "status": "success",
		"gateway_payment_id": "cs_test_1", "gateway_tx_id": "pi_3Abc", "ack": `{"received":true}`,
	}, call(paid, good))

	for _, tc := range []struct {
		name, typ, paymentStatus, currency string
		amount                             int
		status, amountOut                  string
	}{
		{"async success", "checkout.session.async_payment_succeeded", "paid", "usd", 1230, "success", "12.30"},
		{"async failure", "checkout.session.async_payment_failed", "unpaid", "usd", 1230, "failed", "12.30"},
		{"completed, debit pending", "checkout.session.completed", "unpaid", "usd", 1230, "pending", "12.30"},
		{"yen", "checkout.session.completed", "paid", "jpy", 1230, "success", "1230"},
	} {
		ev := event(tc.typ, tc.paymentStatus, tc.amount, tc.currency, pid)
		r := call(ev, signed(ev, whsec, stripeNow))
		require.Equal(t, true, r["valid"], tc.name)
		require.Equal(t, tc.status, r["status"], tc.name)
		require.Equal(t, tc.amountOut, r["amount"], tc.name)
	}

	for name, ev := range map[string][]byte{
		"another event type":    []byte(`{"id":"evt_2","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","object":"payment_intent"}}}`),
		"a session not of ours": event("checkout.session.completed", "paid", 1230, "usd", ""),
	} {
		r := call(ev, signed(ev, whsec, stripeNow))
		require.Equal(t, true, r["valid"], name)
		require.Equal(t, "ignored", r["status"], name)
		require.Equal(t, `{"received":true}`, r["ack"], name)
	}

	// Every v1 entry counts (a secret being rolled), other schemes do not.
	other := signed(paid, "whsec_theOldSecret", stripeNow)
	v1 := func(h string) string { return h[strings.Index(h, "v1="):] }
	require.Equal(t, true, call(paid, fmt.Sprintf("t=%d,%s,%s", stripeNow.Unix(), v1(other), v1(good)))["valid"])
	require.Equal(t, true, call(paid, good+",v0=6ffbb59b2300aae63f272406069a9788598b792a944a07aba816edb039989a39")["valid"])

	tampered := []byte(strings.Replace(string(paid), `"amount_total":1230`, `"amount_total":1`, 1))
	require.NotEqual(t, paid, tampered)
	for name, tc := range map[string]struct {
		payload []byte
		sig     string
		reason  string
	}{
		"changed amount":           {tampered, good, "bad signature"},
		"another secret":           {paid, signed(paid, "whsec_notOurs", stripeNow), "bad signature"},
		"older than 300 s":         {paid, signed(paid, whsec, stripeNow.Add(-301*time.Second)), "timestamp outside the tolerance"},
		"further ahead than 300 s": {paid, signed(paid, whsec, stripeNow.Add(301*time.Second)), "timestamp outside the tolerance"},
		"no header":                {paid, "", "missing Stripe-Signature header"},
		"v0 only":                  {paid, strings.Replace(good, "v1=", "v0=", 1), "no v1 signature"},
		"no timestamp":             {paid, v1(good), "no timestamp"},
		"two timestamps":           {paid, fmt.Sprintf("t=%d,%s,t=1", stripeNow.Unix(), v1(good)), "two timestamps"},
		"a pair without =":         {paid, good + ",junk", "malformed Stripe-Signature"},
		"names in upper case":      {paid, strings.ToUpper(good), "no timestamp"},
		"hex in upper case":        {paid, good[:strings.Index(good, "v1=")+3] + strings.ToUpper(good[strings.Index(good, "v1=")+3:]), "bad signature"},
	} {
		r := call(tc.payload, tc.sig)
		require.Equal(t, false, r["valid"], name)
		require.Contains(t, r["reason"], tc.reason, name)
	}
	for name, tc := range map[string]time.Duration{"299 s old": -299 * time.Second, "299 s ahead": 299 * time.Second} {
		require.Equal(t, true, call(paid, signed(paid, whsec, stripeNow.Add(tc)))["valid"], name)
	}

	get := callbackInput(paid, good)
	get["method"] = "GET"
	r := plugintest.Call(t, p, "parse_callback", cfg, get)
	require.Equal(t, false, r["valid"])
	r = plugintest.Call(t, p, "parse_callback", map[string]any{"secret_key": stripemock.Key, "webhook_secret": ""}, callbackInput(paid, good))
	require.Equal(t, false, r["valid"], "without a webhook secret nothing is genuine")
}
