package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/fakes/stripemock"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// Stripe's loose ends over the wire (issue 39, 3): the events that end a
// payment (checkout.session.expired, …async_payment_failed) or a refund
// Stripe answered pending (refund.updated, refund.failed), and the pinned
// Stripe-Version on every request the plugin makes.

// stripePinned is the Stripe-Version stripe.lua pins.
const stripePinned = "2026-02-25.clover"

// stripeFront is Stripe's API for these tests: stripe-mock behind a proxy
// that records each request's Stripe-Version and, while pendingRefunds is
// set, answers a refund as Stripe answers one it completes later
// ("status": "pending"; stripe-mock, which keeps no state, always
// answers succeeded).
type stripeFront struct {
	*httptest.Server
	mu             sync.Mutex
	versions       map[string]string // "METHOD path" → Stripe-Version
	pendingRefunds bool
	// refundArrived and refundGoes, when set, hold a refund's POST: the
	// front tells refundArrived it has it, and sends it on to stripe-mock
	// when refundGoes is closed.
	refundArrived chan struct{}
	refundGoes    chan struct{}
}

func newStripeFront(t *testing.T) *stripeFront {
	t.Helper()
	target, err := url.Parse(stripemock.Shared(t).URL())
	require.NoError(t, err)
	f := &stripeFront{versions: map[string]string{}, pendingRefunds: true}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method != http.MethodPost || resp.Request.URL.Path != "/v1/refunds" || resp.StatusCode != http.StatusOK {
			return nil
		}
		f.mu.Lock()
		pending := f.pendingRefunds
		f.mu.Unlock()
		if !pending {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		var r map[string]any
		if err := json.Unmarshal(body, &r); err != nil {
			return err
		}
		r["status"] = "pending"
		out, _ := json.Marshal(r)
		resp.Body = io.NopCloser(bytes.NewReader(out))
		resp.ContentLength = int64(len(out))
		resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
		return nil
	}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.versions[r.Method+" "+r.URL.Path] = r.Header.Get("Stripe-Version")
		arrived, goes := f.refundArrived, f.refundGoes
		f.mu.Unlock()
		if r.Method == http.MethodPost && r.URL.Path == "/v1/refunds" && arrived != nil {
			arrived <- struct{}{}
			<-goes
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *stripeFront) seen() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for k, v := range f.versions {
		out[k] = v
	}
	return out
}

// startStripeAt is startStripe with the plugin's api_base at api.
func startStripeAt(t *testing.T, api string) *stripeBundle {
	t.Helper()
	e := startPaymentsWith(t, nil)
	e.installGateway(t, "stripe", "stripe", nil)
	s := &stripeBundle{payBundle: e, gw: e.addGateway(t, "stripe", "Card (Stripe)", map[string]any{
		"secret_key": stripemock.Key, "webhook_secret": stripeWhsec, "api_base": api,
	})}
	e.requireGatewayTestPasses(t, s.gw)
	prod, err := e.orders.CreateProduct(context.Background(), with(&orderpb.CreateProductRequest{Name: "VPS 1G", Price: "12.30", Currency: "USD"}, e.c.admin))
	require.NoError(t, err)
	s.product = prod.Msg.GetProduct().GetId()
	return s
}

// sessionEvent is an event of type typ about payment p's Checkout
// Session, in status and payment_status.
func sessionEvent(p *paymentpb.PaymentRecord, typ, status, paymentStatus string, amount int) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": "evt_s_" + typ, "object": "event", "type": typ, "api_version": stripePinned, "created": time.Now().Unix(),
		"data": map[string]any{"object": map[string]any{
			"id": sessionOf(p), "object": "checkout.session", "mode": "payment", "status": status,
			"payment_status": paymentStatus, "amount_total": amount, "currency": "usd", "client_reference_id": p.GetId(),
			"payment_intent": nil, "metadata": map[string]any{"payment_id": p.GetId(), "order_id": p.GetOrderId()},
		}},
	})
	return b
}

// refundEvent is Stripe's refund.* event of type typ for refund r, in
// status, for amount (minor units, USD).
func refundEvent(r *paymentpb.Refund, typ, status string, amount int) []byte {
	obj := map[string]any{
		"id": r.GetGatewayRefundId(), "object": "refund", "amount": amount, "currency": "usd", "status": status,
		"payment_intent": "pi_1PgafyB7WZ01zgkWSjxsAJo3",
		"metadata":       map[string]any{"refund_id": r.GetId(), "payment_id": r.GetPaymentId(), "reason": r.GetReason()},
	}
	if status == "failed" {
		obj["failure_reason"] = "expired_or_canceled_card"
	}
	b, _ := json.Marshal(map[string]any{
		"id": "evt_r_" + typ + "_" + status, "object": "event", "type": typ, "api_version": stripePinned, "created": time.Now().Unix(),
		"data": map[string]any{"object": obj},
	})
	return b
}

