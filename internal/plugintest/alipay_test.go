package plugintest_test

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/fakes/alipay"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
)

// Keys are made once for the package: RSA generation is slow on a shared
// machine. alipayKey plays Alipay's (the fake's), appKey the merchant
// app's, strangerKey anybody else's.
var (
	alipayKeysOnce                 sync.Once
	alipayKey, appKey, strangerKey *rsa.PrivateKey
)

func alipayKeys(t testing.TB) {
	t.Helper()
	alipayKeysOnce.Do(func() {
		var err error
		alipayKey, err = alipay.GenerateKey()
		require.NoError(t, err)
		appKey, err = alipay.GenerateKey()
		require.NoError(t, err)
		strangerKey, err = alipay.GenerateKey()
		require.NoError(t, err)
	})
}

func loadAlipay(t testing.TB) *plugin.Plugin {
	t.Helper()
	return plugintest.Load(t, "gateway/alipay.lua", plugin.Options{})
}

// alipayConfig is a gateway interface's configuration for the default app
// at gatewayURL.
func alipayConfig(t testing.TB, gatewayURL string) map[string]any {
	t.Helper()
	alipayKeys(t)
	return map[string]any{
		"gateway_url":       gatewayURL,
		"app_id":            alipay.DefaultAppID,
		"seller_id":         alipay.DefaultSellerID,
		"app_private_key":   alipay.PrivateKeyPEM(appKey),
		"alipay_public_key": alipay.PublicKeyPEM(&alipayKey.PublicKey),
	}
}

func startAlipay(t *testing.T, opts alipay.Options) *alipay.Server {
	t.Helper()
	alipayKeys(t)
	opts.Key = alipayKey
	if opts.Apps == nil {
		opts.Apps = []alipay.App{{AppID: alipay.DefaultAppID, SellerID: alipay.DefaultSellerID, PublicKey: &appKey.PublicKey}}
	}
	if opts.NotifyScale == 0 {
		opts.NotifyScale = 1e-9
	}
	s, err := alipay.New(opts)
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(s.Close)
	return s
}

const alipayPaymentID = "0b8d2c0e-5f7a-4d3e-9a51-2f4a7c9e1b01"

func alipayCreateInput(notifyURL string) map[string]any {
	return map[string]any{
		"payment_id": alipayPaymentID,
		"order_id":   "ord-7",
		"amount":     "12.30",
		"currency":   "CNY",
		"subject":    "VPS 1个月 / 2 vCPU",
		"notify_url": notifyURL,
		"return_url": "https://shop.example/done",
		"client_ip":  "192.0.2.7",
	}
}

func TestAlipayInfoAndSchema(t *testing.T) {
	t.Parallel()
	p := loadAlipay(t)
	info := plugintest.Call(t, p, "info", nil, nil)
	require.Equal(t, true, info["supports_query"])
	require.Equal(t, true, info["supports_refund"])
	require.Equal(t, []any{"CNY"}, info["currencies"])
	schema := plugintest.Call(t, p, "config_schema", nil, nil)
	props := schema["properties"].(map[string]any)
	require.Equal(t, true, props["app_private_key"].(map[string]any)["x-secret"])
	require.NotContains(t, props["alipay_public_key"], "x-secret", "a public key is no secret")
	require.Equal(t, "boolean", props["qr_mode"].(map[string]any)["type"])
	require.Equal(t, "https://openapi.alipay.com/gateway.do", props["gateway_url"].(map[string]any)["default"])
	require.ElementsMatch(t, []any{"app_id", "seller_id", "app_private_key", "alipay_public_key"}, schema["required"])
}

