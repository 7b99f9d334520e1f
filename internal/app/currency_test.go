package app_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// usdOrder places an order of a 100.00 USD product as alice.
func (e *payBundle) usdOrder(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	prod, err := e.orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{Name: "VPS (USD)", Price: "100.00", Currency: "USD"}, e.c.admin))
	require.NoError(t, err)
	o, err := e.orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: prod.Msg.GetProduct().GetId()}, e.c.customer))
	require.NoError(t, err)
	require.Equal(t, "USD", o.Msg.GetOrder().GetCurrency())
	return o.Msg.GetOrder().GetId()
}

// Issue 14: a 100.00 USD order was paid at epay (whose protocol has no
// currency: yuan) as money=100.00, i.e. 100.00 CNY. ListPaymentMethods for
// the order no longer offers epay, and CreatePayment through it answers
// InvalidArgument naming both currencies, without asking the gateway or
// writing anything.
func TestUSDOrderIsNeitherOfferedNorPaidThroughEpay(t *testing.T) {
	t.Parallel()
	o := startObserved(t, nil)
	e := o.payBundle
	ctx := context.Background()
	methods := gatewaypbconnect.NewPaymentMethodServiceClient(http.DefaultClient, e.r.baseURL)
	list := func(req *gatewaypb.ListPaymentMethodsRequest, cr credential) (map[string][]string, error) {
		res, err := methods.ListPaymentMethods(ctx, with(req, cr))
		if err != nil {
			return nil, err
		}
		out := map[string][]string{}
		for _, m := range res.Msg.GetPaymentMethods() {
			out[m.GetId()] = m.GetCurrencies()
		}
		return out, nil
	}
	dollars := e.dollarGateway(t)
	order := e.usdOrder(t)

	all, err := list(&gatewaypb.ListPaymentMethodsRequest{}, e.c.customer)
	require.NoError(t, err)
	require.Equal(t, map[string][]string{e.epayGW: {"CNY"}, dollars: {"USD"}}, all, "each method with what it takes")
	forOrder, err := list(&gatewaypb.ListPaymentMethodsRequest{OrderId: order}, e.c.customer)
	require.NoError(t, err)
	require.Equal(t, map[string][]string{dollars: {"USD"}}, forOrder, "epay is not offered for a USD order")
	inCNY, err := list(&gatewaypb.ListPaymentMethodsRequest{Currency: "CNY"}, e.c.customer)
	require.NoError(t, err)
	require.Equal(t, map[string][]string{e.epayGW: {"CNY"}}, inCNY)
	cnyOrder, err := list(&gatewaypb.ListPaymentMethodsRequest{OrderId: e.order(t)}, e.c.customer)
	require.NoError(t, err)
	require.Equal(t, inCNY, cnyOrder)

	// Only the caller's own order; the filter's arguments are checked.
	_, err = list(&gatewaypb.ListPaymentMethodsRequest{OrderId: order}, e.c.other)
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "order "+order+" does not exist")
	adminView, err := list(&gatewaypb.ListPaymentMethodsRequest{OrderId: order}, e.c.admin)
	require.NoError(t, err)
	require.Equal(t, forOrder, adminView)
	for _, bad := range []*gatewaypb.ListPaymentMethodsRequest{
		{OrderId: order, Currency: "USD"},
		{Currency: "usd"},
		{OrderId: "not-a-uuid"},
		{InvoiceId: "not-a-uuid"},
	} {
		_, err = list(bad, e.c.customer)
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v: %v", bad, err)
	}

	// CreatePayment through epay: refused, naming both; nothing written,
	// nothing sent.
	_, err = e.payments.CreatePayment(ctx, with(&paymentpb.CreatePaymentRequest{
		OrderId: order, GatewayInterfaceId: e.epayGW, ReturnUrl: "https://shop.example/done",
	}, e.c.customer))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "gateway interface "+e.epayGW+" (Alipay) does not take USD (it takes CNY)")
	require.Zero(t, e.count(t, `SELECT count(*) FROM payments WHERE order_id = $1`, order))
	require.Zero(t, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.create'`))
	require.Empty(t, e.fake.Orders(), "epay was never asked")
	require.Equal(t, "pending", e.orderStatus(t, order))
	require.Zero(t, o.scrape(t)[`paymentd_payment_transitions_total{gateway="epay",status="pending"}`])

	// The dollar gateway pays it.
	p := e.createPaymentVia(t, order, dollars).GetPayment()
	require.Equal(t, "USD", p.GetCurrency())
	require.Equal(t, "100.00", p.GetAmount())
}

