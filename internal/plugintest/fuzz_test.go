package plugintest_test

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/rustbill/paymentd/internal/fakes/alipay"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
)

// FuzzEpayParseCallback feeds arbitrary notifications to the shipped
// epay.lua's parse_callback, through the real plugin runtime. The answer is
// always a well-formed verdict (or a plugin error, never a panic), and a
// notification is only ever found valid when it carries the merchant's
// signature over exactly what it reports: the payment, the amount and the
// gateway ids it names are those of the signed parameters, checked here
// independently with the fake gateway's own signing code.
func FuzzEpayParseCallback(f *testing.F) {
	signed := func(v url.Values) string {
		v.Set("sign", epay.Sign(v, epay.DefaultKey))
		v.Set("sign_type", "MD5")
		return v.Encode()
	}
	genuine := url.Values{
		"pid": {epay.DefaultPID}, "trade_no": {"2026112203000001"}, "out_trade_no": {"7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"},
		"type": {"alipay"}, "name": {"VPS 1个月"}, "money": {"12.30"}, "trade_status": {"TRADE_SUCCESS"},
	}
	f.Add("GET", "", signed(genuine))
	f.Add("POST", "application/x-www-form-urlencoded; charset=utf-8", signed(genuine))
	f.Add("POST", "application/json", signed(genuine))
	tampered, _ := url.ParseQuery(signed(genuine))
	tampered.Set("money", "0.01")
	f.Add("GET", "", tampered.Encode())
	f.Add("GET", "", strings.Replace(signed(genuine), "money=12.30", "money=12.30&money=0.01", 1))
	f.Add("GET", "", signed(url.Values{"pid": {epay.DefaultPID}, "out_trade_no": {"x"}, "money": {"1"}, "trade_status": {"WAIT"}}))
	f.Add("GET", "", "%zz=%&sign=&sign_type=RSA")
	f.Add("GET", "", "pid=1001&sign=00000000000000000000000000000000")
	f.Add("POST", "", strings.Repeat("a=b&", 2000))
	f.Add("GET", "", "")

	p := plugintest.Load(f, "gateway/epay.lua", plugin.Options{})
	config := map[string]any{"api_url": "http://127.0.0.1:1/", "pid": epay.DefaultPID, "key": epay.DefaultKey}
	f.Fuzz(func(t *testing.T, method, contentType, payload string) {
		v, valid := formCallbackVerdict(t, p, config, method, contentType, payload)
		if !valid {
			return
		}
		// Found valid: the signature must really be the merchant's.
		params, err := url.ParseQuery(payload)
		if err != nil {
			t.Fatalf("valid, but the payload is not a query string Go can read: %q (%v)", payload, err)
		}
		requireSingleValues(t, params, payload)
		if got, want := strings.ToLower(params.Get("sign")), epay.Sign(params, epay.DefaultKey); got != want {
			t.Fatalf("valid without the merchant's signature: %q", payload)
		}
		if v.PaymentID != params.Get("out_trade_no") || v.Amount != params.Get("money") || v.GatewayPaymentID != params.Get("trade_no") {
			t.Fatalf("reports %+v for signed parameters %v", v, params)
		}
		if v.Status == "success" && params.Get("trade_status") != "TRADE_SUCCESS" {
			t.Fatalf("success for trade_status %q", params.Get("trade_status"))
		}
		if _, err := money.Parse(v.Amount); err != nil && v.Status == "success" {
			t.Logf("a signed success with an unreadable amount %q: the service refuses it (InvalidArgument)", v.Amount)
		}
	})
}