// deliver posts a signed event and requires the answer status.
func (s *stripeBundle) deliver(t *testing.T, ev []byte, want int) string {
	t.Helper()
	status, body := s.post(t, ev, stripeSign(ev, stripeWhsec, time.Now()))
	require.Equal(t, want, status, body)
	if want == http.StatusOK {
		require.Equal(t, `{"received":true}`, body)
	}
	return body
}

func TestStripeExpiredAndFailedSessionsFailThePendingPaymentOnce(t *testing.T) {
	t.Parallel()
	front := newStripeFront(t)
	s := startStripeAt(t, front.URL)
	ctx := context.Background()

	// An expired session fails the pending payment, once.
	orderID, p, _ := s.pay(t)
	expired := sessionEvent(p, "checkout.session.expired", "expired", "unpaid", 1230)
	// Signed as any other event: a forged one changes nothing.
	status, body := s.post(t, expired, stripeSign(expired, "whsec_notTheEndpoints", time.Now()))
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Contains(t, body, "bad signature")
	status, body = s.post(t, expired, stripeSign(expired, stripeWhsec, time.Now().Add(-6*time.Minute)))
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Contains(t, body, "timestamp outside the tolerance")
	require.Equal(t, "pending", s.getPayment(t, p.GetId()).GetStatus())

	s.deliver(t, expired, http.StatusOK)
	failed := s.getPayment(t, p.GetId())
	require.Equal(t, "failed", failed.GetStatus())
	require.Contains(t, failed.GetFailureReason(), "expired")
	// Stripe delivers at least once: the repeat is acknowledged, nothing moves.
	s.deliver(t, expired, http.StatusOK)
	require.Equal(t, failed.GetUpdatedAt(), s.getPayment(t, p.GetId()).GetUpdatedAt())
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.fail' AND entity_id = $1`, p.GetId()))
	require.Equal(t, 0, s.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND entity_id = $1`, p.GetId()))
	// The order waits for another attempt, which gets a new payment (and a
	// new session: the idempotency key is the payment's).
	require.Equal(t, "pending", s.orderStatus(t, orderID))
	again := s.createPaymentVia(t, orderID, s.gw)
	require.NotEqual(t, p.GetId(), again.GetPayment().GetId())
	require.Equal(t, "pending", again.GetPayment().GetStatus())

	// A bank debit that failed after the session completed: pending, then
	// failed.
	orderID2, p2, _ := s.pay(t)
	s.deliver(t, sessionEvent(p2, "checkout.session.completed", "complete", "unpaid", 1230), http.StatusOK)
	require.Equal(t, "pending", s.getPayment(t, p2.GetId()).GetStatus(), "a debit on its way")
	asyncFailed := sessionEvent(p2, "checkout.session.async_payment_failed", "complete", "unpaid", 1230)
	s.deliver(t, asyncFailed, http.StatusOK)
	s.deliver(t, asyncFailed, http.StatusOK)
	require.Equal(t, "failed", s.getPayment(t, p2.GetId()).GetStatus())
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.fail' AND entity_id = $1`, p2.GetId()))
	require.Equal(t, "pending", s.orderStatus(t, orderID2))
	// An expired event for another amount is refused and recorded, as a
	// success of another amount is.
	orderID3, p3, _ := s.pay(t)
	s.deliver(t, sessionEvent(p3, "checkout.session.expired", "expired", "unpaid", 1), http.StatusBadRequest)
	require.Equal(t, "pending", s.getPayment(t, p3.GetId()).GetStatus())
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND entity_id = $1
		AND after->>'kind' = 'amount_mismatch'`, p3.GetId()))

	// A session already paid does not expire here: the payment stays paid,
	// the order active, and the contradiction is recorded once for an admin.
	s.deliver(t, completed(p3, "checkout.session.completed", 1230), http.StatusOK)
	s.waitOrderStatus(t, orderID3, "active")
	paidExpired := sessionEvent(p3, "checkout.session.expired", "expired", "unpaid", 1230)
	body = s.deliver(t, paidExpired, http.StatusBadRequest)
	require.Contains(t, body, "failed")
	s.deliver(t, paidExpired, http.StatusBadRequest)
	paid := s.getPayment(t, p3.GetId())
	require.Equal(t, "success", paid.GetStatus())
	require.Equal(t, "active", s.orderStatus(t, orderID3))
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND entity_id = $1
		AND after->>'kind' = 'failed_after_success'`, p3.GetId()))
	require.Equal(t, 0, s.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.fail' AND entity_id = $1`, p3.GetId()))
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_paid'`, orderID3))

	// Every request the plugin made carried the pinned version.
	seen := front.seen()
	require.Contains(t, seen, "POST /v1/checkout/sessions")
	require.Contains(t, seen, "GET /v1/balance")
	for req, v := range seen {
		require.Equal(t, stripePinned, v, req)
	}
	_, err := s.payments.QueryPaymentStatus(ctx, with(&paymentpb.QueryPaymentStatusRequest{PaymentId: again.GetPayment().GetId()}, s.c.admin))
	require.NoError(t, err)
	require.Equal(t, stripePinned, front.seen()["GET /v1/payment_intents/search"])
	testfixture.CheckMoneyInvariants(t, s.r.app.Pool())
}

