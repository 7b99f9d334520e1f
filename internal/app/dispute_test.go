package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/stripemock"
	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/notify/notifytest"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// Disputes over the wire (issue 39, 2): Stripe's charge.dispute.* events,
// signed as Stripe signs them, suspend the order's service, resume it when
// won, give the money back when lost, once per status change, and record
// what cannot be about a payment of ours as an anomaly.

// startStripeDisputes is startStripeAt with an admins' webhook configured,
// so the disputes' notices are queued.
func startStripeDisputes(t *testing.T, mutate ...func(*config.Config)) *stripeBundle {
	t.Helper()
	front := newStripeFront(t)
	hook := notifytest.StartWebhook(t, "webhook-secret-0123456789")
	e := startPaymentsWith(t, nil, append([]func(*config.Config){func(c *config.Config) {
		addNotifierPlugin(t, c.Plugins.Dir)
		c.Notify.Webhooks = []config.NotifyWebhook{{Name: "ops", URL: hook.URL, Secret: hook.Secret}}
	}}, mutate...)...)
	e.installGateway(t, "stripe", "stripe", nil)
	s := &stripeBundle{payBundle: e, gw: e.addGateway(t, "stripe", "Card (Stripe)", map[string]any{
		"secret_key": stripemock.Key, "webhook_secret": stripeWhsec, "api_base": front.URL,
	})}
	prod, err := e.orders.CreateProduct(context.Background(), with(&orderpb.CreateProductRequest{Name: "VPS 1G", Price: "12.30", Currency: "USD"}, e.c.admin))
	require.NoError(t, err)
	s.product = prod.Msg.GetProduct().GetId()
	return s
}

// piOf is the PaymentIntent the test's Stripe gives payment p.
func piOf(p *paymentpb.PaymentRecord) string {
	return "pi_" + strings.ReplaceAll(p.GetId(), "-", "")[:24]
}

// paidActive places an order, pays it through a completed session whose
// PaymentIntent is piOf, and waits for it to be active.
func (s *stripeBundle) paidActive(t *testing.T) (string, *paymentpb.PaymentRecord) {
	t.Helper()
	orderID, p, _ := s.pay(t)
	b, _ := json.Marshal(map[string]any{
		"id": "evt_c_" + p.GetId(), "object": "event", "type": "checkout.session.completed", "created": time.Now().Unix(),
		"data": map[string]any{"object": map[string]any{
			"id": sessionOf(p), "object": "checkout.session", "mode": "payment", "status": "complete",
			"payment_status": "paid", "amount_total": 1230, "currency": "usd", "client_reference_id": p.GetId(),
			"payment_intent": piOf(p), "metadata": map[string]any{"payment_id": p.GetId(), "order_id": p.GetOrderId()},
		}},
	})
	s.deliver(t, b, http.StatusOK)
	s.waitOrderStatus(t, orderID, "active")
	return orderID, s.getPayment(t, p.GetId())
}

// disputeEvent is Stripe's charge.dispute.* event of type typ about
// dispute id of PaymentIntent pi, in status, for amount (minor units) in
// currency.
func disputeEvent(id, pi, typ, status string, amount int, currency string) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": "evt_d_" + id + "_" + status, "object": "event", "type": typ, "api_version": stripePinned, "created": time.Now().Unix(),
		"data": map[string]any{"object": map[string]any{
			"id": id, "object": "dispute", "amount": amount, "currency": currency, "charge": "ch_" + id,
			"payment_intent": pi, "reason": "fraudulent", "status": status, "livemode": false,
			"evidence_details": map[string]any{"due_by": time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).Unix(), "has_evidence": false},
		}},
	})
	return b
}

func (s *stripeBundle) ledgerClean(t *testing.T) {
	t.Helper()
	rep, err := ledger.Verify(context.Background(), s.r.app.Pool())
	require.NoError(t, err)
	require.True(t, rep.OK(), "%s", rep)
	testfixture.CheckMoneyInvariants(t, s.r.app.Pool())
}

func (s *stripeBundle) orderRow(t *testing.T, id string) (status, reason string) {
	t.Helper()
	require.NoError(t, s.r.app.Pool().QueryRow(context.Background(), `SELECT status, suspend_reason FROM orders WHERE id = $1`, id).Scan(&status, &reason))
	return status, reason
}