// A gateway that reports the currency it received: a report in another
// currency than the payment's is refused (400 to the gateway), recorded as
// an anomaly and counted as a mismatch; the same notification in the
// payment's currency settles it.
func TestCallbackInAnotherCurrencyIsRefusedRecordedAndCounted(t *testing.T) {
	t.Parallel()
	o := startObserved(t, nil)
	e := o.payBundle
	// epay's protocol has no currency; this variant's notifications carry
	// one (signed like every parameter), as a gateway's that has one do.
	gw := e.epayVariant(t, "epay_cur", func(src string) string {
		return strings.Replace(src, "    amount = str(p.money),\n", "    amount = str(p.money),\n    currency = str(p.currency),\n", 1)
	})
	orderID := e.order(t)
	p := e.createPaymentVia(t, orderID, gw).GetPayment()
	require.Equal(t, "CNY", p.GetCurrency())

	notify := func(currency string) string {
		v := url.Values{}
		for k, vs := range map[string]string{
			"pid": epay.DefaultPID, "trade_no": "T-CUR-1", "out_trade_no": p.GetId(), "type": "alipay",
			"name": "VPS", "money": "12.30", "trade_status": "TRADE_SUCCESS", "currency": currency,
		} {
			v.Set(k, vs)
		}
		v.Set("sign", epay.Sign(v, epay.DefaultKey))
		v.Set("sign_type", "MD5")
		return v.Encode()
	}
	deliver := func(query string) (int, string) {
		t.Helper()
		resp, err := http.Get(e.r.baseURL + "/callbacks/" + gw + "?" + query)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	mismatch := `paymentd_callbacks_total{gateway="epay_cur",outcome="mismatch"}`

	code, body := deliver(notify("USD"))
	require.Equal(t, http.StatusBadRequest, code, body)
	require.NotEqual(t, "success", body, "not acknowledged")
	require.Equal(t, "pending", e.getPayment(t, p.GetId()).GetStatus())
	require.Equal(t, "pending", e.orderStatus(t, orderID))
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND entity_id = $1
		AND after->>'kind' = 'currency_mismatch' AND after->>'currency' = 'USD'`, p.GetId()))
	require.Equal(t, 1.0, o.scrape(t)[mismatch])

	// Over gRPC as well.
	_, err := e.payments.HandleCallback(context.Background(), connect.NewRequest(&paymentpb.PaymentCallbackRequest{
		GatewayInterfaceId: gw, Payload: notify("USD"),
	}))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "currency mismatch: the gateway reports 12.30 USD for payment "+p.GetId()+" of 12.30 CNY")
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND entity_id = $1`, p.GetId()),
		"the same report is recorded once")

	code, body = deliver(notify("CNY"))
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "success", body)
	require.Equal(t, "success", e.getPayment(t, p.GetId()).GetStatus())
}

// A USD payment made through epay before currencies were checked: epay's
// notification names no currency but means yuan, so its success is
// refused and recorded; a refund through epay would pay the figure back in
// yuan, so RefundPayment answers FailedPrecondition and sends nothing.
func TestUSDPaymentMadeThroughEpayBeforeTheCheckIsNeitherSettledNorRefundedThroughIt(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	pool := e.r.app.Pool()
	gw := uuid.MustParse(e.epayGW)
	pending := testfixture.InsertPayment(t, pool, testfixture.Payment{Customer: e.c.customerID, Gateway: gw, Amount: "100.00", Currency: "USD"})
	paid := testfixture.InsertPayment(t, pool, testfixture.Payment{Customer: e.c.customerID, Gateway: gw, Amount: "100.00", Currency: "USD", Status: "success"})

	err := e.callback(signedNotify(pending.String(), "T-OLD-1", "100.00"))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "currency mismatch: payment "+pending.String()+" is of 100.00 USD, but its gateway interface takes CNY")
	require.Equal(t, "pending", e.getPayment(t, pending.String()).GetStatus())
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND entity_id = $1
		AND after->>'kind' = 'currency_mismatch'`, pending.String()))

	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: paid.String()}, e.c.admin))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "is in USD, but gateway interface "+e.epayGW+" (Alipay) takes CNY")
	require.Zero(t, e.count(t, `SELECT count(*) FROM refunds WHERE payment_id = $1`, paid))
	require.Empty(t, e.fake.Refunds(), "nothing sent to epay")
	require.Equal(t, "success", e.getPayment(t, paid.String()).GetStatus())
}
