package app_test

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/wechatpay"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// Keys for the WeChat Pay tests, made once.
var (
	wxKeysOnce                   sync.Once
	wxPlatformKey, wxMerchantKey *rsa.PrivateKey
	wxStrangerKey                *rsa.PrivateKey
)

type wechatBundle struct {
	*payBundle
	wx *wechatpay.Server
	gw string
}

func startWechatPayments(t *testing.T, opts wechatpay.Options, mode string, mutate ...func(*config.Config)) *wechatBundle {
	t.Helper()
	wxKeysOnce.Do(func() {
		var err error
		wxPlatformKey, err = wechatpay.GenerateKey()
		require.NoError(t, err)
		wxMerchantKey, err = wechatpay.GenerateKey()
		require.NoError(t, err)
		wxStrangerKey, err = wechatpay.GenerateKey()
		require.NoError(t, err)
	})
	e := startPayments(t, mutate...)
	opts.Key = wxPlatformKey
	opts.Merchants = []wechatpay.Merchant{{MchID: wechatpay.DefaultMchID, AppID: wechatpay.DefaultAppID,
		SerialNo: wechatpay.DefaultSerialNo, PublicKey: &wxMerchantKey.PublicKey, APIv3Key: wechatpay.DefaultAPIv3Key}}
	if opts.NotifyScale == 0 {
		opts.NotifyScale = 1e-9 // the schedule at once, unless the test sets one
	}
	fake, err := wechatpay.New(opts)
	require.NoError(t, err)
	require.NoError(t, fake.Start())
	t.Cleanup(fake.Close)

	e.installGateway(t, "wechatpay", "wechatpay", nil)
	id := e.addGateway(t, "wechatpay", "微信支付", map[string]any{
		"api_base":             fake.URL(),
		"mchid":                wechatpay.DefaultMchID,
		"appid":                wechatpay.DefaultAppID,
		"merchant_serial_no":   wechatpay.DefaultSerialNo,
		"merchant_private_key": wechatpay.PrivateKeyPEM(wxMerchantKey),
		"api_v3_key":           wechatpay.DefaultAPIv3Key,
		"wechatpay_public_key": fake.PublicKeyPEM(),
		"wechatpay_serial":     fake.KeySerial(),
		"mode":                 mode,
	})
	e.requireGatewayTestPasses(t, id)
	return &wechatBundle{payBundle: e, wx: fake, gw: id}
}

// post delivers a notification to /callbacks/{gw} as WeChat Pay does.
func (e *wechatBundle) post(t *testing.T, body string, h http.Header) (int, string) {
	t.Helper()
	code, _, answer := e.postAnswer(t, body, h)
	return code, answer
}

// postAnswer is post with the answer's Content-Type.
func (e *wechatBundle) postAnswer(t *testing.T, body string, h http.Header) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.r.baseURL+"/callbacks/"+e.gw, strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// wxRefusal is the body WeChat Pay's documentation asks of a notification
// whose handling failed, which the plugin declares (info().callback_refusal).
const wxRefusal = `{"code":"FAIL","message":"失败"}`

func (e *wechatBundle) acked(t *testing.T, event string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		c := 0
		for _, x := range e.wx.Notifications() {
			if x.EventType == event && x.Acked {
				c++
			}
		}
		return c >= n
	}, 10*time.Second, 10*time.Millisecond, "%d acknowledged %s", n, event)
}