// FuzzAlipayParseCallback feeds arbitrary notifications to the shipped
// alipay.lua's parse_callback. The answer is always a well-formed verdict
// (or a plugin error, never a panic), and a notification is only found
// valid when Alipay's RSA2 signature covers exactly what it reports —
// checked here independently with Go's crypto/rsa (the fake gateway's
// code) — for the configured app and merchant.
func FuzzAlipayParseCallback(f *testing.F) {
	alipayKeys(f)
	genuine := alipayNotify(f, alipayKey, nil)
	f.Add("POST", "application/x-www-form-urlencoded; charset=utf-8", genuine.Encode())
	f.Add("POST", "", genuine.Encode()+"&extra=")
	f.Add("GET", "", genuine.Encode())
	f.Add("POST", "application/json", genuine.Encode())
	tampered, _ := url.ParseQuery(genuine.Encode())
	tampered.Set("total_amount", "0.01")
	f.Add("POST", "", tampered.Encode())
	f.Add("POST", "", strings.Replace(genuine.Encode(), "total_amount=12.30", "total_amount=12.30&total_amount=0.01", 1))
	f.Add("POST", "", alipayNotify(f, alipayKey, func(v url.Values) { v.Set("app_id", "2021000000000002") }).Encode())
	f.Add("POST", "", alipayNotify(f, alipayKey, func(v url.Values) { v.Set("trade_status", "TRADE_CLOSED") }).Encode())
	f.Add("POST", "", alipayNotify(f, strangerKey, nil).Encode())
	f.Add("POST", "", "%zz=%&sign=&sign_type=RSA")
	f.Add("POST", "", "sign=AAAA&sign_type=RSA2&app_id="+alipay.DefaultAppID)
	f.Add("POST", "", strings.Repeat("a=b&", 2000))
	f.Add("POST", "", "")

	p := plugintest.Load(f, "gateway/alipay.lua", plugin.Options{})
	config := alipayConfig(f, "http://127.0.0.1:1/gateway.do")
	f.Fuzz(func(t *testing.T, method, contentType, payload string) {
		v, valid := formCallbackVerdict(t, p, config, method, contentType, payload)
		if !valid {
			return
		}
		// Found valid: Go's reading of the form must carry Alipay's
		// signature. Pairs Go cannot read (a ";" in a name) are left out by
		// it; the script signs them unless empty, so they cannot help a
		// forgery.
		params, _ := url.ParseQuery(payload)
		requireSingleValues(t, params, payload)
		if method != "POST" || params.Get("sign_type") != "RSA2" {
			t.Fatalf("valid as %s with sign_type %q", method, params.Get("sign_type"))
		}
		if !alipay.VerifyText(&alipayKey.PublicKey, alipay.SigningString(params, true), params.Get("sign")) {
			t.Fatalf("valid without Alipay's signature: %q", payload)
		}
		if params.Get("app_id") != alipay.DefaultAppID || params.Get("seller_id") != alipay.DefaultSellerID {
			t.Fatalf("valid for app %q of seller %q", params.Get("app_id"), params.Get("seller_id"))
		}
		if strings.ReplaceAll(v.PaymentID, "-", "") != params.Get("out_trade_no") || v.Amount != params.Get("total_amount") ||
			v.GatewayPaymentID != params.Get("trade_no") {
			t.Fatalf("reports %+v for signed parameters %v", v, params)
		}
		ts := params.Get("trade_status")
		if v.Status == "success" && ts != "TRADE_SUCCESS" && ts != "TRADE_FINISHED" {
			t.Fatalf("success for trade_status %q", ts)
		}
		if v.Ack != "success" {
			t.Fatalf("ack %q", v.Ack)
		}
	})
}

// callbackVerdict is parse_callback's answer, the fields the service reads.
type callbackVerdict struct {
	Valid            bool   `json:"valid"`
	Reason           string `json:"reason"`
	PaymentID        string `json:"payment_id"`
	Amount           string `json:"amount"`
	Status           string `json:"status"`
	GatewayPaymentID string `json:"gateway_payment_id"`
	Ack              string `json:"ack"`
}

// formCallbackVerdict calls parse_callback of a form-posting gateway
// (epay, Alipay) with an arbitrary notification and checks what every
// answer must be: a plugin error (never a panic nor another failure), or a
// well-formed verdict that says why when it refuses. valid is whether the
// plugin found the notification genuine; the caller then checks that it
// really is.
func formCallbackVerdict(t *testing.T, p *plugin.Plugin, config map[string]any, method, contentType, payload string) (v callbackVerdict, valid bool) {
	t.Helper()
	out, err := plugintest.CallErr(p, "parse_callback", config, map[string]any{
		"method": method, "content_type": contentType, "payload": payload,
	})
	if err != nil {
		var ce *plugin.CallError
		if !errors.As(err, &ce) {
			t.Fatalf("not a plugin error: %v", err)
		}
		return v, false
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("parse_callback answered %q: %v", out, err)
	}
	if !v.Valid && v.Reason == "" {
		t.Fatalf("refused without a reason: %s", out)
	}
	return v, v.Valid
}

// requireSingleValues fails a notification found valid with a repeated
// parameter (which value the signature covered would be a guess). An
// empty name is no parameter: PHP drops it, so does parse_query.
func requireSingleValues(t *testing.T, params url.Values, payload string) {
	t.Helper()
	delete(params, "")
	for k, vals := range params {
		if len(vals) > 1 {
			t.Fatalf("valid with parameter %q repeated: %q", k, payload)
		}
	}
}