// The page.pay link is the signed request itself. Its signature is checked
// here with Go's crypto/rsa, apart from the fake, and the fake takes it.
func TestAlipayPagePayLinkIsASignedRequestTheGatewayTakes(t *testing.T) {
	t.Parallel()
	fake := startAlipay(t, alipay.Options{})
	p := loadAlipay(t)
	res := plugintest.Call(t, p, "create_payment", alipayConfig(t, fake.GatewayURL()), alipayCreateInput("https://billing.example/callbacks/gw-1"))
	require.Equal(t, "", res["gateway_payment_id"], "Alipay names the trade when the cashier opens")
	link := res["payment_url"].(string)
	require.True(t, strings.HasPrefix(link, fake.GatewayURL()+"?"), link)

	u, err := url.Parse(link)
	require.NoError(t, err)
	q := u.Query()
	require.Equal(t, "alipay.trade.page.pay", q.Get("method"))
	require.Equal(t, alipay.DefaultAppID, q.Get("app_id"))
	require.Equal(t, "RSA2", q.Get("sign_type"))
	require.Equal(t, "utf-8", q.Get("charset"))
	require.Equal(t, "1.0", q.Get("version"))
	require.Equal(t, "https://billing.example/callbacks/gw-1", q.Get("notify_url"))
	require.Equal(t, "https://shop.example/done", q.Get("return_url"))
	ts, err := time.ParseInLocation(time.DateTime, q.Get("timestamp"), time.FixedZone("CST", 8*3600))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), ts, time.Minute, "the timestamp is Beijing time")
	var biz map[string]string
	require.NoError(t, json.Unmarshal([]byte(q.Get("biz_content")), &biz))
	require.Equal(t, map[string]string{
		"out_trade_no": "0b8d2c0e5f7a4d3e9a512f4a7c9e1b01",
		"total_amount": "12.30",
		"subject":      "VPS 1个月   2 vCPU",
		"product_code": "FAST_INSTANT_TRADE_PAY",
	}, biz)
	require.True(t, alipay.VerifyText(&appKey.PublicKey, alipay.SigningString(q, false), q.Get("sign")),
		"the plugin's RSA2 verifies with Go's crypto/rsa")
	// RSA PKCS #1 v1.5 is deterministic: OpenSSL's signature of the signing
	// string written out by hand is the plugin's, byte for byte.
	signing := "app_id=2021000000000001&biz_content=" + q.Get("biz_content") +
		"&charset=utf-8&format=JSON&method=alipay.trade.page.pay&notify_url=https://billing.example/callbacks/gw-1" +
		"&return_url=https://shop.example/done&sign_type=RSA2&timestamp=" + q.Get("timestamp") + "&version=1.0"
	require.Equal(t, opensslSign(t, appKey, signing), q.Get("sign"))

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Get(link)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	tr, ok := fake.Trade("0b8d2c0e5f7a4d3e9a512f4a7c9e1b01")
	require.True(t, ok)
	require.Equal(t, "12.30", tr.TotalAmount)
}

// alipayNotify is a notify's parameters as Alipay sends them, signed with
// key (over everything but sign and sign_type).
func alipayNotify(t testing.TB, key *rsa.PrivateKey, edit func(url.Values)) url.Values {
	t.Helper()
	v := url.Values{
		"notify_time": {"2026-11-25 20:00:05"}, "notify_type": {"trade_status_sync"}, "notify_id": {"2026112500222200005000000001"},
		"charset": {"utf-8"}, "version": {"1.0"}, "app_id": {alipay.DefaultAppID}, "auth_app_id": {alipay.DefaultAppID},
		"seller_id": {alipay.DefaultSellerID}, "trade_no": {"2026112522001000000000000001"},
		"out_trade_no": {"0b8d2c0e5f7a4d3e9a512f4a7c9e1b01"}, "trade_status": {"TRADE_SUCCESS"},
		"total_amount": {"12.30"}, "subject": {"VPS 1个月"}, "gmt_payment": {"2026-11-25 20:00:04"},
		"fund_bill_list": {`[{"amount":"12.30","fundChannel":"ALIPAYACCOUNT"}]`},
	}
	if edit != nil {
		edit(v)
	}
	require.NoError(t, alipay.Sign(key, v, true))
	return v
}

// opensslSign is `openssl dgst -sha256 -sign` of text with key, base64.
func opensslSign(t *testing.T, key *rsa.PrivateKey, text string) string {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	dir := t.TempDir()
	keyFile, msgFile := filepath.Join(dir, "key.pem"), filepath.Join(dir, "msg")
	require.NoError(t, os.WriteFile(keyFile, []byte(alipay.PrivateKeyPEM(key)), 0o600))
	require.NoError(t, os.WriteFile(msgFile, []byte(text), 0o600))
	sig, err := exec.Command("openssl", "dgst", "-sha256", "-sign", keyFile, msgFile).Output()
	require.NoError(t, err)
	require.Len(t, sig, key.Size())
	return base64.StdEncoding.EncodeToString(sig)
}