func (s *stripeBundle) disputeStatus(t *testing.T, id string) string {
	t.Helper()
	var st string
	require.NoError(t, s.r.app.Pool().QueryRow(context.Background(), `SELECT status FROM disputes WHERE gateway_dispute_id = $1`, id).Scan(&st))
	return st
}

func TestDisputeSuspendsOnCreationAndALostOneGivesTheMoneyBackOnce(t *testing.T) {
	t.Parallel()
	s := startStripeDisputes(t)
	orderID, p := s.paidActive(t)
	pi := piOf(p)
	notices := func() int {
		return s.count(t, `SELECT count(*) FROM notifications WHERE event_id IS NULL AND body LIKE '%' || $1 || '%'`, "dp_full")
	}
	suspensions := func() int {
		return s.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'service_suspended'`, orderID)
	}

	created := disputeEvent("dp_full", pi, "charge.dispute.created", "needs_response", 1230, "usd")
	s.deliver(t, created, http.StatusOK)
	require.Equal(t, "needs_response", s.disputeStatus(t, "dp_full"))
	st, reason := s.orderRow(t, orderID)
	require.Equal(t, "suspended", st)
	require.Equal(t, "dispute", reason)
	require.Equal(t, 1, suspensions())
	require.Equal(t, 1, notices(), "the admins are told")
	var due time.Time
	require.NoError(t, s.r.app.Pool().QueryRow(context.Background(), `SELECT evidence_due_by FROM disputes WHERE gateway_dispute_id = 'dp_full'`).Scan(&due))
	require.True(t, due.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)), "%s", due)

	// Replays change nothing: one suspension, one notice.
	for range 3 {
		s.deliver(t, created, http.StatusOK)
	}
	require.Equal(t, 1, suspensions())
	require.Equal(t, 1, notices())

	// Under review: recorded, still suspended, not suspended again.
	s.deliver(t, disputeEvent("dp_full", pi, "charge.dispute.updated", "under_review", 1230, "usd"), http.StatusOK)
	require.Equal(t, "under_review", s.disputeStatus(t, "dp_full"))
	require.Equal(t, 1, suspensions())
	require.Equal(t, 2, notices())

	// Lost in full: the money went back; the order ends as a full refund
	// ends it.
	lost := disputeEvent("dp_full", pi, "charge.dispute.closed", "lost", 1230, "usd")
	s.deliver(t, lost, http.StatusOK)
	s.deliver(t, lost, http.StatusOK)
	s.ledgerClean(t) // the refunds, the payment and the order agree
	got := s.getPayment(t, p.GetId())
	require.Equal(t, "refunded", got.GetStatus())
	require.Equal(t, "12.30", got.GetRefundedAmount())
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM refunds WHERE payment_id = $1 AND status = 'succeeded' AND gateway_refund_id = 'dp_full'`, p.GetId()))
	st, _ = s.orderRow(t, orderID)
	require.Equal(t, "refunded", st)
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_refunded'`, orderID))
	require.Equal(t, 3, notices())
	// The trends count the money gone back (their rollups are fed as a
	// refund's are).
	require.Equal(t, 1230, s.count(t, `SELECT (coalesce((SELECT sum(refunded_cents) FROM payment_trend_currency_changes WHERE currency = 'USD'), 0)
		+ coalesce((SELECT sum(refunded_cents) FROM payment_trend_currency_quarters WHERE currency = 'USD'), 0))::int`))
	// A late update after the close changes nothing.
	s.deliver(t, disputeEvent("dp_full", pi, "charge.dispute.updated", "under_review", 1230, "usd"), http.StatusOK)
	require.Equal(t, "lost", s.disputeStatus(t, "dp_full"))
	s.ledgerClean(t)
}