// The whole way over real HTTP: an order, a Native QR code, the buyer pays
// at the fake, its signed and encrypted notification reaches
// /callbacks/{id} and pays the order; the repeat is acknowledged and
// changes nothing; a partial and a full refund go out, and their
// REFUND.SUCCESS notifications are acknowledged as repeats.
func TestOrderPaidAndRefundedThroughWechatPayEndToEnd(t *testing.T) {
	t.Parallel()
	// A refund's REFUND.SUCCESS may come while the refund is still being
	// sent, and is then refused (503) until it is recorded: its retry comes
	// after 150 ms here, not WeChat's 15 s, which outlasted the wait for its
	// acknowledgement on a loaded machine.
	e := startWechatPayments(t, wechatpay.Options{NotifyScale: 0.01}, "native")
	ctx := context.Background()
	orderID := e.order(t)
	created := e.createPaymentVia(t, orderID, e.gw)
	p := created.GetPayment()
	otn := outTradeNo(p.GetId())
	require.Equal(t, "weixin://wxpay/bizpayurl?pr="+otn, created.GetQrCode())
	o, ok := e.wx.Order(otn)
	require.True(t, ok)
	require.Equal(t, int64(1230), o.Total)
	require.Equal(t, e.r.baseURL+"/callbacks/"+e.gw, o.NotifyURL)

	require.NoError(t, e.wx.Pay(otn))
	paid := e.waitSettled(t, p.GetId())
	o, _ = e.wx.Order(otn)
	require.Equal(t, o.TransactionID, paid.GetGatewayPaymentId())
	e.waitOrderStatus(t, orderID, "active")
	e.acked(t, "TRANSACTION.SUCCESS", 1)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.success' AND actor_kind = 'gateway'`))

	require.NoError(t, e.wx.Renotify(otn))
	e.acked(t, "TRANSACTION.SUCCESS", 2)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_paid'`, orderID))

	part, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId(), Amount: "2.30", Reason: "partial"}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "succeeded", part.Msg.GetRefund().GetStatus())
	rest, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId(), Reason: "the rest"}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "succeeded", rest.Msg.GetRefund().GetStatus())
	require.Equal(t, "10.00", rest.Msg.GetRefund().GetAmount())
	require.Equal(t, "refunded", rest.Msg.GetPayment().GetStatus())
	refunds := e.wx.Refunds()
	require.Len(t, refunds, 2)
	require.Equal(t, int64(230), refunds[0].Refund)
	require.Equal(t, outTradeNo(part.Msg.GetRefund().GetId()), refunds[0].OutRefundNo, "out_refund_no is the refund id")
	require.Equal(t, int64(1000), refunds[1].Refund)

	e.acked(t, "REFUND.SUCCESS", 2)
	require.Equal(t, "refunded", e.getPayment(t, p.GetId()).GetStatus())
	require.Equal(t, "12.30", e.getPayment(t, p.GetId()).GetRefundedAmount())
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}

// H5: the payment_url is WeChat Pay's h5_url with the return URL; the
// order carries the buyer's IP.
func TestOrderPaidThroughWechatPayH5(t *testing.T) {
	t.Parallel()
	e := startWechatPayments(t, wechatpay.Options{}, "h5")
	orderID := e.order(t)
	created := e.createPaymentVia(t, orderID, e.gw)
	p := created.GetPayment()
	require.True(t, strings.HasPrefix(created.GetPaymentUrl(), e.wx.URL()+"/h5?"), created.GetPaymentUrl())
	require.Contains(t, created.GetPaymentUrl(), "redirect_url=https%3A%2F%2Fshop.example%2Fdone")
	o, ok := e.wx.Order(outTradeNo(p.GetId()))
	require.True(t, ok)
	require.Equal(t, "MWEB", o.TradeType)
	require.NotEmpty(t, o.PayerClientIP)
	require.NoError(t, e.wx.Pay(o.OutTradeNo))
	e.waitSettled(t, p.GetId())
	e.waitOrderStatus(t, orderID, "active")
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}