// A notify signed by OpenSSL (a third RSA implementation) over a signing
// string written out by hand, with the Alipay public key configured as the
// bare base64 the Alipay console shows.
func TestAlipayParseCallbackVerifiesAnOpenSSLSignature(t *testing.T) {
	t.Parallel()
	alipayKeys(t)
	const signing = "app_id=2021000000000001&charset=utf-8&notify_type=trade_status_sync" +
		"&out_trade_no=0b8d2c0e5f7a4d3e9a512f4a7c9e1b01&seller_id=2088000000000001&subject=VPS 1个月" +
		"&total_amount=12.30&trade_no=2026112522001000000000000001&trade_status=TRADE_SUCCESS"
	sig := opensslSign(t, alipayKey, signing)

	payload := "gmt_create=&charset=utf-8&seller_id=2088000000000001&subject=VPS+1%E4%B8%AA%E6%9C%88" +
		"&sign=" + url.QueryEscape(sig) +
		"&notify_type=trade_status_sync&trade_no=2026112522001000000000000001&app_id=2021000000000001" +
		"&out_trade_no=0b8d2c0e5f7a4d3e9a512f4a7c9e1b01&total_amount=12.30&trade_status=TRADE_SUCCESS&sign_type=RSA2"
	der, err := x509.MarshalPKIXPublicKey(&alipayKey.PublicKey)
	require.NoError(t, err)
	cfg := alipayConfig(t, "https://openapi.alipay.com/gateway.do")
	cfg["alipay_public_key"] = base64.StdEncoding.EncodeToString(der)

	p := loadAlipay(t)
	res := plugintest.Call(t, p, "parse_callback", cfg, map[string]any{
		"method": "POST", "content_type": "application/x-www-form-urlencoded; charset=utf-8", "payload": payload,
	})
	require.Equal(t, map[string]any{
		"valid":              true,
		"reason":             "",
		"payment_id":         alipayPaymentID,
		"amount":             "12.30",
		"status":             "success",
		"gateway_payment_id": "2026112522001000000000000001",
		"gateway_tx_id":      "2026112522001000000000000001",
		"ack":                "success",
	}, res)

	tampered := strings.Replace(payload, "total_amount=12.30", "total_amount=0.01", 1)
	res = plugintest.Call(t, p, "parse_callback", cfg, map[string]any{"method": "POST", "payload": tampered})
	require.Equal(t, false, res["valid"])
	require.Equal(t, "bad signature", res["reason"])
}

