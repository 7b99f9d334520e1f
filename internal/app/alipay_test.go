package app_test

import (
	"context"
	"crypto/rsa"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/alipay"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// Keys for the Alipay tests, made once: RSA generation is slow on a shared
// machine.
var (
	alipayKeysOnce                 sync.Once
	alipayGatewayKey, alipayAppKey *rsa.PrivateKey
)

// alipayBundle is a payEnv with a fake Alipay gateway and an enabled interface
// of the shipped alipay plugin on it.
type alipayBundle struct {
	*payBundle
	alipay *alipay.Server
	gw     string
}

func startAlipayPayments(t *testing.T, mutate ...func(*config.Config)) *alipayBundle {
	t.Helper()
	alipayKeysOnce.Do(func() {
		var err error
		alipayGatewayKey, err = alipay.GenerateKey()
		require.NoError(t, err)
		alipayAppKey, err = alipay.GenerateKey()
		require.NoError(t, err)
	})
	e := startPayments(t, mutate...)
	fake, err := alipay.New(alipay.Options{
		Key:         alipayGatewayKey,
		Apps:        []alipay.App{{AppID: alipay.DefaultAppID, SellerID: alipay.DefaultSellerID, PublicKey: &alipayAppKey.PublicKey}},
		NotifyScale: 1e-9,
	})
	require.NoError(t, err)
	require.NoError(t, fake.Start())
	t.Cleanup(fake.Close)

	e.installGateway(t, "alipay", "alipay", nil)
	id := e.addGateway(t, "alipay", "支付宝", map[string]any{
		"gateway_url":       fake.GatewayURL(),
		"app_id":            alipay.DefaultAppID,
		"seller_id":         alipay.DefaultSellerID,
		"app_private_key":   alipay.PrivateKeyPEM(alipayAppKey),
		"alipay_public_key": fake.PublicKeyPEM(),
	})
	e.requireGatewayTestPasses(t, id)
	return &alipayBundle{payBundle: e, alipay: fake, gw: id}
}

// outTradeNo is a payment id as Alipay carries it: without hyphens.
func outTradeNo(paymentID string) string { return strings.ReplaceAll(paymentID, "-", "") }

// openCashier follows a page.pay link as the buyer's browser does; Alipay
// has the trade from then on.
func (e *alipayBundle) openCashier(t *testing.T, link string) alipay.Trade {
	t.Helper()
	require.True(t, strings.HasPrefix(link, e.alipay.GatewayURL()+"?"), link)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Get(link)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	u, err := url.Parse(link)
	require.NoError(t, err)
	tr, ok := e.alipay.Trade(strings.Split(strings.Split(u.Query().Get("biz_content"), `"out_trade_no":"`)[1], `"`)[0])
	require.True(t, ok)
	return tr
}

// post delivers a notify to /callbacks/{gw} as Alipay does.
func (e *alipayBundle) post(t *testing.T, v url.Values) (int, string) {
	t.Helper()
	resp, err := http.Post(e.r.baseURL+"/callbacks/"+e.gw, "application/x-www-form-urlencoded; charset=utf-8", strings.NewReader(v.Encode()))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// The whole way over real HTTP: an order, a page.pay link, the buyer pays
// at the fake Alipay, its signed POST notify reaches /callbacks/{id}, the
// order is paid; the repeat is acknowledged and changes nothing; a partial
// and then a full refund go out through alipay.trade.refund.
func TestOrderPaidAndRefundedThroughAlipayEndToEnd(t *testing.T) {
	t.Parallel()
	e := startAlipayPayments(t)
	ctx := context.Background()
	orderID := e.order(t)
	created := e.createPaymentVia(t, orderID, e.gw)
	p := created.GetPayment()
	require.Equal(t, "pending", p.GetStatus())
	tr := e.openCashier(t, created.GetPaymentUrl())
	require.Equal(t, outTradeNo(p.GetId()), tr.OutTradeNo)
	require.Equal(t, "12.30", tr.TotalAmount)
	require.Equal(t, e.r.baseURL+"/callbacks/"+e.gw, tr.NotifyURL)

	require.NoError(t, e.alipay.Pay(tr.TradeNo))
	paid := e.waitSettled(t, p.GetId())
	require.Equal(t, tr.TradeNo, paid.GetGatewayPaymentId())
	e.waitOrderStatus(t, orderID, "active")
	require.Eventually(t, func() bool {
		ns := e.alipay.Notifications()
		return len(ns) == 1 && ns[0].Acked
	}, 10*time.Second, 10*time.Millisecond, "Alipay got its \"success\"")
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.success' AND actor_kind = 'gateway'`))

	// Alipay repeats the notify: acknowledged again, one event.
	require.NoError(t, e.alipay.Renotify(tr.TradeNo))
	require.Eventually(t, func() bool {
		ns := e.alipay.Notifications()
		return len(ns) == 2 && ns[1].Acked
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_paid'`, orderID))

	part, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId(), Amount: "2.30", Reason: "partial"}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "succeeded", part.Msg.GetRefund().GetStatus())
	require.Equal(t, "2.30", part.Msg.GetPayment().GetRefundedAmount())
	rest, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId(), Reason: "the rest"}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "succeeded", rest.Msg.GetRefund().GetStatus())
	require.Equal(t, "10.00", rest.Msg.GetRefund().GetAmount())
	require.Equal(t, "refunded", rest.Msg.GetPayment().GetStatus())

	refunds := e.alipay.Refunds()
	require.Len(t, refunds, 2)
	require.Equal(t, "2.30", refunds[0].Amount)
	require.Equal(t, outTradeNo(part.Msg.GetRefund().GetId()), refunds[0].OutRequestNo, "out_request_no is the refund id")
	require.Equal(t, "10.00", refunds[1].Amount)
	after, _ := e.alipay.Trade(tr.TradeNo)
	require.Equal(t, alipay.TradeClosed, after.Status)
	require.Equal(t, "12.30", after.Refunded)

	// Alipay notifies each refund (TRADE_SUCCESS with refund_fee, then
	// TRADE_CLOSED): both acknowledged, nothing changed.
	require.Eventually(t, func() bool {
		ns := e.alipay.Notifications()
		return len(ns) == 4 && ns[2].Acked && ns[3].Acked
	}, 10*time.Second, 10*time.Millisecond)
	ns := e.alipay.Notifications()
	require.NotEmpty(t, ns[2].Params.Get("refund_fee"))
	require.NotEmpty(t, ns[3].Params.Get("refund_fee"))
	require.True(t, ns[2].Params.Get("trade_status") == alipay.TradeClosed || ns[3].Params.Get("trade_status") == alipay.TradeClosed,
		"a notify says the trade closed (each reports the trade as it stands when sent)")
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_paid'`, orderID))
	require.Equal(t, "refunded", e.getPayment(t, p.GetId()).GetStatus())
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}

