package renewal_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"pgregory.net/rapid"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/store"
)

// Disputes in the model (issue 39, 2): Stripe's charge.dispute.* events,
// signed as Stripe signs them, about the saved card's charges (the
// model's only Stripe payments) — opened for the whole payment or a part,
// moved under review, won or lost, reported twice — and events that
// cannot be about one of them (more than the payment, another currency,
// an epay payment Stripe never saw), which must change nothing.

// modelDispute is a dispute the model opened at its Stripe.
type modelDispute struct {
	id  string
	pay uuid.UUID
	// order is the order of its payment (nil: none).
	order  *uuid.UUID
	pi     string
	amount money.Amount
	status string
}

func (d *modelDispute) open() bool { return d.status != "won" && d.status != "lost" }

// anyOpen: one of ds is open.
func anyOpen(ds []*modelDispute) bool {
	for _, d := range ds {
		if d.open() {
			return true
		}
	}
	return false
}

// disputeCounts counts what the dispute actions did (the test's log).
type disputeCounts struct {
	opened, won, lost, lostInFull, updated, replayed, invalid int
}

// disputedPay is a Stripe payment of the customer as the model reads it.
type disputedPay struct {
	ID       uuid.UUID
	Amount   money.Amount
	Refunded money.Amount
	Status   string
	Tx       string
	Order    *uuid.UUID
	Invoice  *uuid.UUID
}

// stripePays are the customer's settled saved-card payments: those Stripe
// can see disputed.
func (s *modelSeq) stripePays() []disputedPay {
	rows, err := s.b.pool.Query(context.Background(), `SELECT p.id, p.amount, p.refunded_amount, p.status, p.gateway_tx_id,
		coalesce(p.order_id, i.order_id), p.invoice_id
		FROM payments p LEFT JOIN invoices i ON i.id = p.invoice_id
		WHERE p.customer_id = $1 AND p.gateway_interface_id = $2 AND p.status IN ('success', 'refunded') AND p.gateway_tx_id IS NOT NULL
		ORDER BY p.created_at, p.id`, s.customer, s.w.card.gw.InterfaceID)
	if err != nil {
		s.rt.Fatalf("stripe payments: %v", err)
	}
	ps, err := pgx.CollectRows(rows, pgx.RowToStructByPos[disputedPay])
	if err != nil {
		s.rt.Fatalf("stripe payments: %v", err)
	}
	return ps
}

func (s *modelSeq) stripePay(id uuid.UUID) disputedPay {
	for _, p := range s.stripePays() {
		if p.ID == id {
			return p
		}
	}
	s.rt.Fatalf("stripe payment %s is gone", id)
	return disputedPay{}
}

// deliverDispute signs and delivers Stripe's event of type typ about
// dispute id of PaymentIntent pi, now in status, for cents in currency,
// and answers the service's error.
func (s *modelSeq) deliverDispute(id, pi, typ, status string, cents int64, currency string) error {
	now := time.Now()
	body, err := json.Marshal(map[string]any{
		"id": "evt_" + id + "_" + status, "object": "event", "type": typ, "created": now.Unix(),
		"data": map[string]any{"object": map[string]any{
			"id": id, "object": "dispute", "amount": cents, "currency": currency, "charge": "ch_" + id,
			"payment_intent": pi, "reason": "fraudulent", "status": status, "livemode": false,
			"evidence_details": map[string]any{"due_by": s.clock.Now().Add(7 * 24 * time.Hour).Unix(), "has_evidence": false},
		}},
	})
	if err != nil {
		s.rt.Fatalf("dispute event: %v", err)
	}
	mac := hmac.New(sha256.New, []byte("whsec_model"))
	fmt.Fprintf(mac, "%d.%s", now.Unix(), body)
	sig := fmt.Sprintf("t=%d,v1=%s", now.Unix(), hex.EncodeToString(mac.Sum(nil)))
	_, err = s.w.pays.HandleCallback(context.Background(), payment.Callback{GatewayInterfaceID: s.w.card.gw.InterfaceID, Method: http.MethodPost,
		ContentType: "application/json", Payload: string(body), Headers: map[string]string{"stripe-signature": sig}})
	noInternal(s.rt, "the dispute event "+typ+" "+status+" of "+id, err)
	return err
}

