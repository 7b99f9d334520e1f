package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v84/webhook"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/fakes/stripemock"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// The Stripe plugin over the wire: a running paymentd, the shipped
// stripe.lua loaded by the scanner, stripe-mock as Stripe's API, and
// webhooks signed by stripe-go posted to /callbacks/{id} as Stripe posts
// them. stripe-mock is stateless — it answers a fixture session, not the
// one created — so the test plays Stripe's part of "the customer paid" by
// sending the event Stripe would send for the session it answered.

const stripeWhsec = "whsec_paymentdAppTest0123456789"

type stripeBundle struct {
	*payBundle
	gw, product string
}

func startStripe(t *testing.T, opts ...app.Option) *stripeBundle {
	t.Helper()
	e := startPaymentsWith(t, opts)
	// stripe-mock keeps no state: the package's tests share one.
	sm := stripemock.Shared(t)
	e.installGateway(t, "stripe", "stripe", nil)
	s := &stripeBundle{payBundle: e, gw: e.addGateway(t, "stripe", "Card (Stripe)", map[string]any{
		"secret_key": stripemock.Key, "webhook_secret": stripeWhsec, "api_base": sm.URL(),
	})}
	ctx := context.Background()
	// What the console's form is made of: the plugin's schema, with both
	// keys write-only, read back masked.
	got, err := e.admin.GetGatewayInterface(ctx, with(&gatewaypb.GetGatewayInterfaceRequest{Id: s.gw}, e.c.admin))
	require.NoError(t, err)
	cfg := got.Msg.GetGatewayInterface().GetConfig().AsMap()
	require.Equal(t, "********", cfg["secret_key"])
	require.Equal(t, "********", cfg["webhook_secret"])
	require.Equal(t, sm.URL(), cfg["api_base"])
	props := got.Msg.GetGatewayInterface().GetConfigSchema().AsMap()["properties"].(map[string]any)
	require.Equal(t, true, props["webhook_secret"].(map[string]any)["x-secret"])
	e.requireGatewayTestPasses(t, s.gw)
	prod, err := e.orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{Name: "VPS 1G", Price: "12.30", Currency: "USD"}, e.c.admin))
	require.NoError(t, err)
	s.product = prod.Msg.GetProduct().GetId()
	return s
}

// pay places a USD order and pays it through Stripe up to the Checkout
// page; it returns the order, the payment and the session stripe-mock made.
func (s *stripeBundle) pay(t *testing.T) (orderID string, p *paymentpb.PaymentRecord, created *paymentpb.CreatePaymentResponse) {
	t.Helper()
	o, err := s.orders.CreateOrder(context.Background(), with(&orderpb.CreateOrderRequest{ProductId: s.product}, s.c.customer))
	require.NoError(t, err)
	orderID = o.Msg.GetOrder().GetId()
	created = s.createPaymentVia(t, orderID, s.gw)
	// The admin's view carries the gateway's ids.
	return orderID, s.getPayment(t, created.GetPayment().GetId()), created
}

// sessionOf is the Checkout Session id the events of payment p name.
// stripe-mock answers a random id of its own at creation, which the
// service does not keep (it stores the gateway's id when a payment
// settles), so the test's Stripe names one per payment.
func sessionOf(p *paymentpb.PaymentRecord) string {
	return "cs_test_" + strings.ReplaceAll(p.GetId(), "-", "")
}

// completed is the checkout.session.completed event Stripe sends for
// the session of payment p once paid, for amount (minor units) in USD.
func completed(p *paymentpb.PaymentRecord, typ string, amount int) []byte {
	return completedIn(p, typ, amount, "usd")
}

// completedIn is completed in currency (Stripe's lower-case code).
func completedIn(p *paymentpb.PaymentRecord, typ string, amount int, currency string) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": "evt_1", "object": "event", "type": typ, "created": time.Now().Unix(),
		"data": map[string]any{"object": map[string]any{
			"id": sessionOf(p), "object": "checkout.session", "mode": "payment", "status": "complete",
			"payment_status": "paid", "amount_total": amount, "currency": currency, "client_reference_id": p.GetId(),
			"payment_intent": "pi_1PgafyB7WZ01zgkWSjxsAJo3", "metadata": map[string]any{"payment_id": p.GetId(), "order_id": p.GetOrderId()},
		}},
	})
	return b
}