// A forged notify changes nothing: a tampered signature, Alipay's own
// signature for another app, and a well-signed notify of another amount
// are refused (the last recorded for an admin); the genuine one is then
// taken.
func TestAlipayNotifyForgedForeignOrOfAnotherAmountIsRefusedWithNothingChanged(t *testing.T) {
	t.Parallel()
	e := startAlipayPayments(t)
	orderID := e.order(t)
	created := e.createPaymentVia(t, orderID, e.gw)
	p := created.GetPayment()
	tr := e.openCashier(t, created.GetPaymentUrl())
	e.alipay.DropNotify(true)
	require.NoError(t, e.alipay.Pay(tr.TradeNo))
	genuine, err := e.alipay.NotifyParams(tr.TradeNo)
	require.NoError(t, err)

	edited := func(edit func(url.Values), resign bool) url.Values {
		v := url.Values{}
		for k, vs := range genuine {
			v[k] = append([]string(nil), vs...)
		}
		edit(v)
		if resign {
			require.NoError(t, e.alipay.SignNotify(v))
		}
		return v
	}
	unchanged := func(what string) {
		t.Helper()
		require.Equal(t, "pending", e.getPayment(t, p.GetId()).GetStatus(), what)
		require.Equal(t, "pending", e.orderStatus(t, orderID), what)
		require.Equal(t, 0, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1`, orderID), what)
	}

	code, body := e.post(t, edited(func(v url.Values) { v.Set("total_amount", "0.01") }, false))
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "bad signature")
	unchanged("a tampered signature")

	code, body = e.post(t, edited(func(v url.Values) {
		v.Set("sign", strings.Replace(v.Get("sign"), v.Get("sign")[10:14], "AAAA", 1))
	}, false))
	require.Equal(t, http.StatusBadRequest, code, body)
	unchanged("a corrupted signature")

	code, body = e.post(t, edited(func(v url.Values) { v.Set("app_id", "2021000000000002"); v.Set("auth_app_id", "2021000000000002") }, true))
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "app_id")
	unchanged("another app")

	code, body = e.post(t, edited(func(v url.Values) { v.Set("seller_id", "2088000000000002") }, true))
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "seller_id")
	unchanged("another merchant")

	code, body = e.post(t, edited(func(v url.Values) { v.Set("total_amount", "1.23") }, true))
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "amount mismatch")
	unchanged("another amount")
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND entity_id = $1
		AND after->>'kind' = 'amount_mismatch'`, p.GetId()))
	require.Equal(t, 0, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND entity_id = $1
		AND after->>'kind' <> 'amount_mismatch'`, p.GetId()), "a refused signature records nothing")

	// 12.3 is 12.30: the amount is compared as a decimal, not as text.
	code, body = e.post(t, edited(func(v url.Values) { v.Set("total_amount", "12.3") }, true))
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "success", body)
	require.Equal(t, "success", e.getPayment(t, p.GetId()).GetStatus())
	code, body = e.post(t, genuine)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "success", body, "the genuine notify is a duplicate now, acknowledged again")
	e.waitOrderStatus(t, orderID, "active")

	// Over gRPC, a duplicate answers AlreadyExists.
	_, err = e.payments.HandleCallback(context.Background(), connect.NewRequest(&paymentpb.PaymentCallbackRequest{
		GatewayInterfaceId: e.gw, Payload: genuine.Encode(),
	}))
	require.Equal(t, connect.CodeAlreadyExists, connect.CodeOf(err), "%v", err)
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}

// Every notify lost: the reconciler asks alipay.trade.query, and the paid
// trade settles the payment with Alipay's trade_no.
func TestLostAlipayNotifyIsRepairedByReconciliation(t *testing.T) {
	t.Parallel()
	e := startAlipayPayments(t, func(c *config.Config) { c.Billing.ReconcileAfter = 300 * time.Millisecond })
	e.alipay.DropNotify(true)
	orderID := e.order(t)
	created := e.createPaymentVia(t, orderID, e.gw)
	p := created.GetPayment()

	tr := e.openCashier(t, created.GetPaymentUrl())
	require.NoError(t, e.alipay.Pay(tr.TradeNo))
	paid := e.waitSettled(t, p.GetId())
	require.Equal(t, tr.TradeNo, paid.GetGatewayPaymentId())
	e.waitOrderStatus(t, orderID, "active")
	for _, n := range e.alipay.Notifications() {
		require.True(t, n.Dropped, "no notify ever arrived")
	}
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.success' AND actor_kind = 'system'`))
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}