// orderOf is the model's order with id (nil: none of them).
func orderOf(orders []*modelOrder, id *uuid.UUID) *modelOrder {
	for _, o := range orders {
		if id != nil && o.id == *id {
			return o
		}
	}
	return nil
}

// openDispute opens a dispute of a settled saved-card payment, for all of
// it or a part, and checks: the order's running service suspended with
// reason dispute; one suspended for another reason, or no longer
// running, left as it was; no money moved.
func (s *modelSeq) openDispute(orders []*modelOrder, card *bool, ds *[]*modelDispute, n *disputeCounts) {
	ps := s.stripePays()
	if len(ps) == 0 {
		// Nothing charged yet: the customer saves a card (if they had
		// none), it succeeds from now on, and time passes to an order's
		// next due day, when the leader charges it for what the balance
		// does not cover.
		if !*card {
			s.w.card.saveCard(s.tb, s.b, s.customer, s.clock.Now())
			*card = true
		}
		s.w.card.setMode(cardSucceeds)
		o := rapid.SampledFrom(orders).Draw(s.rt, "charged order")
		per := s.b.periods(s.tb, o.id)
		due := per[len(per)-1].StartsAt
		if per[len(per)-1].Status == store.PeriodPaid {
			due = per[len(per)-1].EndsAt
		}
		if due = due.Add(time.Hour); s.clock.Now().Before(due) {
			s.clock.Set(due)
		}
		s.pass()
		ps = s.stripePays()
	}
	if len(ps) == 0 {
		return
	}
	p := rapid.SampledFrom(ps).Draw(s.rt, "disputed payment")
	amount := p.Amount
	if rapid.Bool().Draw(s.rt, "a part") && p.Amount.Cmp(money.MustParse("1.00")) > 0 {
		amount = money.MustParse("1.00")
	}
	o := orderOf(orders, p.Order)
	var before store.Order
	if o != nil {
		before = s.b.order(s.tb, o.id)
	}
	d := &modelDispute{id: "dp_" + uuid.NewString()[:12], pay: p.ID, order: p.Order, pi: p.Tx, amount: amount,
		status: rapid.SampledFrom([]string{"warning_needs_response", "needs_response"}).Draw(s.rt, "opened as")}
	if err := s.deliverDispute(d.id, d.pi, "charge.dispute.created", d.status, amount.Cents(), "cny"); err != nil {
		s.rt.Fatalf("dispute %s of payment %s refused: %v", d.id, p.ID, err)
	}
	*ds = append(*ds, d)
	n.opened++
	s.checkDisputeRow(d)
	if got := s.stripePay(p.ID); !got.Refunded.Equal(p.Refunded) || got.Status != p.Status {
		s.rt.Fatalf("an opened dispute moved money: payment %s %s/%s refunded, was %s/%s", p.ID, got.Status, got.Refunded, p.Status, p.Refunded)
	}
	if o == nil {
		return
	}
	after := s.b.order(s.tb, o.id)
	if before.Status == string(order.StatusActive) {
		if after.Status != string(order.StatusSuspended) || after.SuspendReason != order.SuspendReasonDispute {
			s.rt.Fatalf("dispute %s opened: order %s is %s (%s), want suspended for the dispute", d.id, o.id, after.Status, after.SuspendReason)
		}
		o.disputeSuspended = true
		return
	}
	if after.Status != before.Status || after.SuspendReason != before.SuspendReason {
		s.rt.Fatalf("dispute %s opened: order %s went %s (%s) → %s (%s), want left alone", d.id, o.id,
			before.Status, before.SuspendReason, after.Status, after.SuspendReason)
	}
}