func TestStripeRefundNotificationsCompleteOrFailAPendingRefundOnce(t *testing.T) {
	t.Parallel()
	front := newStripeFront(t)
	s := startStripeAt(t, front.URL)
	ctx := context.Background()
	orderID, p, _ := s.pay(t)
	s.deliver(t, completed(p, "checkout.session.completed", 1230), http.StatusOK)
	s.waitOrderStatus(t, orderID, "active")

	refund := func(amount string) *paymentpb.RefundPaymentResponse {
		t.Helper()
		r, err := s.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId(), Amount: amount, Reason: "asked"}, s.c.admin))
		require.NoError(t, err)
		require.Equal(t, "pending", r.Msg.GetRefund().GetStatus(), "Stripe answered pending")
		require.Regexp(t, `^re_`, r.Msg.GetRefund().GetGatewayRefundId())
		return r.Msg
	}
	refundStatus := func(id string) string {
		var st string
		require.NoError(t, s.r.app.Pool().QueryRow(ctx, `SELECT status FROM refunds WHERE id = $1`, id).Scan(&st))
		return st
	}
	refunded := func() string { return s.getPayment(t, p.GetId()).GetRefundedAmount() }
	anomalies := func(kind string) int {
		return s.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND entity_id = $1 AND after->>'kind' = $2`, p.GetId(), kind)
	}

	// 5.00 pending at Stripe; nothing else can take those 5.00 meanwhile.
	r1 := refund("5.00").GetRefund()
	_, err := s.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId(), Amount: "7.31"}, s.c.admin))
	require.Error(t, err, "5.00 is reserved")
	s.deliver(t, refundEvent(r1, "refund.updated", "pending", 500), http.StatusOK)
	require.Equal(t, "pending", refundStatus(r1.GetId()), "still pending: nothing changes")

	// Stripe could not pay it out: the refund fails, its 5.00 are
	// refundable again, and it says so.
	failedEv := refundEvent(r1, "refund.failed", "failed", 500)
	s.deliver(t, failedEv, http.StatusOK)
	require.Equal(t, "failed", refundStatus(r1.GetId()))
	var msg string
	require.NoError(t, s.r.app.Pool().QueryRow(ctx, `SELECT error FROM refunds WHERE id = $1`, r1.GetId()).Scan(&msg))
	require.Contains(t, msg, "expired_or_canceled_card")
	require.Equal(t, "0.00", refunded())
	// Delivered again (and delivered twice at once): nothing more.
	var wg sync.WaitGroup
	codes := make([]int, 4)
	errs := make([]error, 4)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _, errs[i] = s.send(failedEv, stripeSign(failedEv, stripeWhsec, time.Now()))
		}()
	}
	wg.Wait()
	require.Equal(t, []error{nil, nil, nil, nil}, errs)
	require.Equal(t, []int{200, 200, 200, 200}, codes)
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM audit_log WHERE action = 'refund.fail' AND entity_id = $1`, r1.GetId()))
	require.Equal(t, "failed", refundStatus(r1.GetId()))
	// A success reported for the failed refund contradicts it: recorded,
	// nothing changed.
	s.deliver(t, refundEvent(r1, "refund.updated", "succeeded", 500), http.StatusBadRequest)
	require.Equal(t, "failed", refundStatus(r1.GetId()))
	require.Equal(t, "0.00", refunded())
	require.Equal(t, 1, anomalies("refund_status_mismatch"))

	// The whole amount is refundable again; Stripe completes it later.
	r2 := refund("").GetRefund()
	require.Equal(t, "12.30", r2.GetAmount(), "the failed refund's 5.00 went back to refundable")
	// Another amount is refused and recorded.
	s.deliver(t, refundEvent(r2, "refund.updated", "succeeded", 500), http.StatusBadRequest)
	require.Equal(t, 1, anomalies("amount_mismatch"))
	require.Equal(t, "pending", refundStatus(r2.GetId()))

	succeeded := refundEvent(r2, "refund.updated", "succeeded", 1230)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _, errs[i] = s.send(succeeded, stripeSign(succeeded, stripeWhsec, time.Now()))
		}()
	}
	wg.Wait()
	require.Equal(t, []error{nil, nil, nil, nil}, errs)
	require.Equal(t, []int{200, 200, 200, 200}, codes)
	require.Equal(t, "succeeded", refundStatus(r2.GetId()))
	after := s.getPayment(t, p.GetId())
	require.Equal(t, "refunded", after.GetStatus())
	require.Equal(t, "12.30", after.GetRefundedAmount())
	require.Equal(t, "refunded", s.orderStatus(t, orderID), "refunded in full: the service ends")
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_refunded'`, orderID))
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM audit_log WHERE action = 'refund.succeed' AND entity_id = $1`, r2.GetId()))
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.refund' AND entity_id = $1`, p.GetId()))
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM audit_log WHERE action = 'refund.succeed' AND entity_id = $1
		AND actor_kind = 'gateway' AND actor_id = $2`, r2.GetId(), s.gw))
	// A failure reported after the success is recorded, nothing changes.
	s.deliver(t, refundEvent(r2, "refund.failed", "failed", 1230), http.StatusBadRequest)
	require.Equal(t, "succeeded", refundStatus(r2.GetId()))
	require.Equal(t, "12.30", refunded())
	require.Equal(t, 2, anomalies("refund_status_mismatch"))

	// A refund this service does not know is NotFound; one made in
	// Stripe's dashboard (no refund id of ours) is acknowledged, ignored.
	unknown := &paymentpb.Refund{Id: "5c4b9c0e-3d0b-4e57-8f5b-0b9f7d0e1a2b", PaymentId: p.GetId(), GatewayRefundId: "re_other"}
	s.deliver(t, refundEvent(unknown, "refund.updated", "succeeded", 500), http.StatusNotFound)
	dashboard := []byte(`{"id":"evt_d","object":"event","type":"refund.updated","data":{"object":{"id":"re_d","object":"refund","amount":100,"currency":"usd","status":"succeeded","metadata":{}}}}`)
	s.deliver(t, dashboard, http.StatusOK)

	require.Equal(t, stripePinned, front.seen()["POST /v1/refunds"])
	testfixture.CheckMoneyInvariants(t, s.r.app.Pool())
}

// A refund's notification that overtakes the refund call (Stripe answers
// the webhook before the POST's answer is back) is refused with 503, so
// Stripe sends it again once the call has recorded its own answer: the
// call never finds its refund finished under it.
func TestStripeRefundNotificationWaitsForTheRefundCallsOwnAnswer(t *testing.T) {
	t.Parallel()
	front := newStripeFront(t)
	s := startStripeAt(t, front.URL)
	ctx := context.Background()
	orderID, p, _ := s.pay(t)
	s.deliver(t, completed(p, "checkout.session.completed", 1230), http.StatusOK)
	s.waitOrderStatus(t, orderID, "active")

	arrived, goes := make(chan struct{}), make(chan struct{})
	var release sync.Once
	let := func() { release.Do(func() { close(goes) }) }
	t.Cleanup(let) // a failure below must not leave the POST held
	front.mu.Lock()
	front.refundArrived, front.refundGoes = arrived, goes
	front.mu.Unlock()
	type answer struct {
		res *paymentpb.RefundPaymentResponse
		err error
	}
	done := make(chan answer, 1)
	go func() {
		r, err := s.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId(), Amount: "5.00", Reason: "asked"}, s.c.admin))
		if err != nil {
			done <- answer{err: err}
			return
		}
		done <- answer{res: r.Msg}
	}()
	<-arrived // reserved (committed before the call), the POST at Stripe
	var id string
	require.NoError(t, s.r.app.Pool().QueryRow(ctx, `SELECT id::text FROM refunds WHERE payment_id = $1`, p.GetId()).Scan(&id))
	early := refundEvent(&paymentpb.Refund{Id: id, PaymentId: p.GetId(), GatewayRefundId: "re_early", Reason: "asked"}, "refund.updated", "succeeded", 500)
	require.Contains(t, s.deliver(t, early, http.StatusServiceUnavailable), "unavailable")
	require.Equal(t, 0, s.count(t, `SELECT count(*) FROM refunds WHERE id = $1 AND status <> 'pending'`, id), "the call's refund is left to the call")
	let()
	got := <-done
	require.NoError(t, got.err, "the call records its own answer")
	r := got.res.GetRefund()
	require.Equal(t, id, r.GetId())
	require.Equal(t, "pending", r.GetStatus())
	require.Equal(t, "0.00", got.res.GetPayment().GetRefundedAmount())

	// Stripe's retry comes after the answer: taken.
	s.deliver(t, refundEvent(r, "refund.updated", "succeeded", 500), http.StatusOK)
	after := s.getPayment(t, p.GetId())
	require.Equal(t, "5.00", after.GetRefundedAmount())
	require.Equal(t, "success", after.GetStatus(), "refunded in part")
	testfixture.CheckMoneyInvariants(t, s.r.app.Pool())
}
