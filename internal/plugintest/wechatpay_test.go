package plugintest_test

import (
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/fakes/wechatpay"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
)

// WeChat Pay keys, made once: wxKey plays WeChat Pay's, wxMerchantKey the
// merchant's API key; strangerKey (alipay_test.go) anybody else's.
var (
	wxKeysOnce           sync.Once
	wxKey, wxMerchantKey *rsa.PrivateKey
)

func wxKeys(t testing.TB) {
	t.Helper()
	alipayKeys(t)
	wxKeysOnce.Do(func() {
		var err error
		wxKey, err = wechatpay.GenerateKey()
		require.NoError(t, err)
		wxMerchantKey, err = wechatpay.GenerateKey()
		require.NoError(t, err)
	})
}

func startWechatpay(t *testing.T, opts wechatpay.Options) *wechatpay.Server {
	t.Helper()
	wxKeys(t)
	opts.Key = wxKey
	if opts.Merchants == nil {
		opts.Merchants = []wechatpay.Merchant{{MchID: wechatpay.DefaultMchID, AppID: wechatpay.DefaultAppID,
			SerialNo: wechatpay.DefaultSerialNo, PublicKey: &wxMerchantKey.PublicKey, APIv3Key: wechatpay.DefaultAPIv3Key}}
	}
	if opts.NotifyScale == 0 {
		opts.NotifyScale = 1e-9
	}
	s, err := wechatpay.New(opts)
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(s.Close)
	return s
}

func wxConfig(t testing.TB, apiBase string) map[string]any {
	t.Helper()
	wxKeys(t)
	return map[string]any{
		"api_base":             apiBase,
		"mchid":                wechatpay.DefaultMchID,
		"appid":                wechatpay.DefaultAppID,
		"merchant_serial_no":   wechatpay.DefaultSerialNo,
		"merchant_private_key": wechatpay.PrivateKeyPEM(wxMerchantKey),
		"api_v3_key":           wechatpay.DefaultAPIv3Key,
		"wechatpay_public_key": wechatpay.PublicKeyPEM(&wxKey.PublicKey),
		"wechatpay_serial":     wechatpay.DefaultKeySerial,
	}
}

const wxPaymentID = "7c1e2a90-3b4d-4e5f-8a6b-9c0d1e2f3a4b"

func wxOutTradeNo(id string) string { return strings.ReplaceAll(id, "-", "") }

func wxCreateInput() map[string]any {
	return map[string]any{
		"payment_id": wxPaymentID,
		"order_id":   "ord-9",
		"amount":     "12.30",
		"currency":   "CNY",
		"subject":    "VPS 1个月 / 2 vCPU",
		"notify_url": "https://billing.example/callbacks/gw-1",
		"return_url": "https://shop.example/done?x=1",
		"client_ip":  "192.0.2.7",
	}
}

func loadWechatpay(t testing.TB, now func() time.Time) *plugin.Plugin {
	t.Helper()
	return plugintest.Load(t, "gateway/wechatpay.lua", plugin.Options{Now: now})
}

// wxCallback is parse_callback's input for a notification as it arrived.
func wxCallback(body string, h map[string][]string) map[string]any {
	headers := map[string]string{"content-type": "application/json"}
	for k, v := range h {
		headers[strings.ToLower(k)] = v[0]
	}
	return map[string]any{"method": "POST", "content_type": "application/json", "payload": body, "headers": headers}
}

func TestWechatpayInfoAndSchema(t *testing.T) {
	t.Parallel()
	p := loadWechatpay(t, nil)
	info := plugintest.Call(t, p, "info", nil, nil)
	require.Equal(t, []any{"CNY"}, info["currencies"])
	schema := plugintest.Call(t, p, "config_schema", nil, nil)
	props := schema["properties"].(map[string]any)
	require.Equal(t, true, props["merchant_private_key"].(map[string]any)["x-secret"])
	require.Equal(t, true, props["api_v3_key"].(map[string]any)["x-secret"])
	require.Equal(t, true, props["api_base"].(map[string]any)["x-endpoint"])
	require.NotContains(t, props["wechatpay_public_key"], "x-secret", "a public key is no secret")
}