// A refund WeChat Pay answers PROCESSING stays pending until its
// REFUND.SUCCESS notification completes it (once, though sent twice).
func TestWechatPayPendingRefundCompletedByItsNotification(t *testing.T) {
	t.Parallel()
	e := startWechatPayments(t, wechatpay.Options{RefundsPending: true}, "native")
	ctx := context.Background()
	orderID := e.order(t)
	p := e.createPaymentVia(t, orderID, e.gw).GetPayment()
	require.NoError(t, e.wx.Pay(outTradeNo(p.GetId())))
	e.waitSettled(t, p.GetId())
	r, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId(), Amount: "2.30", Reason: "partial"}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "pending", r.Msg.GetRefund().GetStatus())
	require.NoError(t, e.wx.CompleteRefund(outTradeNo(r.Msg.GetRefund().GetId()), true))
	e.acked(t, "REFUND.SUCCESS", 1)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, "2.30", e.getPayment(c, p.GetId()).GetRefundedAmount())
	}, 10*time.Second, 10*time.Millisecond)
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}

// Forged notifications change nothing: a bad signature, another key's
// serial, a stale timestamp, a tampered ciphertext or associated data,
// another merchant or app, another amount or currency, and an order that
// is not ours are refused; the genuine one is then taken.
func TestWechatPayForgedNotificationsAreRefusedWithNothingChanged(t *testing.T) {
	t.Parallel()
	e := startWechatPayments(t, wechatpay.Options{}, "native")
	orderID := e.order(t)
	p := e.createPaymentVia(t, orderID, e.gw).GetPayment()
	otn := outTradeNo(p.GetId())
	e.wx.DropNotify(true)
	require.NoError(t, e.wx.Pay(otn))
	tx, err := e.wx.Transaction(otn)
	require.NoError(t, err)

	sealed := func(edit func(map[string]any), key, ad string) string {
		c := map[string]any{}
		b, _ := json.Marshal(tx)
		require.NoError(t, json.Unmarshal(b, &c))
		if edit != nil {
			edit(c)
		}
		body, err := e.wx.SealNotify("TRANSACTION.SUCCESS", "transaction", key, ad, c)
		require.NoError(t, err)
		return body
	}
	signed := func(body string) http.Header {
		h, err := e.wx.SignNotify(body, time.Now())
		require.NoError(t, err)
		return h
	}
	unchanged := func(what string) {
		t.Helper()
		require.Equal(t, "pending", e.getPayment(t, p.GetId()).GetStatus(), what)
		require.Equal(t, "pending", e.orderStatus(t, orderID), what)
		require.Equal(t, 0, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1`, orderID), what)
	}
	// Every refusal is a 4xx with the body WeChat Pay's documentation
	// asks of a failed handling (the reason goes to the service's log;
	// internal/plugintest holds the plugin's reasons).
	refused := func(what string, status int, body string, h http.Header) {
		t.Helper()
		code, ctype, answer := e.postAnswer(t, body, h)
		require.Equal(t, status, code, "%s: %s", what, answer)
		require.Equal(t, []string{"application/json", wxRefusal}, []string{ctype, answer}, what)
		unchanged(what)
	}
	genuine := sealed(nil, wechatpay.DefaultAPIv3Key, "transaction")

	refused("a body other than the signed one", 400, strings.Replace(genuine, `"summary":"支付成功"`, `"summary":"x"`, 1), signed(genuine))
	other, err := wechatpay.SignedHeaders(wxStrangerKey, e.wx.KeySerial(), strconv.FormatInt(time.Now().Unix(), 10), wechatpay.Nonce(), genuine)
	require.NoError(t, err)
	refused("another key", 400, genuine, other)
	ser := signed(genuine)
	ser.Set("Wechatpay-Serial", "PUB_KEY_ID_0000")
	refused("another serial", 400, genuine, ser)
	old, err := e.wx.SignNotify(genuine, time.Now().Add(-6*time.Minute))
	require.NoError(t, err)
	refused("a stale timestamp", 400, genuine, old)

	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(genuine), &doc))
	res := doc["resource"].(map[string]any)
	ct := res["ciphertext"].(string)
	res["ciphertext"] = strings.ToLower(ct[:8]) + ct[8:]
	if res["ciphertext"] == ct {
		res["ciphertext"] = strings.ToUpper(ct[:8]) + ct[8:]
	}
	b, _ := json.Marshal(doc)
	refused("a tampered ciphertext", 400, string(b), signed(string(b)))
	res["ciphertext"] = ct
	res["associated_data"] = "refund"
	b, _ = json.Marshal(doc)
	refused("other associated data", 400, string(b), signed(string(b)))

	fm := sealed(func(c map[string]any) { c["mchid"] = "1900000110" }, wechatpay.DefaultAPIv3Key, "transaction")
	refused("another mchid", 400, fm, signed(fm))
	fa := sealed(func(c map[string]any) { c["appid"] = "wx0000000000000000" }, wechatpay.DefaultAPIv3Key, "transaction")
	refused("another appid", 400, fa, signed(fa))

	amt := sealed(func(c map[string]any) {
		c["amount"] = map[string]any{"total": 1, "payer_total": 1, "currency": "CNY"}
	}, wechatpay.DefaultAPIv3Key, "transaction")
	refused("another total", 400, amt, signed(amt))
	less := sealed(func(c map[string]any) {
		c["amount"] = map[string]any{"total": 1230, "payer_total": 1229, "currency": "CNY"}
	}, wechatpay.DefaultAPIv3Key, "transaction")
	refused("a buyer who paid less", 400, less, signed(less))
	require.Equal(t, 2, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND entity_id = $1
		AND after->>'kind' = 'amount_mismatch'`, p.GetId()))
	usd := sealed(func(c map[string]any) {
		c["amount"] = map[string]any{"total": 1230, "payer_total": 1230, "currency": "USD"}
	}, wechatpay.DefaultAPIv3Key, "transaction")
	refused("another currency", 400, usd, signed(usd))
	elsewhere := sealed(func(c map[string]any) { c["out_trade_no"] = "0b8d2c0e5f7a4d3e9a512f4a7c9e1b01" }, wechatpay.DefaultAPIv3Key, "transaction")
	refused("an order that is not ours", 404, elsewhere, signed(elsewhere))
	get, err := http.Get(e.r.baseURL + "/callbacks/" + e.gw)
	require.NoError(t, err)
	answer, err := io.ReadAll(get.Body)
	require.NoError(t, err)
	require.NoError(t, get.Body.Close())
	require.Equal(t, []any{http.StatusBadRequest, wxRefusal}, []any{get.StatusCode, string(answer)}, "a GET is refused in the same terms")

	code, ack := e.post(t, genuine, signed(genuine))
	require.Equal(t, []any{200, `{"code":"SUCCESS","message":"成功"}`}, []any{code, ack})
	require.Equal(t, "success", e.getPayment(t, p.GetId()).GetStatus())
	e.waitOrderStatus(t, orderID, "active")
	code, _ = e.post(t, genuine, signed(genuine))
	require.Equal(t, 200, code, "the repeat is acknowledged")
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_paid'`, orderID))
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}

// Every notification lost: the reconciler queries the order and the paid
// one settles the payment with WeChat Pay's transaction_id.
func TestLostWechatPayNotificationIsRepairedByReconciliation(t *testing.T) {
	t.Parallel()
	e := startWechatPayments(t, wechatpay.Options{}, "native", func(c *config.Config) { c.Billing.ReconcileAfter = 300 * time.Millisecond })
	e.wx.DropNotify(true)
	orderID := e.order(t)
	p := e.createPaymentVia(t, orderID, e.gw).GetPayment()
	require.NoError(t, e.wx.Pay(outTradeNo(p.GetId())))
	paid := e.waitSettled(t, p.GetId())
	o, _ := e.wx.Order(outTradeNo(p.GetId()))
	require.Equal(t, o.TransactionID, paid.GetGatewayPaymentId())
	e.waitOrderStatus(t, orderID, "active")
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.success' AND actor_kind = 'system'`))
}