func TestDisputeWonResumesAndAPartlyLostOneLeavesTheOrderActive(t *testing.T) {
	t.Parallel()
	s := startStripeDisputes(t)

	// Won: the dispute's suspension is lifted.
	wonOrder, wp := s.paidActive(t)
	s.deliver(t, disputeEvent("dp_won", piOf(wp), "charge.dispute.created", "needs_response", 1230, "usd"), http.StatusOK)
	st, _ := s.orderRow(t, wonOrder)
	require.Equal(t, "suspended", st)
	won := disputeEvent("dp_won", piOf(wp), "charge.dispute.closed", "won", 1230, "usd")
	s.deliver(t, won, http.StatusOK)
	s.deliver(t, won, http.StatusOK)
	st, reason := s.orderRow(t, wonOrder)
	require.Equal(t, "active", st)
	require.Empty(t, reason)
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'service_resumed'`, wonOrder))
	require.Equal(t, "0.00", s.getPayment(t, wp.GetId()).GetRefundedAmount())

	// Lost in part: 5.00 went back, the payment stays success, the order
	// runs again.
	partOrder, pp := s.paidActive(t)
	s.deliver(t, disputeEvent("dp_part", piOf(pp), "charge.dispute.created", "warning_needs_response", 500, "usd"), http.StatusOK)
	st, _ = s.orderRow(t, partOrder)
	require.Equal(t, "suspended", st)
	s.deliver(t, disputeEvent("dp_part", piOf(pp), "charge.dispute.closed", "lost", 500, "usd"), http.StatusOK)
	got := s.getPayment(t, pp.GetId())
	require.Equal(t, "success", got.GetStatus())
	require.Equal(t, "5.00", got.GetRefundedAmount())
	st, _ = s.orderRow(t, partOrder)
	require.Equal(t, "active", st)
	// What is left is still refundable, and no more.
	_, err := s.payments.RefundPayment(context.Background(), with(&paymentpb.RefundPaymentRequest{PaymentId: pp.GetId(), Amount: "7.31"}, s.c.admin))
	require.Error(t, err, "only 7.30 is left")

	// An admin's suspension survives a won dispute.
	adminOrder, ap := s.paidActive(t)
	_, err = s.r.app.Pool().Exec(context.Background(), `UPDATE orders SET status = 'suspended', suspend_reason = 'admin' WHERE id = $1`, adminOrder)
	require.NoError(t, err)
	s.deliver(t, disputeEvent("dp_admin", piOf(ap), "charge.dispute.created", "needs_response", 1230, "usd"), http.StatusOK)
	s.deliver(t, disputeEvent("dp_admin", piOf(ap), "charge.dispute.closed", "won", 1230, "usd"), http.StatusOK)
	st, reason = s.orderRow(t, adminOrder)
	require.Equal(t, "suspended", st)
	require.Equal(t, "admin", reason)
	s.ledgerClean(t)

	// The queue: the nearest evidence deadline first, with the links.
	_, err = s.r.app.Pool().Exec(context.Background(), `UPDATE disputes SET evidence_due_by = CASE gateway_dispute_id
		WHEN 'dp_part' THEN '2030-01-01T00:00:00Z'::timestamptz WHEN 'dp_won' THEN NULL ELSE evidence_due_by END`)
	require.NoError(t, err)
	admin := paymentpbconnect.NewPaymentAdminServiceClient(http.DefaultClient, s.r.baseURL)
	list, err := admin.ListDisputes(context.Background(), with(&paymentpb.ListDisputesRequest{}, s.c.admin))
	require.NoError(t, err)
	var ids []string
	for _, d := range list.Msg.GetDisputes() {
		ids = append(ids, d.GetGatewayDisputeId())
	}
	require.Equal(t, []string{"dp_part", "dp_admin", "dp_won"}, ids)
	first := list.Msg.GetDisputes()[0]
	require.Equal(t, pp.GetId(), first.GetPaymentId())
	require.Equal(t, partOrder, first.GetOrderId())
	var customer string
	require.NoError(t, s.r.app.Pool().QueryRow(context.Background(), `SELECT customer_id::text FROM orders WHERE id = $1`, partOrder).Scan(&customer))
	require.Equal(t, customer, first.GetCustomerId())
	require.Equal(t, "5.00", first.GetAmount())
	require.Equal(t, "lost", first.GetStatus())
	require.NotEmpty(t, first.GetRefundId())
	require.Equal(t, "2030-01-01T00:00:00Z", first.GetEvidenceDueBy())
	wonOnly, err := admin.ListDisputes(context.Background(), with(&paymentpb.ListDisputesRequest{Status: proto.String("won")}, s.c.admin))
	require.NoError(t, err)
	require.Len(t, wonOnly.Msg.GetDisputes(), 2)
	_, err = admin.ListDisputes(context.Background(), with(&paymentpb.ListDisputesRequest{}, s.c.customer))
	require.Error(t, err, "admins only")
}

func TestDisputeOfAnUnknownPaymentAnotherCurrencyOrTooMuchIsAnAnomalyAndChangesNothing(t *testing.T) {
	t.Parallel()
	s := startStripeDisputes(t)
	orderID, p := s.paidActive(t)
	anomalies := func(kind string) int {
		return s.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND after->>'kind' = $1`, kind)
	}

	unknown := disputeEvent("dp_unknown", "pi_nobodyknowsthisone", "charge.dispute.created", "needs_response", 1230, "usd")
	s.deliver(t, unknown, http.StatusNotFound)
	s.deliver(t, unknown, http.StatusNotFound)
	require.Equal(t, 1, anomalies("dispute_unknown_payment"), "recorded once")

	s.deliver(t, disputeEvent("dp_eur", piOf(p), "charge.dispute.created", "needs_response", 1230, "eur"), http.StatusBadRequest)
	require.Equal(t, 1, anomalies("dispute_currency_mismatch"))

	tooMuch := disputeEvent("dp_much", piOf(p), "charge.dispute.created", "needs_response", 1231, "usd")
	s.deliver(t, tooMuch, http.StatusBadRequest)
	s.deliver(t, disputeEvent("dp_much", piOf(p), "charge.dispute.closed", "lost", 1231, "usd"), http.StatusBadRequest)
	require.Equal(t, 2, anomalies("dispute_amount_exceeds_payment"), "one per report")

	require.Zero(t, s.count(t, `SELECT count(*) FROM disputes`))
	st, _ := s.orderRow(t, orderID)
	require.Equal(t, "active", st)
	got := s.getPayment(t, p.GetId())
	require.Equal(t, "success", got.GetStatus())
	require.Equal(t, "0.00", got.GetRefundedAmount())
	require.Zero(t, s.count(t, `SELECT count(*) FROM notifications WHERE event_id IS NULL`))
	s.ledgerClean(t)
}