// Native: the order is placed with a request the fake verified (signature,
// serial, timestamp: Go's crypto/rsa), in fen, and its code_url is the QR
// code; the buyer pays, the notification decrypts into a success; the
// query agrees.
func TestWechatpayNativePaysNotifiesAndQueries(t *testing.T) {
	t.Parallel()
	fake := startWechatpay(t, wechatpay.Options{})
	p := loadWechatpay(t, nil)
	cfg := wxConfig(t, fake.URL())
	res := plugintest.Call(t, p, "create_payment", cfg, wxCreateInput())
	require.Equal(t, "weixin://wxpay/bizpayurl?pr="+wxOutTradeNo(wxPaymentID), res["qr_code"])
	require.Equal(t, "", res["payment_url"])
	o, ok := fake.Order(wxOutTradeNo(wxPaymentID))
	require.True(t, ok)
	require.Equal(t, int64(1230), o.Total, "12.30 yuan is 1230 fen")
	require.Equal(t, "NATIVE", o.TradeType)
	require.Equal(t, "VPS 1个月 / 2 vCPU", o.Description)
	require.Equal(t, "https://billing.example/callbacks/gw-1", o.NotifyURL)
	reqs := fake.Requests()
	require.Len(t, reqs, 1)
	require.True(t, reqs[0].Verified)
	require.Equal(t, wechatpay.DefaultSerialNo, reqs[0].Auth.SerialNo)
	var sent map[string]any
	require.NoError(t, json.Unmarshal([]byte(reqs[0].Body), &sent))
	require.Equal(t, map[string]any{"total": float64(1230), "currency": "CNY"}, sent["amount"])

	// Placing it again (a resend) answers the same order.
	again := plugintest.Call(t, p, "create_payment", cfg, wxCreateInput())
	require.Equal(t, res["qr_code"], again["qr_code"])

	q := plugintest.Call(t, p, "query_payment", cfg, map[string]any{"payment_id": wxPaymentID})
	require.Equal(t, "pending", q["status"])

	fake.DropNotify(true)
	require.NoError(t, fake.Pay(wxOutTradeNo(wxPaymentID)))
	require.Eventually(t, func() bool { return len(fake.Notifications()) > 0 }, 5*time.Second, 5*time.Millisecond)
	n := fake.Notifications()[0]
	v := plugintest.Call(t, p, "parse_callback", cfg, wxCallback(n.Body, n.Header))
	require.Equal(t, true, v["valid"], v["reason"])
	require.Equal(t, "success", v["status"])
	require.Equal(t, wxPaymentID, v["payment_id"])
	require.Equal(t, "12.30", v["amount"])
	require.Equal(t, "CNY", v["currency"])
	after, _ := fake.Order(wxOutTradeNo(wxPaymentID))
	require.Equal(t, after.TransactionID, v["gateway_payment_id"])
	require.Equal(t, `{"code":"SUCCESS","message":"成功"}`, v["ack"])

	q = plugintest.Call(t, p, "query_payment", cfg, map[string]any{"payment_id": wxPaymentID})
	require.Equal(t, "success", q["status"])
	require.Equal(t, "12.30", q["amount"])
	require.Equal(t, after.TransactionID, q["gateway_tx_id"])
	require.NotEmpty(t, q["paid_at"])

	require.Equal(t, true, plugintest.Call(t, p, "test_config", cfg, nil)["ok"])
}

func TestWechatpayH5PaymentURLCarriesTheReturnURL(t *testing.T) {
	t.Parallel()
	fake := startWechatpay(t, wechatpay.Options{})
	p := loadWechatpay(t, nil)
	cfg := wxConfig(t, fake.URL())
	cfg["mode"] = "h5"
	res := plugintest.Call(t, p, "create_payment", cfg, wxCreateInput())
	u, err := url.Parse(res["payment_url"].(string))
	require.NoError(t, err)
	require.Equal(t, "https://shop.example/done?x=1", u.Query().Get("redirect_url"))
	o, _ := fake.Order(wxOutTradeNo(wxPaymentID))
	require.Equal(t, "MWEB", o.TradeType)
	require.Equal(t, "192.0.2.7", o.PayerClientIP)

	in := wxCreateInput()
	in["client_ip"] = ""
	_, err = plugintest.CallErr(p, "create_payment", cfg, in)
	require.ErrorContains(t, err, "client_ip")
}