// post sends a webhook to /callbacks/{gw} as Stripe does and returns the
// status and body.
func (s *stripeBundle) post(t *testing.T, payload []byte, signature string) (int, string) {
	t.Helper()
	code, body, err := s.send(payload, signature)
	require.NoError(t, err)
	return code, body
}

// send is post for a goroutine of the test's own: the error is returned
// for the test's goroutine to require on.
func (s *stripeBundle) send(payload []byte, signature string) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, s.r.baseURL+"/callbacks/"+s.gw, strings.NewReader(string(payload)))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	if signature != "" {
		req.Header.Set("Stripe-Signature", signature)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func stripeSign(payload []byte, secret string, at time.Time) string {
	return webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: secret, Timestamp: at}).Header
}

func TestOrderPaidAndRefundedThroughStripeEndToEnd(t *testing.T) {
	t.Parallel()
	s := startStripe(t)
	ctx := context.Background()

	orderID, p, created := s.pay(t)
	require.Equal(t, "pending", p.GetStatus())
	require.Equal(t, "USD", p.GetCurrency())
	require.Regexp(t, `^https://checkout\.stripe\.com/`, created.GetPaymentUrl())

	// Before any webhook, a status query finds no paid PaymentIntent of the
	// payment (stripe-mock's search answers a fixture of no payment of
	// ours) and changes nothing.
	q, err := s.payments.QueryPaymentStatus(ctx, with(&paymentpb.QueryPaymentStatusRequest{PaymentId: p.GetId()}, s.c.admin))
	require.NoError(t, err)
	require.Equal(t, "pending", q.Msg.GetPayment().GetStatus())

	// Stripe's webhook for the paid session.
	ev := completed(p, "checkout.session.completed", 1230)
	sig := stripeSign(ev, stripeWhsec, time.Now())
	status, body := s.post(t, ev, sig)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, `{"received":true}`, body)
	paid := s.getPayment(t, p.GetId())
	require.Equal(t, "success", paid.GetStatus())
	require.Equal(t, "12.30", paid.GetAmount())
	require.Equal(t, sessionOf(p), paid.GetGatewayPaymentId(), "the session id is the gateway payment id")
	require.Equal(t, "pi_1PgafyB7WZ01zgkWSjxsAJo3", paid.GetGatewayTxId())
	s.waitOrderStatus(t, orderID, "active")

	// Stripe delivers at least once: the repeat is acknowledged, one event.
	status, body = s.post(t, ev, sig)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, `{"received":true}`, body)
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_paid'`, orderID))
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.success' AND entity_id = $1`, p.GetId()))

	// An event type the service does not act on is acknowledged, ignored.
	other := []byte(`{"id":"evt_2","object":"event","type":"charge.succeeded","data":{"object":{"id":"ch_1","object":"charge"}}}`)
	status, body = s.post(t, other, stripeSign(other, stripeWhsec, time.Now()))
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, `{"received":true}`, body)

	// A partial refund, then the rest, on the session's PaymentIntent.
	r1, err := s.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId(), Amount: "5.00", Reason: "partial"}, s.c.admin))
	require.NoError(t, err)
	require.Equal(t, "succeeded", r1.Msg.GetRefund().GetStatus(), r1.Msg.GetRefund().GetMessage())
	require.Regexp(t, `^re_`, r1.Msg.GetRefund().GetGatewayRefundId())
	require.Equal(t, "5.00", r1.Msg.GetPayment().GetRefundedAmount())
	r2, err := s.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId(), Reason: "the rest"}, s.c.admin))
	require.NoError(t, err)
	require.Equal(t, "succeeded", r2.Msg.GetRefund().GetStatus(), r2.Msg.GetRefund().GetMessage())
	require.Equal(t, "7.30", r2.Msg.GetRefund().GetAmount())
	require.Equal(t, "12.30", r2.Msg.GetPayment().GetRefundedAmount())
	_, err = s.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId()}, s.c.admin))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "nothing left to refund: %v", err)
	testfixture.CheckMoneyInvariants(t, s.r.app.Pool())
}