// moveDispute moves an open dispute: under review (nothing but the row
// changes), won (the dispute's suspension lifted; an admin's or an
// overdue one stays), lost (the amount recorded as money gone back: the
// order ends as a refund of that much ends it, or resumes), or reports
// its status again (nothing changes).
func (s *modelSeq) moveDispute(orders []*modelOrder, ds []*modelDispute, n *disputeCounts) {
	var open []*modelDispute
	for _, d := range ds {
		if d.open() {
			open = append(open, d)
		}
	}
	if len(open) == 0 {
		return
	}
	d := rapid.SampledFrom(open).Draw(s.rt, "dispute")
	to := rapid.SampledFrom([]string{"under_review", "won", "lost", "lost", "again"}).Draw(s.rt, "dispute to")
	replay := to == "again" || to == d.status
	if to == "again" {
		to = d.status
	}
	typ := "charge.dispute.updated"
	if to == "won" || to == "lost" {
		typ = "charge.dispute.closed"
	}
	p := s.stripePay(d.pay)
	o := orderOf(orders, p.Order)
	var before store.Order
	var live bool
	var periods []store.ServicePeriod
	if o != nil {
		before = s.b.order(s.tb, o.id)
		live = order.Status(before.Status).Live()
		periods = s.b.periods(s.tb, o.id)
	}
	// Lost for more than is left to give back (an admin refunded part of
	// the payment since): refused as an anomaly, nothing changes.
	left, err := p.Amount.Sub(p.Refunded)
	if err != nil {
		s.rt.Fatalf("%v", err)
	}
	var reserved money.Amount
	if err := s.b.pool.QueryRow(context.Background(), `SELECT coalesce(sum(amount), 0) FROM refunds WHERE payment_id = $1 AND status IN ('pending', 'succeeded')`,
		p.ID).Scan(&reserved); err != nil {
		s.rt.Fatalf("reserved: %v", err)
	}
	if r, err := p.Amount.Sub(reserved); err == nil && r.Cmp(left) < 0 {
		left = r
	}
	tooMuch := to == "lost" && !replay && (d.amount.Cmp(left) > 0 || p.Status != "success")
	err = s.deliverDispute(d.id, d.pi, typ, to, d.amount.Cents(), "cny")
	if tooMuch {
		if kindOf(err) != apperr.InvalidArgument {
			s.rt.Fatalf("dispute %s lost for %s of payment %s with %s left to refund: %v, want InvalidArgument", d.id, d.amount, p.ID, left, err)
		}
		n.invalid++
		s.unchanged(o, before, p, d)
		return
	}
	if err != nil {
		s.rt.Fatalf("dispute %s to %s refused: %v", d.id, to, err)
	}
	if replay {
		n.replayed++
		s.unchanged(o, before, p, d)
		return
	}
	d.status = to
	s.checkDisputeRow(d)
	got := s.stripePay(p.ID)
	gone, err := got.Refunded.Sub(p.Refunded)
	if err != nil {
		s.rt.Fatalf("%v", err)
	}
	if to != "lost" {
		if !gone.IsZero() {
			s.rt.Fatalf("dispute %s %s gave %s back", d.id, to, gone)
		}
	} else if !gone.Equal(d.amount) {
		s.rt.Fatalf("dispute %s lost for %s: payment %s's money gone back grew by %s", d.id, d.amount, p.ID, gone)
	}
	switch to {
	case "under_review":
		n.updated++
	case "won":
		n.won++
	case "lost":
		n.lost++
	}
	if o == nil {
		return
	}
	after := s.b.order(s.tb, o.id)
	if to == "under_review" {
		if after.Status != before.Status || after.SuspendReason != before.SuspendReason {
			s.rt.Fatalf("dispute %s under review: order %s went %s → %s", d.id, o.id, before.Status, after.Status)
		}
		return
	}
	if to == "lost" && got.Status == "refunded" {
		n.lostInFull++
		// The refund rule (docs/operations.md, "Refunds and periods"), as
		// "refund a period's payment" checks it.
		if ends, p := s.refundEnds(o, periods, got, live); ends {
			if after.Status != string(order.StatusTerminated) {
				s.rt.Fatalf("dispute %s lost in full of period %d's payment: order %s is %s, want terminated as a full refund ends it", d.id, p, o.id, after.Status)
			}
			o.ended(s.tb, s.b, store.Timestamp(s.clock.Now()))
			o.disputeSuspended = false
			return
		}
	}
	// Won, or lost without ending the service: the dispute's suspension
	// lifted once no other dispute of the order's payments is open; any
	// other suspension left.
	others := 0
	for _, e := range ds {
		if e != d && e.open() && e.order != nil && *e.order == o.id {
			others++
		}
	}
	if others > 0 && before.Status == string(order.StatusSuspended) && before.SuspendReason == order.SuspendReasonDispute {
		if after.Status != before.Status || after.SuspendReason != before.SuspendReason {
			s.rt.Fatalf("dispute %s %s with %d other dispute(s) of order %s open: it went %s (%s), want still suspended for them",
				d.id, to, others, o.id, after.Status, after.SuspendReason)
		}
		return
	}
	if before.Status == string(order.StatusSuspended) && before.SuspendReason == order.SuspendReasonDispute {
		if after.Status != string(order.StatusActive) {
			s.rt.Fatalf("dispute %s %s: order %s suspended for it is %s (%s), want resumed", d.id, to, o.id, after.Status, after.SuspendReason)
		}
		o.disputeSuspended = false
		return
	}
	if after.Status != before.Status || after.SuspendReason != before.SuspendReason {
		s.rt.Fatalf("dispute %s %s: order %s went %s (%s) → %s (%s), want left alone", d.id, to, o.id,
			before.Status, before.SuspendReason, after.Status, after.SuspendReason)
	}
}

