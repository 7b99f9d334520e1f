package plugintest_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/fakes/stripemock"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
)

// Saved cards (issue 39, 1): the Checkout of a recurring order saves the
// card, charge_saved charges it off-session under the attempt's payment id
// as Idempotency-Key, remove_saved detaches it.

const savedPID = "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"

func chargeInput(amount string) map[string]any {
	return map[string]any{
		"payment_id": savedPID, "invoice_id": "5c4b9c0e-3d0b-4e57-8f5b-0b9f7d0e1a2b", "order_id": "0d6a3a44-1f55-4c53-9a55-3a1c3f0c8e21",
		"amount": amount, "currency": "USD", "subject": "Invoice INV-1", "gateway_customer_id": "cus_Abc", "gateway_method_id": "pm_Card",
	}
}

func TestStripeSavedCardRequestsAreOnesStripeMockTakes(t *testing.T) {
	t.Parallel()
	sm := stripemock.Start(t)
	p := loadStripe(t)
	require.True(t, p.Script().Has(plugin.ChargeSaved))
	require.True(t, p.Script().Has(plugin.RemoveSaved))
	require.Equal(t, true, plugintest.Call(t, p, "info", nil, nil)["saves_payment_methods"])
	cfg := stripeConfig(sm.URL())

	in := paymentInput("USD", "12.30")
	in["save_method"], in["customer_id"] = true, "9e1d7f43-33a8-4a4e-a8c4-2f7f0e0f8b11"
	res := plugintest.Call(t, p, "create_payment", cfg, in)
	require.Regexp(t, `^cs_`, res["gateway_payment_id"])
	require.Regexp(t, `^cus_`, res["gateway_customer_id"], "a Stripe Customer is made for the paymentd customer")
	in["gateway_customer_id"] = res["gateway_customer_id"]
	again := plugintest.Call(t, p, "create_payment", cfg, in)
	require.Equal(t, res["gateway_customer_id"], again["gateway_customer_id"])

	c := plugintest.Call(t, p, "charge_saved", cfg, chargeInput("12.30"))
	require.Regexp(t, `^pi_`, c["gateway_payment_id"], "stripe-mock took the off-session PaymentIntent: %v", c)

	r := plugintest.Call(t, p, "remove_saved", cfg, map[string]any{"gateway_customer_id": "cus_Abc", "gateway_method_id": "pm_Card"})
	require.Equal(t, true, r["removed"])
}

func TestStripeCreatePaymentSavesTheCardOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	api := newStripeAPI(t, func(r *http.Request, _ int) (int, string) {
		if r.URL.Path == "/v1/customers" {
			return 200, `{"id":"cus_New1","object":"customer"}`
		}
		return 200, `{"id":"cs_test_1","object":"checkout.session","url":"https://checkout.stripe.com/c/pay/cs_test_1"}`
	})
	p := loadStripe(t)
	cfg := stripeConfig(api.URL)

	plain := plugintest.Call(t, p, "create_payment", cfg, paymentInput("USD", "12.30"))
	require.NotContains(t, plain, "gateway_customer_id")
	in := paymentInput("USD", "12.30")
	in["save_method"], in["customer_id"] = true, "9e1d7f43-33a8-4a4e-a8c4-2f7f0e0f8b11"
	saved := plugintest.Call(t, p, "create_payment", cfg, in)
	require.Equal(t, "cus_New1", saved["gateway_customer_id"])
	in["gateway_customer_id"] = "cus_Known"
	known := plugintest.Call(t, p, "create_payment", cfg, in)
	require.Equal(t, "cus_Known", known["gateway_customer_id"])

	reqs := api.requests()
	require.Len(t, reqs, 4, "plain session, new customer, session, session with the known customer")
	require.Empty(t, reqs[0].Form.Get("payment_intent_data[setup_future_usage]"))
	require.Empty(t, reqs[0].Form.Get("customer"))
	require.Equal(t, "/v1/customers", reqs[1].Path)
	require.Equal(t, "paymentd-customer-9e1d7f43-33a8-4a4e-a8c4-2f7f0e0f8b11", reqs[1].Key)
	require.Equal(t, "off_session", reqs[2].Form.Get("payment_intent_data[setup_future_usage]"))
	require.Equal(t, "cus_New1", reqs[2].Form.Get("customer"))
	require.Equal(t, "1", reqs[2].Form.Get("metadata[save_method]"))
	require.Equal(t, "cus_Known", reqs[3].Form.Get("customer"))
}