// time_expire is the order's end in Beijing time; an answer timestamped
// more than 5 minutes from the plugin's clock is not believed.
func TestWechatpayOrderEndsAndStaleAnswersAreRefused(t *testing.T) {
	t.Parallel()
	fake := startWechatpay(t, wechatpay.Options{})
	var clock atomicTime
	clock.set(time.Now())
	p := loadWechatpay(t, clock.get)
	cfg := wxConfig(t, fake.URL())
	cfg["expire_minutes"] = 30
	plugintest.Call(t, p, "create_payment", cfg, wxCreateInput())
	o, _ := fake.Order(wxOutTradeNo(wxPaymentID))
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+08:00$`, o.TimeExpire)
	exp, err := time.Parse(time.RFC3339, o.TimeExpire)
	require.NoError(t, err)
	require.WithinDuration(t, clock.get().Add(30*time.Minute), exp, time.Second)

	stale := startWechatpay(t, wechatpay.Options{AnswerSkew: -6 * time.Minute})
	cfg = wxConfig(t, stale.URL())
	_, err = plugintest.CallErr(p, "create_payment", cfg, wxCreateInput())
	require.ErrorContains(t, err, "stale")
	_, placed := stale.Order(wxOutTradeNo(wxPaymentID))
	require.True(t, placed, "the request was taken; its answer is what is refused")
}

type atomicTime struct {
	mu sync.Mutex
	t  time.Time
}

func (a *atomicTime) set(t time.Time) { a.mu.Lock(); a.t = t; a.mu.Unlock() }
func (a *atomicTime) get() time.Time  { a.mu.Lock(); defer a.mu.Unlock(); return a.t }

// The fake and the plugin share a clock: past the order's end, the query
// closes the order (the fake's close API, 204 signed) and the payment fails.
func TestWechatpayExpiredOrderIsClosedAndFails(t *testing.T) {
	t.Parallel()
	var clock atomicTime
	clock.set(time.Now())
	fake := startWechatpay(t, wechatpay.Options{Now: clock.get})
	p := loadWechatpay(t, clock.get)
	cfg := wxConfig(t, fake.URL())
	cfg["expire_minutes"] = 30
	plugintest.Call(t, p, "create_payment", cfg, wxCreateInput())
	clock.set(clock.get().Add(31 * time.Minute))
	q := plugintest.Call(t, p, "query_payment", cfg, map[string]any{"payment_id": wxPaymentID})
	require.Equal(t, "failed", q["status"])
	o, _ := fake.Order(wxOutTradeNo(wxPaymentID))
	require.Equal(t, wechatpay.Closed, o.State)
	require.Equal(t, "failed", plugintest.Call(t, p, "query_payment", cfg, map[string]any{"payment_id": wxPaymentID})["status"])
	require.ErrorIs(t, fake.Pay(wxOutTradeNo(wxPaymentID)), wechatpay.ErrNotPayable)

	// A paid order past its end is a success, never closed.
	in := wxCreateInput()
	in["payment_id"] = "7c1e2a90-3b4d-4e5f-8a6b-9c0d1e2f3a4c"
	plugintest.Call(t, p, "create_payment", cfg, in)
	fake.DropNotify(true)
	require.NoError(t, fake.Pay(wxOutTradeNo(in["payment_id"].(string))))
	clock.set(clock.get().Add(31 * time.Minute))
	require.Equal(t, "success", plugintest.Call(t, p, "query_payment", cfg, map[string]any{"payment_id": in["payment_id"]})["status"])
}

// Refunds: partial then the rest, out_refund_no = the refund id, amounts in
// fen with the order's total; a resend is the same refund; more than is
// left is refused (failed: nothing moved); a PROCESSING refund is pending
// and its REFUND.SUCCESS / REFUND.CLOSED notifications report it.
func TestWechatpayRefundsPartialFullAndNotified(t *testing.T) {
	t.Parallel()
	fake := startWechatpay(t, wechatpay.Options{})
	p := loadWechatpay(t, nil)
	cfg := wxConfig(t, fake.URL())
	plugintest.Call(t, p, "create_payment", cfg, wxCreateInput())
	fake.DropNotify(true)
	require.NoError(t, fake.Pay(wxOutTradeNo(wxPaymentID)))
	refund := func(id, amount string) map[string]any {
		return plugintest.Call(t, p, "refund", cfg, map[string]any{"payment_id": wxPaymentID, "refund_id": id,
			"amount": amount, "payment_amount": "12.30", "currency": "CNY", "reason": "partial"})
	}
	const r1, r2 = "11111111-2222-4333-8444-555555555555", "11111111-2222-4333-8444-666666666666"
	res := refund(r1, "2.30")
	require.Equal(t, "succeeded", res["status"], res["message"])
	require.NotEmpty(t, res["gateway_refund_id"])
	require.Equal(t, "succeeded", refund(r1, "2.30")["status"], "a resend is the same refund")
	over := refund(r2, "10.01")
	require.Equal(t, "failed", over["status"])
	require.Contains(t, over["message"], "NOT_ENOUGH")
	require.Equal(t, "succeeded", refund(r2, "10.00")["status"])
	rs := fake.Refunds()
	require.Len(t, rs, 2)
	require.Equal(t, wxOutTradeNo(r1), rs[0].OutRefundNo)
	require.Equal(t, int64(230), rs[0].Refund)
	require.Equal(t, int64(1230), rs[0].Total)
	require.Equal(t, int64(1000), rs[1].Refund)
	o, _ := fake.Order(wxOutTradeNo(wxPaymentID))
	require.Equal(t, wechatpay.Refund, o.State)
	require.Equal(t, "success", plugintest.Call(t, p, "query_payment", cfg, map[string]any{"payment_id": wxPaymentID})["status"],
		"a refunded order was paid")

	// Each refund is notified: REFUND.SUCCESS decrypts into a refund report.
	require.Eventually(t, func() bool {
		c := 0
		for _, n := range fake.Notifications() {
			if n.EventType == "REFUND.SUCCESS" {
				c++
			}
		}
		return c >= 2
	}, 5*time.Second, 5*time.Millisecond)
	for _, n := range fake.Notifications() {
		if n.EventType != "REFUND.SUCCESS" {
			continue
		}
		v := plugintest.Call(t, p, "parse_callback", cfg, wxCallback(n.Body, n.Header))
		require.Equal(t, true, v["valid"], v["reason"])
		require.Equal(t, "refund", v["status"])
		require.Equal(t, wxPaymentID, v["payment_id"])
		rep := v["refund"].(map[string]any)
		require.Equal(t, "succeeded", rep["status"])
		require.Contains(t, []any{r1, r2}, rep["refund_id"])
	}
}

func TestWechatpayPendingRefundCompletesByNotification(t *testing.T) {
	t.Parallel()
	fake := startWechatpay(t, wechatpay.Options{RefundsPending: true})
	p := loadWechatpay(t, nil)
	cfg := wxConfig(t, fake.URL())
	plugintest.Call(t, p, "create_payment", cfg, wxCreateInput())
	fake.DropNotify(true)
	require.NoError(t, fake.Pay(wxOutTradeNo(wxPaymentID)))
	const r1, r2 = "11111111-2222-4333-8444-555555555555", "11111111-2222-4333-8444-666666666666"
	for _, id := range []string{r1, r2} {
		res := plugintest.Call(t, p, "refund", cfg, map[string]any{"payment_id": wxPaymentID, "refund_id": id,
			"amount": "1.00", "payment_amount": "12.30", "currency": "CNY"})
		require.Equal(t, "pending", res["status"])
	}
	require.NoError(t, fake.CompleteRefund(wxOutTradeNo(r1), true))
	require.NoError(t, fake.CompleteRefund(wxOutTradeNo(r2), false))
	got := map[string]string{}
	// The notifications come in their own time; each is read in the test's
	// goroutine once both are there.
	var refundNotes []wechatpay.Notification
	require.Eventually(t, func() bool {
		refundNotes = refundNotes[:0]
		for _, n := range fake.Notifications() {
			if strings.HasPrefix(n.EventType, "REFUND.") && n.Attempt == 1 {
				refundNotes = append(refundNotes, n)
			}
		}
		return len(refundNotes) >= 2
	}, 5*time.Second, 10*time.Millisecond)
	for _, n := range refundNotes {
		v := plugintest.Call(t, p, "parse_callback", cfg, wxCallback(n.Body, n.Header))
		rep := v["refund"].(map[string]any)
		got[rep["refund_id"].(string)] = rep["status"].(string)
		require.Equal(t, "1.00", rep["amount"])
	}
	require.Equal(t, map[string]string{r1: "succeeded", r2: "failed"}, got)
}

// Forgeries: every one refused with its reason, checked against a genuine
// notification that passes.
func TestWechatpayRefusesForgedNotifications(t *testing.T) {
	t.Parallel()
	fake := startWechatpay(t, wechatpay.Options{})
	p := loadWechatpay(t, nil)
	cfg := wxConfig(t, fake.URL())
	plugintest.Call(t, p, "create_payment", cfg, wxCreateInput())
	fake.DropNotify(true)
	require.NoError(t, fake.Pay(wxOutTradeNo(wxPaymentID)))
	tx, err := fake.Transaction(wxOutTradeNo(wxPaymentID))
	require.NoError(t, err)

	sealed := func(edit func(map[string]any), key, ad string) string {
		c := map[string]any{}
		b, _ := json.Marshal(tx)
		require.NoError(t, json.Unmarshal(b, &c))
		if edit != nil {
			edit(c)
		}
		body, err := fake.SealNotify("TRANSACTION.SUCCESS", "transaction", key, ad, c)
		require.NoError(t, err)
		return body
	}
	signed := func(body string) http.Header {
		h, err := fake.SignNotify(body, time.Now())
		require.NoError(t, err)
		return h
	}
	verdict := func(body string, h map[string][]string) map[string]any {
		return plugintest.Call(t, p, "parse_callback", cfg, wxCallback(body, h))
	}
	refused := func(what, reason string, body string, h map[string][]string) {
		t.Helper()
		v := verdict(body, h)
		require.Equal(t, false, v["valid"], what)
		require.Contains(t, v["reason"], reason, what)
	}

	genuine := sealed(nil, wechatpay.DefaultAPIv3Key, "transaction")
	v := verdict(genuine, signed(genuine))
	require.Equal(t, true, v["valid"], v["reason"])
	require.Equal(t, "12.30", v["amount"])

	// The signature: over another body, by another key, missing.
	h := signed(genuine)
	refused("a body other than the signed one", "bad signature", strings.Replace(genuine, `"summary":"支付成功"`, `"summary":"x"`, 1), h)
	other, err := wechatpay.SignedHeaders(strangerKey, wechatpay.DefaultKeySerial, strconv.FormatInt(time.Now().Unix(), 10), wechatpay.Nonce(), genuine)
	require.NoError(t, err)
	refused("another key", "bad signature", genuine, other)
	bare := signed(genuine)
	bare.Del("Wechatpay-Signature")
	refused("no signature", "missing", genuine, bare)
	probe := signed(genuine)
	probe.Set("Wechatpay-Signature", "WECHATPAY/SIGNTEST/"+probe.Get("Wechatpay-Signature"))
	refused("WeChat Pay's signature probe", "bad signature", genuine, probe)

	// The serial: a genuine signature named by another key ID.
	ser := signed(genuine)
	ser.Set("Wechatpay-Serial", "PUB_KEY_ID_0000")
	refused("another serial", "Wechatpay-Serial", genuine, ser)

	// The timestamp: signed six minutes ago, or ahead.
	for _, d := range []time.Duration{-6 * time.Minute, 6 * time.Minute} {
		old, err := fake.SignNotify(genuine, time.Now().Add(d))
		require.NoError(t, err)
		refused("a stale timestamp", "stale", genuine, old)
	}

	// The resource: tampered ciphertext, other associated data, another key.
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(genuine), &doc))
	res := doc["resource"].(map[string]any)
	ct := res["ciphertext"].(string)
	flip := "A"
	if ct[5] == 'A' {
		flip = "B"
	}
	res["ciphertext"] = ct[:5] + flip + ct[6:]
	b, _ := json.Marshal(doc)
	refused("a tampered ciphertext", "does not decrypt", string(b), signed(string(b)))
	res["ciphertext"] = ct
	res["associated_data"] = "refund"
	b, _ = json.Marshal(doc)
	refused("other associated data", "does not decrypt", string(b), signed(string(b)))
	wrongKey := sealed(nil, "another0merchant0apiv3key0000000", "transaction")
	refused("another APIv3 key", "does not decrypt", wrongKey, signed(wrongKey))

	// The merchant and the app.
	fm := sealed(func(c map[string]any) { c["mchid"] = "1900000110" }, wechatpay.DefaultAPIv3Key, "transaction")
	refused("another mchid", "mchid", fm, signed(fm))
	fa := sealed(func(c map[string]any) { c["appid"] = "wx0000000000000000" }, wechatpay.DefaultAPIv3Key, "transaction")
	refused("another appid", "appid", fa, signed(fa))

	// Amounts and order: reported as they are, for the service to hold
	// them to the payment (internal/app's test shows it refuses them).
	amt := sealed(func(c map[string]any) {
		c["amount"] = map[string]any{"total": 1, "payer_total": 1, "currency": "CNY"}
	}, wechatpay.DefaultAPIv3Key, "transaction")
	v = verdict(amt, signed(amt))
	require.Equal(t, "0.01", v["amount"])
	paidLess := sealed(func(c map[string]any) {
		c["amount"] = map[string]any{"total": 1230, "payer_total": 1000, "currency": "CNY"}
	}, wechatpay.DefaultAPIv3Key, "transaction")
	v = verdict(paidLess, signed(paidLess))
	require.Equal(t, "10.00", v["amount"], "a buyer who paid less is reported with what they paid")
	usd := sealed(func(c map[string]any) {
		c["amount"] = map[string]any{"total": 1230, "payer_total": 1230, "currency": "USD"}
	}, wechatpay.DefaultAPIv3Key, "transaction")
	require.Equal(t, "USD", verdict(usd, signed(usd))["currency"])
	otn := sealed(func(c map[string]any) { c["out_trade_no"] = "0b8d2c0e5f7a4d3e9a512f4a7c9e1b01" }, wechatpay.DefaultAPIv3Key, "transaction")
	require.Equal(t, "0b8d2c0e-5f7a-4d3e-9a51-2f4a7c9e1b01", verdict(otn, signed(otn))["payment_id"])
	notPaid := sealed(func(c map[string]any) { c["trade_state"] = "NOTPAY" }, wechatpay.DefaultAPIv3Key, "transaction")
	refused("a TRANSACTION.SUCCESS that is not paid", "trade_state", notPaid, signed(notPaid))

	// A GET, and a verified event of another type (ignored, acknowledged).
	in := wxCallback(genuine, signed(genuine))
	in["method"] = "GET"
	require.Equal(t, false, plugintest.Call(t, p, "parse_callback", cfg, in)["valid"])
	ev, err := fake.SealNotify("TRANSACTION.SOMETHING", "transaction", wechatpay.DefaultAPIv3Key, "transaction", tx)
	require.NoError(t, err)
	v = verdict(ev, signed(ev))
	require.Equal(t, "ignored", v["status"])
	require.NotEmpty(t, v["ack"])
}

// Answers are believed only with WeChat Pay's signature: a fake whose key
// is not the configured one cannot place orders or say a payment is paid.
func TestWechatpayRefusesUnsignedOrForeignAnswers(t *testing.T) {
	t.Parallel()
	fake := startWechatpay(t, wechatpay.Options{})
	p := loadWechatpay(t, nil)
	cfg := wxConfig(t, fake.URL())
	cfg["wechatpay_public_key"] = wechatpay.PublicKeyPEM(&strangerKey.PublicKey)
	_, err := plugintest.CallErr(p, "create_payment", cfg, wxCreateInput())
	require.ErrorContains(t, err, "not WeChat Pay's")
	tc := plugintest.Call(t, p, "test_config", cfg, nil)
	require.Equal(t, false, tc["ok"])

	cfg = wxConfig(t, fake.URL())
	cfg["wechatpay_serial"] = "PUB_KEY_ID_0000"
	_, err = plugintest.CallErr(p, "query_payment", cfg, map[string]any{"payment_id": wxPaymentID})
	require.ErrorContains(t, err, "Wechatpay-Serial")

	// The merchant's serial or key wrong: the fake refuses the request.
	cfg = wxConfig(t, fake.URL())
	cfg["merchant_serial_no"] = "0000"
	tc = plugintest.Call(t, p, "test_config", cfg, nil)
	require.Equal(t, false, tc["ok"])
	require.Contains(t, tc["message"], "signature")
	cfg = wxConfig(t, fake.URL())
	cfg["merchant_private_key"] = wechatpay.PrivateKeyPEM(strangerKey)
	_, err = plugintest.CallErr(p, "create_payment", cfg, wxCreateInput())
	require.ErrorContains(t, err, "SIGN_ERROR")
}

// A refund answer is held to what was asked: WeChat Pay's signed answer
// about another amount or another refund is "unknown" (an admin looks),
// never "succeeded"; amounts with one decimal go out in whole fen.
func TestWechatpayRefundAnswerMustBeAboutTheRefundAsked(t *testing.T) {
	t.Parallel()
	var edit atomicEdit
	fake := startWechatpay(t, wechatpay.Options{EditAnswer: func(path string, doc map[string]any) {
		if f := edit.get(); f != nil && path == "/v3/refund/domestic/refunds" {
			f(doc)
		}
	}})
	p := loadWechatpay(t, nil)
	cfg := wxConfig(t, fake.URL())
	plugintest.Call(t, p, "create_payment", cfg, wxCreateInput())
	fake.DropNotify(true)
	require.NoError(t, fake.Pay(wxOutTradeNo(wxPaymentID)))
	refund := func(id, amount string) map[string]any {
		return plugintest.Call(t, p, "refund", cfg, map[string]any{"payment_id": wxPaymentID, "refund_id": id,
			"amount": amount, "payment_amount": "12.3", "currency": "CNY"})
	}
	edit.set(func(doc map[string]any) { doc["amount"].(map[string]any)["refund"] = 1 })
	res := refund("11111111-2222-4333-8444-555555555551", "2.3")
	require.Equal(t, "unknown", res["status"], res["message"])
	edit.set(func(doc map[string]any) { doc["out_refund_no"] = "another" })
	require.Equal(t, "unknown", refund("11111111-2222-4333-8444-555555555552", "1")["status"])
	edit.set(nil)
	require.Equal(t, "succeeded", refund("11111111-2222-4333-8444-555555555553", "0.5")["status"])
	rs := fake.Refunds()
	require.Len(t, rs, 3)
	require.Equal(t, []int64{230, 100, 50}, []int64{rs[0].Refund, rs[1].Refund, rs[2].Refund})
	require.Equal(t, int64(1230), rs[0].Total, "12.3 is 1230 fen")
}

type atomicEdit struct {
	mu sync.Mutex
	f  func(map[string]any)
}

func (a *atomicEdit) set(f func(map[string]any)) { a.mu.Lock(); a.f = f; a.mu.Unlock() }
func (a *atomicEdit) get() func(map[string]any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.f
}

// wxNow is the service clock of the fuzz target.
var wxNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// wxNotifyBody is a notification of event around resource, sealed with
// Go's crypto/cipher (wechatpay.Seal).
func wxNotifyBody(t testing.TB, event, originalType, ad string, resource any) string {
	t.Helper()
	plain, err := json.Marshal(resource)
	require.NoError(t, err)
	ct, err := wechatpay.Seal(wechatpay.DefaultAPIv3Key, "0123456789ab", ad, plain)
	require.NoError(t, err)
	b, err := json.Marshal(map[string]any{"id": "EV-1", "create_time": "2026-11-29T20:00:00+08:00", "event_type": event,
		"resource_type": "encrypt-resource", "summary": "支付成功", "resource": map[string]any{"algorithm": "AEAD_AES_256_GCM",
			"ciphertext": ct, "nonce": "0123456789ab", "associated_data": ad, "original_type": originalType}})
	require.NoError(t, err)
	return string(b)
}

// FuzzWechatpayParseCallback feeds arbitrary notifications and signature
// headers to the shipped wechatpay.lua's parse_callback on a fixed clock.
// Every input gets a verdict (or a plugin error, never a panic), and one
// is found valid only when Go's crypto/rsa verifies WeChat Pay's signature
// over "timestamp\nnonce\nbody\n", the serial is the configured one, the
// timestamp within 5 minutes, Go's AES-GCM opens the resource for this
// merchant, and what it reports is what the decrypted resource says. Mode
// bit 0 signs the fuzzer's body with WeChat Pay's key (so the checks after
// the signature are reached), bit 1 takes the fuzzer's timestamp, bit 2
// its serial.
func FuzzWechatpayParseCallback(f *testing.F) {
	wxKeys(f)
	tx := map[string]any{"mchid": wechatpay.DefaultMchID, "appid": wechatpay.DefaultAppID, "out_trade_no": wxOutTradeNo(wxPaymentID),
		"transaction_id": "4200000000202611290000000001", "trade_state": "SUCCESS", "amount": map[string]any{"total": 1230, "payer_total": 1230, "currency": "CNY"}}
	genuine := wxNotifyBody(f, "TRANSACTION.SUCCESS", "transaction", "transaction", tx)
	ts := strconv.FormatInt(wxNow.Unix(), 10)
	f.Add(uint8(1), genuine, ts, "N1", "", "")
	f.Add(uint8(0), genuine, ts, "N1", "", "AAAA")
	f.Add(uint8(3), genuine, strconv.FormatInt(wxNow.Unix()-301, 10), "N1", "", "")
	f.Add(uint8(3), genuine, "1e9", "N1", "", "")
	f.Add(uint8(5), genuine, ts, "N1", "PUB_KEY_ID_0000", "")
	f.Add(uint8(1), wxNotifyBody(f, "TRANSACTION.SUCCESS", "transaction", "refund", tx), ts, "N", "", "")
	f.Add(uint8(1), wxNotifyBody(f, "REFUND.SUCCESS", "refund", "refund", map[string]any{"mchid": wechatpay.DefaultMchID,
		"out_trade_no": wxOutTradeNo(wxPaymentID), "out_refund_no": "x", "refund_id": "5", "refund_status": "SUCCESS",
		"amount": map[string]any{"total": 1230, "refund": -5}}), ts, "N", "", "")
	f.Add(uint8(1), wxNotifyBody(f, "TRANSACTION.SUCCESS", "transaction", "transaction", map[string]any{"mchid": wechatpay.DefaultMchID,
		"appid": wechatpay.DefaultAppID, "out_trade_no": "x", "transaction_id": "4", "trade_state": "SUCCESS",
		"amount": map[string]any{"total": 1.5, "payer_total": "12", "currency": "CNY"}}), ts, "N", "", "")
	f.Add(uint8(1), `{"event_type":"TRANSACTION.SUCCESS","resource_type":"encrypt-resource","resource":{"algorithm":"AEAD_AES_256_GCM","ciphertext":"!!","nonce":"short"}}`, ts, "N", "", "")
	f.Add(uint8(1), "{\"resource\":\"\xff\"}", ts, "N", "", "")
	f.Add(uint8(1), "", ts, "", "", "")

	p := loadWechatpay(f, func() time.Time { return wxNow })
	cfg := wxConfig(f, "http://127.0.0.1:1")
	f.Fuzz(func(t *testing.T, mode uint8, body, timestamp, nonce, serial, sig string) {
		if mode&2 == 0 {
			timestamp = ts
		}
		if mode&4 == 0 {
			serial = wechatpay.DefaultKeySerial
		}
		if mode&1 == 1 {
			s, err := wechatpay.SignText(wxKey, wechatpay.AnswerText(timestamp, nonce, body))
			require.NoError(t, err)
			sig = s
		}
		headers := map[string]any{"wechatpay-timestamp": timestamp, "wechatpay-nonce": nonce, "wechatpay-serial": serial, "wechatpay-signature": sig}
		out, err := plugintest.CallErr(p, "parse_callback", cfg, map[string]any{"method": "POST", "content_type": "application/json", "payload": body, "headers": headers})
		if err != nil {
			var ce *plugin.CallError
			if !errors.As(err, &ce) {
				t.Fatalf("not a plugin error: %v", err)
			}
			return
		}
		var v struct {
			Valid                    bool
			Reason                   string
			PaymentID                string `json:"payment_id"`
			Status, Amount, Currency string
			GatewayPaymentID         string `json:"gateway_payment_id"`
			Ack                      string
			Refund                   *struct {
				RefundID string `json:"refund_id"`
				Status   string
				Amount   string
			}
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("parse_callback answered %q: %v", out, err)
		}
		if !v.Valid {
			return
		}
		sec, err := strconv.ParseInt(timestamp, 10, 64)
		if err != nil || sec < wxNow.Unix()-300 || sec > wxNow.Unix()+300 {
			t.Fatalf("valid with timestamp %q", timestamp)
		}
		if serial != wechatpay.DefaultKeySerial {
			t.Fatalf("valid with serial %q", serial)
		}
		if !wechatpay.VerifyText(&wxKey.PublicKey, wechatpay.AnswerText(timestamp, nonce, body), sig) {
			t.Fatalf("valid without WeChat Pay's signature: %q", body)
		}
		var n struct {
			EventType string `json:"event_type"`
			Resource  struct {
				Ciphertext, Nonce string
				AD                string `json:"associated_data"`
			}
		}
		if err := json.Unmarshal([]byte(body), &n); err != nil {
			t.Fatalf("valid for a body Go cannot read: %q", body)
		}
		plain, err := wechatpay.Open(wechatpay.DefaultAPIv3Key, n.Resource.Nonce, n.Resource.AD, n.Resource.Ciphertext)
		if err != nil {
			t.Fatalf("valid though the resource does not open: %v", err)
		}
		var r map[string]any
		if err := json.Unmarshal(plain, &r); err != nil || r["mchid"] != wechatpay.DefaultMchID {
			t.Fatalf("valid for resource %q", plain)
		}
		switch v.Status {
		case "success":
			if n.EventType != "TRANSACTION.SUCCESS" || r["appid"] != wechatpay.DefaultAppID || r["trade_state"] != "SUCCESS" {
				t.Fatalf("success for %s %q", n.EventType, plain)
			}
			if strings.ReplaceAll(v.PaymentID, "-", "") != r["out_trade_no"] || v.GatewayPaymentID != r["transaction_id"] {
				t.Fatalf("reports %+v for %q", v, plain)
			}
			a, _ := r["amount"].(map[string]any)
			paid := a["payer_total"]
			if paid == nil {
				paid = a["total"]
			}
			f, ok := paid.(float64)
			if !ok || fmt.Sprintf("%d.%02d", int64(f)/100, int64(f)%100) != v.Amount || f != float64(int64(f)) {
				t.Fatalf("amount %q for %q", v.Amount, plain)
			}
		case "refund":
			if !strings.HasPrefix(n.EventType, "REFUND.") || v.Refund == nil || strings.ReplaceAll(v.Refund.RefundID, "-", "") != r["out_refund_no"] {
				t.Fatalf("refund %+v for %s %q", v.Refund, n.EventType, plain)
			}
		case "ignored":
			if n.EventType == "TRANSACTION.SUCCESS" || strings.HasPrefix(n.EventType, "REFUND.") {
				t.Fatalf("ignored %s", n.EventType)
			}
		default:
			t.Fatalf("status %q", v.Status)
		}
	})
}