// refundEnds says whether payment p refunded in full ends order o now:
// it bought a period (as it was before, in periods) still running whose
// payments now hold nothing.
func (s *modelSeq) refundEnds(o *modelOrder, periods []store.ServicePeriod, p disputedPay, live bool) (bool, int32) {
	now := store.Timestamp(s.clock.Now())
	for _, per := range periods {
		if per.Status != store.PeriodPaid {
			continue
		}
		pays := s.b.periodPayments(s.tb, o.id, per)
		mine := false
		held := money.Zero()
		for _, id := range pays {
			got, err := store.Q(s.b.pool).GetPayment(context.Background(), id)
			if err != nil {
				s.rt.Fatalf("%v", err)
			}
			mine = mine || id == p.ID
			net, _ := got.Amount.Sub(got.RefundedAmount)
			held, _ = held.Add(net)
		}
		if mine {
			return live && now.Before(per.EndsAt) && held.Sign() <= 0 && (per.Outcome == nil || *per.Outcome == store.OutcomeRenewed), per.Seq
		}
	}
	return false, 0
}

// invalidDispute delivers a dispute that cannot be about one of the
// customer's payments: for more than the payment, in another currency, or
// of an epay payment (a PaymentIntent Stripe never made) — an anomaly, and
// nothing changes.
func (s *modelSeq) invalidDispute(orders []*modelOrder, n *disputeCounts) {
	ps := s.stripePays()
	kind := rapid.SampledFrom([]string{"too much", "another currency", "unknown payment"}).Draw(s.rt, "invalid dispute")
	if len(ps) == 0 {
		kind = "unknown payment"
	}
	id := "dp_" + uuid.NewString()[:12]
	var anomalies int
	count := func() int {
		if err := s.b.pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly'`).Scan(&anomalies); err != nil {
			s.rt.Fatalf("%v", err)
		}
		return anomalies
	}
	was := count()
	snap := s.snapshot(orders)
	if kind == "unknown payment" {
		pi := "pi_nowhere" + id
		if gps := *s.gps; len(gps) > 0 {
			pi = rapid.SampledFrom(gps).Draw(s.rt, "epay payment").id.String()
		}
		if err := s.deliverDispute(id, pi, "charge.dispute.created", "needs_response", 100, "cny"); kindOf(err) != apperr.NotFound {
			s.rt.Fatalf("dispute %s of an unknown payment %s: %v, want NotFound", id, pi, err)
		}
	} else {
		p := rapid.SampledFrom(ps).Draw(s.rt, "payment")
		cents, cur := p.Amount.Cents()+1, "cny"
		if kind == "another currency" {
			cents, cur = p.Amount.Cents(), "usd"
		}
		if err := s.deliverDispute(id, p.Tx, "charge.dispute.created", "needs_response", cents, cur); kindOf(err) != apperr.InvalidArgument {
			s.rt.Fatalf("dispute %s (%s) of payment %s: %v, want InvalidArgument", id, kind, p.ID, err)
		}
	}
	n.invalid++
	if count() != was+1 {
		s.rt.Fatalf("dispute %s (%s): %d anomalies recorded, want 1", id, kind, anomalies-was)
	}
	if got := s.snapshot(orders); got != snap {
		s.rt.Fatalf("dispute %s (%s) changed something:\n%s\nwas\n%s", id, kind, got, snap)
	}
}