func TestStripeChargeSavedMapsStripesAnswers(t *testing.T) {
	t.Parallel()
	p := loadStripe(t)
	for name, tc := range map[string]struct {
		status       int
		body         string
		want, code   string
		amount, gwID string
	}{
		"paid": {200, `{"id":"pi_1","object":"payment_intent","status":"succeeded","amount":1230,"amount_received":1230,"currency":"usd"}`,
			"success", "", "12.30", "pi_1"},
		"processing": {200, `{"id":"pi_1","object":"payment_intent","status":"processing","amount":1230,"currency":"usd"}`,
			"pending", "", "12.30", "pi_1"},
		"SCA": {402, `{"error":{"type":"card_error","code":"authentication_required","message":"This payment requires authentication.","payment_intent":{"id":"pi_2","status":"requires_payment_method"}}}`,
			"failed", "authentication_required", "", "pi_2"},
		"declined": {402, `{"error":{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds","message":"Your card has insufficient funds."}}`,
			"failed", "insufficient_funds", "", ""},
		"Stripe down": {500, `{"error":{"type":"api_error","message":"boom"}}`, "unknown", "", "", ""},
	} {
		api := newStripeAPI(t, func(*http.Request, int) (int, string) { return tc.status, tc.body })
		out := plugintest.Call(t, p, "charge_saved", stripeConfig(api.URL), chargeInput("12.30"))
		require.Equal(t, tc.want, out["status"], name)
		require.Equal(t, tc.code, out["code"], name)
		if tc.amount != "" {
			require.Equal(t, tc.amount, out["amount"], name)
			require.Equal(t, "USD", out["currency"], name)
		}
		if tc.gwID != "" {
			require.Equal(t, tc.gwID, out["gateway_payment_id"], name)
		}
		reqs := api.requests()
		require.NotEmpty(t, reqs, name)
		for _, r := range reqs {
			// A 5xx is sent again by the host, under the same key: one charge.
			require.Equal(t, "paymentd-charge-"+savedPID, r.Key, name)
		}
		r := reqs[0]
		require.Equal(t, "/v1/payment_intents", r.Path, name)
		require.Equal(t, "paymentd-charge-"+savedPID, r.Key, "the attempt's payment id is the Idempotency-Key: a resend is the same charge")
		require.Equal(t, "1230", r.Form.Get("amount"))
		require.Equal(t, "usd", r.Form.Get("currency"))
		require.Equal(t, "true", r.Form.Get("confirm"))
		require.Equal(t, "true", r.Form.Get("off_session"))
		require.Equal(t, "cus_Abc", r.Form.Get("customer"))
		require.Equal(t, "pm_Card", r.Form.Get("payment_method"))
		require.Equal(t, savedPID, r.Form.Get("metadata[payment_id]"))
	}
}

func TestStripeCallbackOfASavingSessionNamesTheCard(t *testing.T) {
	t.Parallel()
	api := newStripeAPI(t, func(r *http.Request, _ int) (int, string) {
		if r.URL.Path == "/v1/payment_intents/pi_3Abc" && r.URL.Query().Get("expand[]") == "payment_method" {
			return 200, `{"id":"pi_3Abc","object":"payment_intent","status":"succeeded","payment_method":{"id":"pm_Saved","object":"payment_method","type":"card","card":{"brand":"visa","last4":"4242","exp_month":8,"exp_year":2027,"fingerprint":"x"}}}`
		}
		return 404, `{"error":{"type":"invalid_request_error","code":"resource_missing"}}`
	})
	p := loadStripe(t)
	cfg := stripeConfig(api.URL)
	var ev map[string]any
	require.NoError(t, json.Unmarshal(event("checkout.session.completed", "paid", 1230, "usd", savedPID), &ev))
	obj := ev["data"].(map[string]any)["object"].(map[string]any)
	obj["customer"] = "cus_Abc"
	obj["metadata"].(map[string]any)["save_method"] = "1"
	payload, _ := json.Marshal(ev)
	out := plugintest.Call(t, p, "parse_callback", cfg, callbackInput(payload, signed(payload, whsec, stripeNow)))
	require.Equal(t, "success", out["status"])
	require.Equal(t, map[string]any{
		"gateway_customer_id": "cus_Abc", "gateway_method_id": "pm_Saved", "brand": "visa", "last4": "4242",
		"exp_month": float64(8), "exp_year": float64(2027),
	}, out["saved_method"])

	// A session that saves nothing reads nothing more.
	payload = event("checkout.session.completed", "paid", 1230, "usd", savedPID)
	out = plugintest.Call(t, p, "parse_callback", cfg, callbackInput(payload, signed(payload, whsec, stripeNow)))
	require.Nil(t, out["saved_method"])
	require.Len(t, api.requests(), 1)
}