func TestAlipayParseCallbackOutcomes(t *testing.T) {
	t.Parallel()
	p := loadAlipay(t)
	cfg := alipayConfig(t, "https://openapi.alipay.com/gateway.do")
	parse := func(method, payload string) map[string]any {
		return plugintest.Call(t, p, "parse_callback", cfg, map[string]any{
			"method": method, "content_type": "application/x-www-form-urlencoded; charset=utf-8", "payload": payload,
		})
	}
	refused := func(t *testing.T, payload, reason string) {
		t.Helper()
		res := parse("POST", payload)
		require.Equal(t, false, res["valid"], payload)
		require.Contains(t, res["reason"], reason)
		require.NotContains(t, res, "ack")
		require.NotContains(t, res, "payment_id")
	}

	t.Run("a genuine notify is valid", func(t *testing.T) {
		res := parse("POST", alipayNotify(t, alipayKey, nil).Encode())
		require.Equal(t, true, res["valid"], res["reason"])
		require.Equal(t, alipayPaymentID, res["payment_id"])
		require.Equal(t, "success", res["ack"])
	})
	t.Run("TRADE_FINISHED is a success too", func(t *testing.T) {
		res := parse("POST", alipayNotify(t, alipayKey, func(v url.Values) { v.Set("trade_status", "TRADE_FINISHED") }).Encode())
		require.Equal(t, "success", res["status"])
	})
	t.Run("WAIT_BUYER_PAY is pending, TRADE_CLOSED failed, both acknowledged", func(t *testing.T) {
		res := parse("POST", alipayNotify(t, alipayKey, func(v url.Values) { v.Set("trade_status", "WAIT_BUYER_PAY") }).Encode())
		require.Equal(t, "pending", res["status"])
		require.Equal(t, "success", res["ack"])
		res = parse("POST", alipayNotify(t, alipayKey, func(v url.Values) { v.Set("trade_status", "TRADE_CLOSED") }).Encode())
		require.Equal(t, "failed", res["status"])
	})
	t.Run("a tampered amount fails the signature", func(t *testing.T) {
		v := alipayNotify(t, alipayKey, nil)
		v.Set("total_amount", "0.01")
		refused(t, v.Encode(), "bad signature")
	})
	t.Run("a notify signed by someone else fails", func(t *testing.T) {
		refused(t, alipayNotify(t, strangerKey, nil).Encode(), "bad signature")
		refused(t, alipayNotify(t, appKey, nil).Encode(), "bad signature")
	})
	t.Run("sign_type inside the signed text is not Alipay's signature", func(t *testing.T) {
		v := alipayNotify(t, alipayKey, nil)
		require.NoError(t, alipay.Sign(alipayKey, v, false))
		refused(t, v.Encode(), "bad signature")
	})
	t.Run("another app is refused, however well signed", func(t *testing.T) {
		refused(t, alipayNotify(t, alipayKey, func(v url.Values) { v.Set("app_id", "2021000000000002") }).Encode(), "app_id")
	})
	t.Run("another merchant is refused, however well signed", func(t *testing.T) {
		refused(t, alipayNotify(t, alipayKey, func(v url.Values) { v.Set("seller_id", "2088000000000002") }).Encode(), "seller_id")
	})
	t.Run("RSA (SHA1) is refused", func(t *testing.T) {
		refused(t, strings.Replace(alipayNotify(t, alipayKey, nil).Encode(), "sign_type=RSA2", "sign_type=RSA", 1), "sign_type")
	})
	t.Run("a missing signature is refused", func(t *testing.T) {
		v := alipayNotify(t, alipayKey, nil)
		v.Del("sign")
		refused(t, v.Encode(), "missing sign")
	})
	t.Run("a repeated parameter is refused", func(t *testing.T) {
		refused(t, alipayNotify(t, alipayKey, nil).Encode()+"&total_%61mount=0.01", "repeated")
	})
	t.Run("a GET is refused", func(t *testing.T) {
		res := parse("GET", alipayNotify(t, alipayKey, nil).Encode())
		require.Equal(t, false, res["valid"])
	})
	t.Run("another charset is refused", func(t *testing.T) {
		refused(t, alipayNotify(t, alipayKey, func(v url.Values) { v.Set("charset", "gbk") }).Encode(), "charset")
	})
	t.Run("garbage is invalid, not an error", func(t *testing.T) {
		for _, payload := range []string{"", "%%%", "sign=%zz&app_id=1", "just text", "sign=AAAA&sign_type=RSA2&app_id=2021000000000001"} {
			res := parse("POST", payload)
			require.Equal(t, false, res["valid"], payload)
		}
	})
	t.Run("an interface without keys verifies nothing", func(t *testing.T) {
		bad := alipayConfig(t, "https://openapi.alipay.com/gateway.do")
		bad["alipay_public_key"] = ""
		res := plugintest.Call(t, p, "parse_callback", bad, map[string]any{"method": "POST", "payload": alipayNotify(t, alipayKey, nil).Encode()})
		require.Equal(t, false, res["valid"])
	})
}

// --- against the fake gateway ----------------------------------------------