// snapshot is what a dispute could change: the orders' statuses, the
// customer's payments' refunds, the disputes recorded.
func (s *modelSeq) snapshot(orders []*modelOrder) string {
	var out string
	for _, o := range orders {
		ord := s.b.order(s.tb, o.id)
		out += fmt.Sprintf("order %s %s %s %v\n", o.id, ord.Status, ord.SuspendReason, ord.PaidUntil)
	}
	var sum string
	if err := s.b.pool.QueryRow(context.Background(), `SELECT concat((SELECT string_agg(id::text || ' ' || status || ' ' || refunded_amount::text, ',' ORDER BY id)
		FROM payments WHERE customer_id = $1), ';', (SELECT count(*) FROM disputes), ';', (SELECT count(*) FROM refunds))`, s.customer).Scan(&sum); err != nil {
		s.rt.Fatalf("%v", err)
	}
	return out + sum
}

// unchanged checks a refused or replayed report left dispute d, payment p
// and order o (as before) as they were.
func (s *modelSeq) unchanged(o *modelOrder, before store.Order, p disputedPay, d *modelDispute) {
	s.checkDisputeRow(d)
	if got := s.stripePay(p.ID); !got.Refunded.Equal(p.Refunded) || got.Status != p.Status {
		s.rt.Fatalf("dispute %s's refused or replayed report moved money: payment %s %s/%s, was %s/%s", d.id, p.ID, got.Status, got.Refunded, p.Status, p.Refunded)
	}
	if o != nil {
		after := s.b.order(s.tb, o.id)
		if after.Status != before.Status || after.SuspendReason != before.SuspendReason {
			s.rt.Fatalf("dispute %s's refused or replayed report moved order %s: %s → %s", d.id, o.id, before.Status, after.Status)
		}
	}
}

// checkDisputeRow: the dispute is recorded once, in the model's status,
// and a lost one names its refund, succeeded for its amount.
func (s *modelSeq) checkDisputeRow(d *modelDispute) {
	var status string
	var refund *money.Amount
	err := s.b.pool.QueryRow(context.Background(), `SELECT d.status, r.amount FROM disputes d LEFT JOIN refunds r ON r.id = d.refund_id AND r.status = 'succeeded'
		WHERE d.gateway_dispute_id = $1 AND d.payment_id = $2`, d.id, d.pay).Scan(&status, &refund)
	if err != nil {
		s.rt.Fatalf("dispute %s: %v", d.id, err)
	}
	if status != d.status {
		s.rt.Fatalf("dispute %s recorded %s, the gateway said %s", d.id, status, d.status)
	}
	if (d.status == "lost") != (refund != nil) || (refund != nil && !refund.Equal(d.amount)) {
		s.rt.Fatalf("dispute %s %s for %s: its refund %v", d.id, d.status, d.amount, refund)
	}
}

// checkDisputeHold: an order a dispute suspended stays suspended for it
// until the dispute is won or lost, or the service ends.
func (s *modelSeq) checkDisputeHold(o *modelOrder) {
	if !o.disputeSuspended {
		return
	}
	ord := s.b.order(s.tb, o.id)
	switch order.Status(ord.Status) {
	case order.StatusSuspended:
		if ord.SuspendReason != order.SuspendReasonDispute {
			s.rt.Fatalf("order %s suspended for a dispute is now suspended for %s", o.id, ord.SuspendReason)
		}
	case order.StatusTerminated, order.StatusCompleted, order.StatusRefunded:
		o.disputeSuspended = false
	default:
		s.rt.Fatalf("order %s suspended for an open dispute is %s", o.id, ord.Status)
	}
}

// kindOf is err's apperr kind ("" when it has none).
func kindOf(err error) apperr.Kind {
	k, _ := apperr.KindOf(err)
	return k
}
