package plugintest_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The cost of verifying one epay notification in the plugin (the Lua half
// of a HandleCallback): the signed query string parsed, decoded, sorted,
// MD5-signed and compared, JSON in and out.
func BenchmarkEpayParseCallback(b *testing.B) {
	p := loadEpay(b)
	const signing = "money=12.30&name=VPS&out_trade_no=7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f&pid=1001" +
		"&trade_no=2026010112000000001&trade_status=TRADE_SUCCESS&type=alipay"
	payload := "pid=1001&trade_no=2026010112000000001&out_trade_no=7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f&type=alipay" +
		"&name=VPS&money=12.30&trade_status=TRADE_SUCCESS&sign=" + md5hex(signing+"k3y") + "&sign_type=MD5"
	cfg, err := json.Marshal(epayConfig("https://pay.example.com"))
	require.NoError(b, err)
	in, err := json.Marshal(map[string]any{"method": "GET", "content_type": "", "payload": payload})
	require.NoError(b, err)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		out, err := p.Call(ctx, "parse_callback", string(cfg), string(in))
		if err != nil || len(out) < 20 {
			b.Fatal(err, out)
		}
	}
}

// The same for an Alipay notification: the form parsed and decoded, the
// sorted signing string built, and one RSA-2048 verification (the key is
// parsed once and kept by the runtime).
func BenchmarkAlipayParseCallback(b *testing.B) {
	p := loadAlipay(b)
	cfg, err := json.Marshal(alipayConfig(b, "https://openapi.alipay.com/gateway.do"))
	require.NoError(b, err)
	in, err := json.Marshal(map[string]any{
		"method": "POST", "content_type": "application/x-www-form-urlencoded; charset=utf-8",
		"payload": alipayNotify(b, alipayKey, nil).Encode(),
	})
	require.NoError(b, err)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		out, err := p.Call(ctx, "parse_callback", string(cfg), string(in))
		if err != nil || !strings.Contains(out, `"valid":true`) {
			b.Fatal(err, out)
		}
	}
}

// The same for Stripe: a checkout.session.completed event (about 700
// bytes) whose Stripe-Signature is parsed, HMAC-SHA256 computed over
// "t.payload" and compared in constant time, the timestamp checked
// against the service clock, the event decoded and the amount converted
// from minor units, JSON in and out.
func BenchmarkStripeParseCallback(b *testing.B) {
	p := loadStripe(b)
	payload := event("checkout.session.completed", "paid", 1230, "usd", "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f")
	cfg, err := json.Marshal(stripeConfig("https://api.stripe.com"))
	require.NoError(b, err)
	in, err := json.Marshal(callbackInput(payload, signed(payload, whsec, stripeNow)))
	require.NoError(b, err)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		out, err := p.Call(ctx, "parse_callback", string(cfg), string(in))
		if err != nil || !strings.Contains(out, `"valid":true`) {
			b.Fatal(err, out)
		}
	}
}