func TestDisputeWithSuspendOffOnlyRecordsAndTells(t *testing.T) {
	t.Parallel()
	s := startStripeDisputes(t, func(c *config.Config) { c.Disputes.Suspend = false })
	orderID, p := s.paidActive(t)
	s.deliver(t, disputeEvent("dp_off", piOf(p), "charge.dispute.created", "needs_response", 1230, "usd"), http.StatusOK)
	require.Equal(t, "needs_response", s.disputeStatus(t, "dp_off"))
	st, _ := s.orderRow(t, orderID)
	require.Equal(t, "active", st)
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM notifications WHERE event_id IS NULL`))
}

// Two disputes of one order (found writing the renewal model's rule):
// the first one closed, won or lost in part, while the other is still
// open leaves the order suspended for the open one; the last one closed
// resumes it.
func TestADisputeClosedWhileAnotherOfTheOrderIsOpenKeepsItSuspended(t *testing.T) {
	t.Parallel()
	s := startStripeDisputes(t)
	orderID, p := s.paidActive(t)
	pi := piOf(p)
	s.deliver(t, disputeEvent("dp_first", pi, "charge.dispute.created", "needs_response", 500, "usd"), http.StatusOK)
	s.deliver(t, disputeEvent("dp_second", pi, "charge.dispute.created", "needs_response", 300, "usd"), http.StatusOK)
	st, reason := s.orderRow(t, orderID)
	require.Equal(t, "suspended", st)
	require.Equal(t, "dispute", reason)

	s.deliver(t, disputeEvent("dp_first", pi, "charge.dispute.closed", "won", 500, "usd"), http.StatusOK)
	st, reason = s.orderRow(t, orderID)
	require.Equal(t, "suspended", st, "dp_second is still open")
	require.Equal(t, "dispute", reason)

	s.deliver(t, disputeEvent("dp_second", pi, "charge.dispute.closed", "lost", 300, "usd"), http.StatusOK)
	st, reason = s.orderRow(t, orderID)
	require.Equal(t, "active", st, "the last open dispute closed")
	require.Empty(t, reason)
	require.Equal(t, "3.00", s.getPayment(t, p.GetId()).GetRefundedAmount())
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'service_resumed'`, orderID))
	s.ledgerClean(t)
}