func TestAlipayCreatePayNotifyFlowIsVerifiedAndAcknowledged(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"page", "qr"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			fake := startAlipay(t, alipay.Options{})
			p := loadAlipay(t)
			cfg := alipayConfig(t, fake.GatewayURL())
			cfg["qr_mode"] = mode == "qr"
			recv := newCallbackReceiver(t, p, cfg)

			in := alipayCreateInput(recv.srv.URL + "/callbacks/gw-1")
			in["return_url"] = recv.srv.URL + "/done"
			created := plugintest.Call(t, p, "create_payment", cfg, in)
			client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			t.Cleanup(client.CloseIdleConnections)
			if mode == "page" {
				require.Empty(t, created["qr_code"])
				resp, err := client.Get(created["payment_url"].(string))
				require.NoError(t, err)
				resp.Body.Close()
				require.Equal(t, http.StatusSeeOther, resp.StatusCode)
			} else {
				require.Empty(t, created["payment_url"])
				require.True(t, strings.HasPrefix(created["qr_code"].(string), fake.URL()+"/cashier?"), created["qr_code"])
			}
			tr, ok := fake.Trade("0b8d2c0e5f7a4d3e9a512f4a7c9e1b01")
			require.True(t, ok)

			// The buyer presses Pay in the cashier.
			resp, err := client.PostForm(fake.URL()+"/cashier/pay", url.Values{"trade_no": {tr.TradeNo}})
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusSeeOther, resp.StatusCode)

			require.Eventually(t, func() bool {
				ns := fake.Notifications()
				return len(ns) == 1 && ns[0].Acked
			}, 5*time.Second, 5*time.Millisecond)
			seen := recv.seen()
			require.Len(t, seen, 1)
			require.Equal(t, true, seen[0]["valid"], seen[0]["reason"])
			require.Equal(t, "success", seen[0]["status"])
			require.Equal(t, alipayPaymentID, seen[0]["payment_id"])
			require.Equal(t, "12.30", seen[0]["amount"])
			require.Equal(t, tr.TradeNo, seen[0]["gateway_payment_id"])
		})
	}
}

func TestAlipayNotifyOfAnotherAppIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	alipayKeys(t)
	// The fake knows two apps of two merchants; our interface is the first.
	// Alipay's notify for the second (well signed) is refused, and retried.
	fake := startAlipay(t, alipay.Options{
		Apps: []alipay.App{
			{AppID: alipay.DefaultAppID, SellerID: alipay.DefaultSellerID, PublicKey: &appKey.PublicKey},
			{AppID: "2021000000000002", SellerID: "2088000000000002", PublicKey: &strangerKey.PublicKey},
		},
		NotifySchedule: []time.Duration{0, time.Millisecond, time.Millisecond},
		NotifyScale:    1,
	})
	p := loadAlipay(t)
	recv := newCallbackReceiver(t, p, alipayConfig(t, fake.GatewayURL()))
	foreign := alipayConfig(t, fake.GatewayURL())
	foreign["app_id"], foreign["seller_id"], foreign["app_private_key"] = "2021000000000002", "2088000000000002", alipay.PrivateKeyPEM(strangerKey)
	foreign["qr_mode"] = true
	plugintest.Call(t, p, "create_payment", foreign, alipayCreateInput(recv.srv.URL+"/callbacks/gw-1"))
	require.NoError(t, fake.Pay("0b8d2c0e5f7a4d3e9a512f4a7c9e1b01"))
	require.Eventually(t, func() bool { return len(fake.Notifications()) == 3 }, 5*time.Second, time.Millisecond)
	for _, n := range fake.Notifications() {
		require.False(t, n.Acked)
		require.Equal(t, http.StatusBadRequest, n.Status)
	}
	for _, r := range recv.seen() {
		require.Equal(t, false, r["valid"])
		require.Contains(t, r["reason"], "app_id")
	}
}