func TestForgedStaleAndAlteredStripeWebhooksChangeNothing(t *testing.T) {
	t.Parallel()
	s := startStripe(t)
	orderID, p, _ := s.pay(t)
	genuine := completed(p, "checkout.session.completed", 1230)
	now := time.Now()
	sig := stripeSign(genuine, stripeWhsec, now)
	altered := completed(p, "checkout.session.completed", 1)
	// 12.30 CNY for the 12.30 USD payment. The interface takes both, so
	// only holding the report against the payment's currency refuses it.
	yuan := completedIn(p, "checkout.session.completed", 1230, "cny")
	methods, err := gatewaypbconnect.NewPaymentMethodServiceClient(http.DefaultClient, s.r.baseURL).
		ListPaymentMethods(context.Background(), with(&gatewaypb.ListPaymentMethodsRequest{}, s.c.customer))
	require.NoError(t, err)
	var takes []string
	for _, m := range methods.Msg.GetPaymentMethods() {
		if m.GetId() == s.gw {
			takes = m.GetCurrencies()
		}
	}
	require.Subset(t, takes, []string{"CNY", "USD"}, "a multi-currency interface")
	type attempt struct {
		payload []byte
		sig     string
		status  int
		reason  string
	}
	for name, a := range map[string]attempt{
		"tampered signature":    {genuine, sig[:len(sig)-4] + "0000", http.StatusBadRequest, "bad signature"},
		"another secret":        {genuine, stripeSign(genuine, "whsec_notTheEndpoints", now), http.StatusBadRequest, "bad signature"},
		"stale timestamp":       {genuine, stripeSign(genuine, stripeWhsec, now.Add(-6*time.Minute)), http.StatusBadRequest, "timestamp outside the tolerance"},
		"changed after signing": {altered, sig, http.StatusBadRequest, "bad signature"},
		"no signature":          {genuine, "", http.StatusBadRequest, "missing Stripe-Signature"},
		// Signed, but for an amount other than the payment's: refused and
		// recorded as an anomaly for an admin.
		"changed amount, signed": {altered, stripeSign(altered, stripeWhsec, now), http.StatusBadRequest, "amount"},
		// Signed, for the payment's amount in another currency the
		// interface takes: refused and recorded the same way.
		"changed currency, signed": {yuan, stripeSign(yuan, stripeWhsec, now), http.StatusBadRequest, "currency mismatch"},
	} {
		status, body := s.post(t, a.payload, a.sig)
		require.Equal(t, a.status, status, "%s: %s", name, body)
		require.Contains(t, body, a.reason, name)
		require.Equal(t, "pending", s.getPayment(t, p.GetId()).GetStatus(), name)
	}
	require.Equal(t, "pending", s.orderStatus(t, orderID))
	require.Equal(t, 0, s.count(t, `SELECT count(*) FROM events WHERE order_id = $1`, orderID))
	require.Equal(t, 2, s.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND entity_id = $1`, p.GetId()),
		"only the genuine but mismatching notifications are recorded")
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND entity_id = $1
		AND after->>'kind' = 'currency_mismatch' AND after->>'currency' = 'CNY'`, p.GetId()))

	// The genuine one still settles it afterwards.
	status, body := s.post(t, genuine, sig)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "success", s.getPayment(t, p.GetId()).GetStatus())
}

// The 300 s are held against the service's clock (app.WithClock), not the
// machine's: on a service two hours ahead, a webhook signed now is stale
// and one signed at the service's time is taken.
func TestStripeWebhookAgeIsJudgedOnTheServiceClock(t *testing.T) {
	t.Parallel()
	const ahead = 2 * time.Hour
	s := startStripe(t, app.WithClock(func() time.Time { return time.Now().Add(ahead) }))
	_, p, _ := s.pay(t)
	ev := completed(p, "checkout.session.completed", 1230)
	status, body := s.post(t, ev, stripeSign(ev, stripeWhsec, time.Now()))
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Contains(t, body, "timestamp outside the tolerance")
	require.Equal(t, "pending", s.getPayment(t, p.GetId()).GetStatus())
	status, body = s.post(t, ev, stripeSign(ev, stripeWhsec, time.Now().Add(ahead)))
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "success", s.getPayment(t, p.GetId()).GetStatus())
}