func TestAlipayQueryPaymentThroughTheTradesLife(t *testing.T) {
	t.Parallel()
	fake := startAlipay(t, alipay.Options{})
	fake.DropNotify(true)
	p := loadAlipay(t)
	cfg := alipayConfig(t, fake.GatewayURL())
	query := func() map[string]any {
		return plugintest.Call(t, p, "query_payment", cfg, map[string]any{"payment_id": alipayPaymentID, "amount": "12.30", "currency": "CNY"})
	}
	created := plugintest.Call(t, p, "create_payment", cfg, alipayCreateInput("http://127.0.0.1:9/cb"))

	q := query()
	require.Equal(t, "pending", q["status"], "the cashier was never opened: Alipay has no trade")
	require.Equal(t, "", q["gateway_payment_id"])

	resp, err := http.Get(created["payment_url"].(string))
	require.NoError(t, err)
	resp.Body.Close()
	tr, _ := fake.Trade("0b8d2c0e5f7a4d3e9a512f4a7c9e1b01")
	q = query()
	require.Equal(t, "pending", q["status"])
	require.Equal(t, tr.TradeNo, q["gateway_payment_id"])

	require.NoError(t, fake.Pay(tr.TradeNo))
	q = query()
	require.Equal(t, "success", q["status"])
	require.Equal(t, "12.30", q["amount"])
	require.Equal(t, tr.TradeNo, q["gateway_tx_id"])
	paid, err := time.Parse(time.RFC3339, q["paid_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), paid, time.Minute)

	r := plugintest.Call(t, p, "refund", cfg, map[string]any{"payment_id": alipayPaymentID, "refund_id": "5e0c1c3e-8a7d-4f51-9d1e-2a3b4c5d6e70",
		"amount": "12.30", "payment_amount": "12.30", "currency": "CNY"})
	require.Equal(t, "succeeded", r["status"])
	q = query()
	require.Equal(t, "success", q["status"], "refunded in full the trade is closed, but it was paid")
}

func TestAlipayRefundIsPaidOncePerRefundID(t *testing.T) {
	t.Parallel()
	fake := startAlipay(t, alipay.Options{})
	fake.DropNotify(true)
	p := loadAlipay(t)
	cfg := alipayConfig(t, fake.GatewayURL())
	cfg["qr_mode"] = true
	plugintest.Call(t, p, "create_payment", cfg, alipayCreateInput("http://127.0.0.1:9/cb"))
	refund := func(id, amount string) map[string]any {
		return plugintest.Call(t, p, "refund", cfg, map[string]any{
			"payment_id": alipayPaymentID, "refund_id": id, "amount": amount, "payment_amount": "12.30", "currency": "CNY", "reason": "客户要求 / test",
		})
	}
	const first, second = "11111111-2222-4333-8444-555555555555", "11111111-2222-4333-8444-666666666666"

	res := refund(first, "2.30")
	require.Equal(t, "failed", res["status"], "nothing to refund before the buyer paid")
	require.Contains(t, res["message"], "ACQ.TRADE_STATUS_ERROR")

	require.NoError(t, fake.Pay("0b8d2c0e5f7a4d3e9a512f4a7c9e1b01"))
	res = refund(first, "2.30")
	require.Equal(t, "succeeded", res["status"], res["message"])
	require.Equal(t, "11111111222243338444555555555555", res["gateway_refund_id"], "the out_request_no")
	// The same refund again (a resend after a lost answer): Alipay answers
	// fund_change N, the refund query confirms it, and nothing is paid twice.
	res = refund(first, "2.30")
	require.Equal(t, "succeeded", res["status"], res["message"])
	require.Contains(t, res["message"], "confirmed")
	require.Len(t, fake.Refunds(), 1)

	res = refund(second, "10.01")
	require.Equal(t, "failed", res["status"])
	require.Contains(t, res["message"], "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL")
	res = refund(second, "10.00")
	require.Equal(t, "succeeded", res["status"])
	refunds := fake.Refunds()
	require.Len(t, refunds, 2)
	require.Equal(t, "11111111222243338444555555555555", refunds[0].OutRequestNo)
	require.Equal(t, "10.00", refunds[1].Amount)
	tr, _ := fake.Trade("0b8d2c0e5f7a4d3e9a512f4a7c9e1b01")
	require.Equal(t, "12.30", tr.Refunded)
	require.Equal(t, alipay.TradeClosed, tr.Status)
}

func TestAlipayRefusesAnyCurrencyButCNYWithoutCallingOut(t *testing.T) {
	t.Parallel()
	fake := startAlipay(t, alipay.Options{})
	p := loadAlipay(t)
	cfg := alipayConfig(t, fake.GatewayURL())
	cfg["qr_mode"] = true
	in := alipayCreateInput("http://127.0.0.1:9/cb")
	in["currency"] = "USD"
	_, err := plugintest.CallErr(p, "create_payment", cfg, in)
	require.ErrorContains(t, err, "alipay takes CNY only")
	r := plugintest.Call(t, p, "refund", cfg, map[string]any{"payment_id": alipayPaymentID, "refund_id": "r", "amount": "1.00", "currency": "USD"})
	require.Equal(t, "failed", r["status"])
	require.Empty(t, fake.Requests())
}

// An answer is believed only with Alipay's signature over it.
func TestAlipayAnswerNotSignedByAlipayIsNotBelieved(t *testing.T) {
	t.Parallel()
	alipayKeys(t)
	signer := strangerKey
	var mu sync.Mutex
	forged := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		node := strings.ReplaceAll(r.Form.Get("method"), ".", "_") + "_response"
		body := `{"code":"10000","msg":"Success","trade_no":"2026X","out_trade_no":"0b8d2c0e5f7a4d3e9a512f4a7c9e1b01","trade_status":"TRADE_SUCCESS","total_amount":"12.30","fund_change":"Y","refund_fee":"1.00"}`
		mu.Lock()
		sig, err := alipay.SignText(signer, body)
		mu.Unlock()
		if !assert.NoError(t, err) { // not require: this is the server's goroutine
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, `{"`+node+`":`+body+`,"sign":"`+sig+`"}`)
	}))
	t.Cleanup(forged.Close)
	p := loadAlipay(t)
	cfg := alipayConfig(t, forged.URL+"/gateway.do")

	_, err := plugintest.CallErr(p, "query_payment", cfg, map[string]any{"payment_id": alipayPaymentID})
	require.ErrorContains(t, err, "does not verify")
	r := plugintest.Call(t, p, "refund", cfg, map[string]any{"payment_id": alipayPaymentID, "refund_id": "r1", "amount": "1.00", "currency": "CNY"})
	require.Equal(t, "unknown", r["status"], "a forged answer proves nothing either way")
	tc := plugintest.Call(t, p, "test_config", cfg, nil)
	require.Equal(t, false, tc["ok"])
	require.Contains(t, tc["message"], "Alipay public key")

	// Alipay's own signature over the same answer is believed.
	mu.Lock()
	signer = alipayKey
	mu.Unlock()
	q := plugintest.Call(t, p, "query_payment", cfg, map[string]any{"payment_id": alipayPaymentID})
	require.Equal(t, "success", q["status"])

	// Alipay's own answer about another trade (replayed) is not believed
	// for this one: the signature names no request.
	const other = "7d0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"
	_, err = plugintest.CallErr(p, "query_payment", cfg, map[string]any{"payment_id": other})
	require.ErrorContains(t, err, "the answer is about trade 0b8d2c0e5f7a4d3e9a512f4a7c9e1b01")
	r = plugintest.Call(t, p, "refund", cfg, map[string]any{"payment_id": other, "refund_id": "r2", "amount": "1.00", "currency": "CNY"})
	require.Equal(t, "unknown", r["status"])
}

func TestAlipayTestConfig(t *testing.T) {
	t.Parallel()
	fake := startAlipay(t, alipay.Options{})
	var logs bytes.Buffer // calls run one at a time, on this goroutine
	p := plugintest.Load(t, "gateway/alipay.lua", plugin.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	res := plugintest.Call(t, p, "test_config", alipayConfig(t, fake.GatewayURL()), nil)
	require.Equal(t, true, res["ok"], res["message"])

	// Alipay's reason goes to the log, not to whoever asked for the test.
	bad := alipayConfig(t, fake.GatewayURL())
	bad["app_private_key"] = alipay.PrivateKeyPEM(strangerKey)
	res = plugintest.Call(t, p, "test_config", bad, nil)
	require.Equal(t, false, res["ok"])
	require.Equal(t, "Alipay refused the app (its reason is in the service log)", res["message"])
	require.Contains(t, logs.String(), "isv.invalid-signature")

	bad = alipayConfig(t, fake.GatewayURL())
	bad["alipay_public_key"] = alipay.PublicKeyPEM(&strangerKey.PublicKey)
	res = plugintest.Call(t, p, "test_config", bad, nil)
	require.Equal(t, false, res["ok"])
	require.Contains(t, res["message"], "Alipay public key")

	bad = alipayConfig(t, fake.GatewayURL())
	bad["app_private_key"] = "not a key"
	res = plugintest.Call(t, p, "test_config", bad, nil)
	require.Equal(t, false, res["ok"])
	require.Contains(t, res["message"], "keys cannot be used")

	// Keys pasted into one-line form fields lose their line breaks.
	oneLine := alipayConfig(t, fake.GatewayURL())
	oneLine["app_private_key"] = strings.ReplaceAll(oneLine["app_private_key"].(string), "\n", "")
	oneLine["alipay_public_key"] = strings.ReplaceAll(oneLine["alipay_public_key"].(string), "\n", " ")
	res = plugintest.Call(t, p, "test_config", oneLine, nil)
	require.Equal(t, true, res["ok"], res["message"])

	res = plugintest.Call(t, p, "test_config", alipayConfig(t, "http://127.0.0.1:9/gateway.do"), nil)
	require.Equal(t, false, res["ok"])
	require.Contains(t, res["message"], "cannot reach")
}

// A refusal at Alipay's gateway comes unsigned, in the method's node or in
// error_response: reported as a refusal (no money moved), never believed as
// a success.
func TestAlipayUnsignedRefusalsAreRefusalsAndUnsignedSuccessIsNothing(t *testing.T) {
	t.Parallel()
	var answer atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		node := strings.ReplaceAll(r.Form.Get("method"), ".", "_") + "_response"
		_, _ = io.WriteString(w, strings.ReplaceAll(answer.Load().(string), "NODE", node))
	}))
	t.Cleanup(srv.Close)
	p := loadAlipay(t)
	cfg := alipayConfig(t, srv.URL+"/gateway.do")
	refund := func() map[string]any {
		return plugintest.Call(t, p, "refund", cfg, map[string]any{"payment_id": alipayPaymentID, "refund_id": "r1", "amount": "1.00", "currency": "CNY"})
	}
	for _, body := range []string{
		`{"NODE":{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.invalid-signature","sub_msg":"验签出错"}}`,
		`{"error_response":{"code":"40002","msg":"Invalid Arguments","sub_code":"isv.invalid-app-id","sub_msg":"无效的AppID参数"}}`,
	} {
		answer.Store(body)
		tc := plugintest.Call(t, p, "test_config", cfg, nil)
		require.Equal(t, false, tc["ok"])
		require.Equal(t, "Alipay refused the app (its reason is in the service log)", tc["message"])
		r := refund()
		require.Equal(t, "failed", r["status"], body)
		_, err := plugintest.CallErr(p, "query_payment", cfg, map[string]any{"payment_id": alipayPaymentID})
		require.ErrorContains(t, err, "alipay query refused: 40002")
	}
	answer.Store(`{"NODE":{"code":"10000","msg":"Success","out_trade_no":"0b8d2c0e5f7a4d3e9a512f4a7c9e1b01","trade_no":"1","trade_status":"TRADE_SUCCESS","total_amount":"12.30","fund_change":"Y"}}`)
	_, err := plugintest.CallErr(p, "query_payment", cfg, map[string]any{"payment_id": alipayPaymentID})
	require.ErrorContains(t, err, "unsigned success")
	require.Equal(t, "unknown", refund()["status"])
	answer.Store(`{"NODE":{"code":"40004","msg":"Business Failed","sub_code":"ACQ.TRADE_STATUS_ERROR"}}`)
	require.Equal(t, "unknown", refund()["status"], "Alipay signs business refusals: an unsigned one proves nothing")
	answer.Store(`{"NODE":{"code":"20000","msg":"Service Currently Unavailable","sub_code":"aop.ACQ.SYSTEM_ERROR"},"sign":"` + alipaySignFor(t, `{"code":"20000","msg":"Service Currently Unavailable","sub_code":"aop.ACQ.SYSTEM_ERROR"}`) + `"}`)
	require.Equal(t, "unknown", refund()["status"], "20000: Alipay says to ask again")
}

func alipaySignFor(t *testing.T, text string) string {
	t.Helper()
	sig, err := alipay.SignText(alipayKey, text)
	require.NoError(t, err)
	return sig
}
