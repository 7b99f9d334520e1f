package renewal_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testkit"
)

// modelProduct is one product of the model's catalogue: the orders change
// to them (dearer, cheaper or the same price as the 7.00 they start at, in
// each cycle).
type modelProduct struct {
	id    uuid.UUID
	price money.Amount
	cycle string
}

// modelPrices are the catalogue's prices, in every cycle.
var modelPrices = []string{"3.10", "7.00", "9.99", "13.37"}

// modelCatalogue inserts the model's products, once for every sequence.
func modelCatalogue(t *testing.T, b *bundle) []modelProduct {
	t.Helper()
	var out []modelProduct
	for _, cycle := range []string{"monthly", "quarterly", "annual"} {
		for _, price := range modelPrices {
			p := modelProduct{price: money.MustParse(price), cycle: cycle}
			require.NoError(t, b.pool.QueryRow(context.Background(), `INSERT INTO products (name, price, currency, billing_cycle)
				VALUES ($1, $2, 'CNY', $3) RETURNING id`, "VPS "+price+" "+cycle, p.price, cycle).Scan(&p.id))
			out = append(out, p)
		}
	}
	return out
}

// modelChange is the order's pending plan change, as the model knows it.
type modelChange struct {
	id      uuid.UUID
	when    string
	to      modelProduct
	invoice *uuid.UUID // an upgrade's proration invoice
	lapseAt time.Time
}

// modelSeq is what the plan change actions of one sequence work with.
type modelSeq struct {
	rt       *rapid.T
	tb       propertyTB
	b        *bundle
	w        *payWorld
	customer uuid.UUID
	clock    *testkit.Clock
	products []modelProduct
	pass     func()
	// lastPass is the billing clock's time of the last whole pass.
	lastPass time.Time
	gps      *[]*gatewayPayment
	// changes counts what the plan change actions did (the test's log).
	changes *planCounts
}

// planCounts are the plan changes a run made, by what became of them.
type planCounts struct {
	upgrades, downgrades, periodEnd, cancelled, lapsed, prorationsPaid int
	refused                                                            map[string]int
}

// prorate is the model's own proration: (new − old) × the unused seconds
// of [start, end) over its seconds, rounded once, half to even, to the
// cent (docs/operations.md, "Plan changes").
func prorate(old, new money.Amount, start, end, now time.Time) money.Amount {
	total := int64(end.Sub(start) / time.Second)
	unused := int64(end.Sub(now) / time.Second)
	unused = max(0, min(unused, total))
	r := halfEven(new.Cents()-old.Cents(), unused, total)
	a, err := money.FromCents(r)
	if err != nil {
		panic(err)
	}
	return a
}

// halfEven is n × num / den rounded half to even, with big integers.
func halfEven(n, num, den int64) int64 {
	x := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(n), big.NewInt(num)), big.NewInt(den))
	q, r := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
	// Compare 2|r| with the denominator: over is away from zero, exactly
	// half to the even quotient.
	twice := new(big.Int).Mul(new(big.Int).Abs(r), big.NewInt(2))
	switch c := twice.Cmp(x.Denom()); {
	case c > 0 || (c == 0 && q.Bit(0) == 1):
		if x.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return q.Int64()
}

func (s *modelSeq) balance() money.Amount {
	var v money.Amount
	require.NoError(s.tb, s.b.pool.QueryRow(context.Background(), `SELECT balance FROM customers WHERE id = $1`, s.customer).Scan(&v))
	return v
}

// current is the order's current period as a plan change reads it (the
// last one not cancelled), and whether a change may be asked now: paid,
// running, its successor not billed.
func (s *modelSeq) current(o *modelOrder) (store.ServicePeriod, bool) {
	ps := s.b.periods(s.tb, o.id)
	last := ps[len(ps)-1]
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i].Status != store.PeriodCancelled {
			last = ps[i]
			break
		}
	}
	now := s.clock.Now()
	return last, last.Status == store.PeriodPaid && !last.Followed && last.Outcome == nil && !last.StartsAt.After(now) && last.EndsAt.After(now)
}

// changePlan: the customer or an admin changes an order's plan, now or at
// the period end, to any product of the catalogue (refused when the rules
// say so: the model predicts which).
func (s *modelSeq) changePlan(o *modelOrder, when string) {
	rt, tb := s.rt, s.tb
	// Mostly a product of the order's cycle (a change of cycle now is
	// refused).
	choice := s.products
	if rapid.IntRange(0, 4).Draw(rt, "another cycle") > 0 {
		choice = nil
		for _, p := range s.products {
			if p.cycle == o.cycle {
				choice = append(choice, p)
			}
		}
	}
	prod := rapid.SampledFrom(choice).Draw(rt, "product")
	if rapid.Bool().Draw(rt, "balance covers it") {
		topUp(tb, s.b, s.customer, "14.00", s.clock.Now())
	}
	who := asCustomer(s.customer)
	if rapid.Bool().Draw(rt, "by an admin") {
		who = s.w.admin
	}
	ord := s.b.order(tb, o.id)
	last, running := s.current(o)
	var why string
	switch {
	case order.Status(ord.Status) != order.StatusActive:
		why = "not active"
	case o.pending != nil:
		why = "a change pending"
	case when == store.PlanChangePeriodEnd && !ord.Renews:
		why = "does not renew"
	case o.product != nil && *o.product == prod.id:
		why = "the same product"
	case when == store.PlanChangeNow && prod.cycle != o.cycle:
		why = "a change of cycle now"
	case !running:
		why = "next period billed already"
	}
	held := s.held(o, last)
	before := s.balance()
	now := s.clock.Now()
	res, err := s.w.orders.ChangeOrderPlan(who, o.id, prod.id, when)
	noInternal(rt, "ChangeOrderPlan", err)
	if why != "" {
		if err == nil {
			rt.Fatalf("ChangeOrderPlan of order %s (%s) to %s %s %s accepted; the model says refused: %s", o.id, ord.Status, prod.price, prod.cycle, when, why)
		}
		s.changes.refused[why]++
		return
	}
	if err != nil {
		rt.Fatalf("ChangeOrderPlan of order %s to %s %s %s refused: %v", o.id, prod.price, prod.cycle, when, err)
	}
	ch := res.Change
	require.Equal(tb, store.PlanChangePending == ch.Status || store.PlanChangeApplied == ch.Status, true, "status %s", ch.Status)
	if when == store.PlanChangePeriodEnd {
		require.Equal(tb, store.PlanChangePending, ch.Status)
		require.NotNil(tb, ch.EffectiveAt)
		require.True(tb, ch.EffectiveAt.Equal(last.EndsAt), "a period-end change takes effect at the paid end %s, not %s", last.EndsAt, ch.EffectiveAt)
		o.pending = &modelChange{id: ch.ID, when: when, to: prod}
		o.periodEndAsked = true
		s.changes.periodEnd++
		return
	}
	want := prorate(o.price, prod.price, last.StartsAt, last.EndsAt, now)
	require.Equal(tb, want.String(), ch.Amount.String(), "the proration of %s → %s over %s..%s at %s", o.price, prod.price, last.StartsAt, last.EndsAt, now)
	switch {
	case want.Sign() > 0:
		s.changes.upgrades++
		require.NotNil(tb, res.Invoice, "an upgrade's proration invoice")
		inv := *res.Invoice
		require.Equal(tb, want.String(), inv.Amount.String(), "the proration invoice bills exactly the prorated difference")
		// Two lines: the unused old plan (its share rounded alone,
		// negative) and the new plan's remainder, which sum to the amount.
		lines, err := store.InvoiceLines(context.Background(), s.b.pool, []uuid.UUID{inv.ID})
		require.NoError(tb, err)
		require.Len(tb, lines[inv.ID], 2)
		oldShare := prorate(money.Zero(), o.price, last.StartsAt, last.EndsAt, now)
		require.Equal(tb, oldShare.Neg().String(), lines[inv.ID][0].Amount.String(), "the unused old plan")
		sum, err := lines[inv.ID][0].Amount.Add(lines[inv.ID][1].Amount)
		require.NoError(tb, err)
		require.Equal(tb, want.String(), sum.String(), "the lines sum to the amount")
		require.NotNil(tb, ch.LapseAt)
		require.True(tb, ch.LapseAt.Equal(now.Add(time.Duration(3)*24*time.Hour)), "lapses plan_change_days after it is issued: %s", ch.LapseAt)
		if before.Cmp(want) >= 0 {
			require.Equal(tb, string(order.InvoicePaid), inv.Status, "the balance %s covers the proration %s", before, want)
			require.Equal(tb, store.PlanChangeApplied, ch.Status, "paid at once: the change takes effect")
			after, err := before.Sub(want)
			require.NoError(tb, err)
			require.Equal(tb, after.String(), s.balance().String(), "the balance paid exactly the proration")
			o.apply(prod)
			s.changes.prorationsPaid++
			return
		}
		require.Equal(tb, string(order.InvoiceIssued), inv.Status)
		require.Equal(tb, store.PlanChangePending, ch.Status, "unpaid: the order keeps its plan")
		o.pending = &modelChange{id: ch.ID, when: when, to: prod, invoice: &inv.ID, lapseAt: *ch.LapseAt}
	case want.Sign() < 0:
		s.changes.downgrades++
		require.Nil(tb, res.Invoice, "a downgrade bills nothing")
		require.Equal(tb, store.PlanChangeApplied, ch.Status, "a downgrade takes effect at once")
		owed := want.Neg()
		require.True(tb, ch.Credited.Cmp(owed) <= 0, "credited %s of an unused difference of %s", ch.Credited, owed)
		require.True(tb, ch.Credited.Cmp(held) <= 0, "credited %s, more than the period's payments hold (%s)", ch.Credited, held)
		if held.Cmp(owed) >= 0 && !s.refundsPending(o, last) {
			require.Equal(tb, owed.String(), ch.Credited.String(), "the unused difference is credited to the balance")
		}
		got, err := before.Add(ch.Credited)
		require.NoError(tb, err)
		require.Equal(tb, got.String(), s.balance().String(), "the balance grew by the credit")
		o.apply(prod)
	default:
		require.Equal(tb, store.PlanChangeApplied, ch.Status, "nothing to bill: at once")
		o.apply(prod)
	}
}

// held is what the payments of period p still hold (paid, not refunded),
// with those of the prorations of the upgrades applied now in it: they
// paid for the rest of the period at the new price.
func (s *modelSeq) held(o *modelOrder, p store.ServicePeriod) money.Amount {
	held := money.Zero()
	for _, id := range s.heldBy(o, p) {
		got, err := store.Q(s.b.pool).GetPayment(context.Background(), id)
		require.NoError(s.tb, err)
		net, err := got.Amount.Sub(got.RefundedAmount)
		require.NoError(s.tb, err)
		held, err = held.Add(net)
		require.NoError(s.tb, err)
	}
	return held
}

// heldBy are the payments of period p and of the prorations of the
// upgrades applied now in it.
func (s *modelSeq) heldBy(o *modelOrder, p store.ServicePeriod) []uuid.UUID {
	rows, err := s.b.pool.Query(context.Background(), `SELECT pay.id FROM plan_changes c JOIN payments pay ON pay.invoice_id = c.invoice_id
		WHERE c.order_id = $1 AND c.period_seq = $2 AND c.timing = 'now' AND c.status = 'applied' AND pay.status IN ('success', 'refunded')
		ORDER BY pay.created_at, pay.id`, o.id, p.Seq)
	require.NoError(s.tb, err)
	prorations, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(s.tb, err)
	return append(s.b.periodPayments(s.tb, o.id, p), prorations...)
}

// refundsPending: a refund of one of period p's payments (its prorations'
// included) is under way (its amount is reserved).
func (s *modelSeq) refundsPending(o *modelOrder, p store.ServicePeriod) bool {
	ids := s.heldBy(o, p)
	if len(ids) == 0 {
		return false
	}
	var n int
	require.NoError(s.tb, s.b.pool.QueryRow(context.Background(), `SELECT count(*) FROM refunds WHERE payment_id = ANY($1) AND status = 'pending'`, ids).Scan(&n))
	return n > 0
}

// apply records that o took product p.
func (o *modelOrder) apply(p modelProduct) {
	o.price, o.cycle, o.product = p.price, p.cycle, &p.id
	o.pending = nil
}

// pendingFirst draws an order with a pending change, or any when none has
// one.
func (s *modelSeq) pendingFirst(orders []*modelOrder) *modelOrder {
	var pending []*modelOrder
	for _, o := range orders {
		if o.pending != nil {
			pending = append(pending, o)
		}
	}
	if len(pending) == 0 || rapid.IntRange(0, 4).Draw(s.rt, "any order") == 0 {
		pending = orders
	}
	return rapid.SampledFrom(pending).Draw(s.rt, "order")
}

// cancelPlanChange: the customer or an admin withdraws the order's pending
// change.
func (s *modelSeq) cancelPlanChange(o *modelOrder) {
	rt, tb := s.rt, s.tb
	who := asCustomer(s.customer)
	if rapid.Bool().Draw(rt, "by an admin") {
		who = s.w.admin
	}
	var billed, partly bool
	if o.pending != nil {
		ch, err := store.Q(s.b.pool).GetPlanChangeForUpdate(context.Background(), o.pending.id)
		require.NoError(tb, err)
		billed = ch.Timing == store.PlanChangePeriodEnd && ch.PeriodSeq != nil
		if ch.InvoiceID != nil {
			partly = !s.b.invoice(tb, *ch.InvoiceID).PaidAmount.IsZero()
		}
	}
	res, err := s.w.orders.CancelPlanChange(who, o.id)
	noInternal(rt, "CancelPlanChange", err)
	switch {
	case o.pending == nil:
		require.Equal(tb, connect.CodeNotFound, codeOf(err), "no pending change: %v", err)
	case billed || partly:
		require.Equal(tb, connect.CodeFailedPrecondition, codeOf(err), "billed already or partly paid: %v", err)
	default:
		require.NoError(tb, err)
		require.Equal(tb, store.PlanChangeCancelled, res.Change.Status)
		if o.pending.invoice != nil {
			require.Equal(tb, string(order.InvoiceCancelled), s.b.invoice(tb, *o.pending.invoice).Status, "its proration invoice cancelled with it")
		}
		o.pending = nil
		s.changes.cancelled++
	}
}

// payProration: the customer starts a gateway payment of the order's open
// proration invoice; the buyer pays at once or later (the model's other
// gateway actions), or never.
func (s *modelSeq) payProration(o *modelOrder) {
	if o.pending == nil || o.pending.invoice == nil {
		return
	}
	inv := *o.pending.invoice
	p, err := s.w.pays.CreatePayment(asCustomer(s.customer), payment.NewPayment{InvoiceID: &inv, GatewayInterfaceID: s.w.gw.InterfaceID, ReturnURL: "https://shop.example/done"})
	noInternal(s.rt, "CreatePayment of a proration invoice", err)
	if err != nil {
		return
	}
	gp := &gatewayPayment{id: p.ID}
	for _, g := range *s.gps {
		if g.id == p.ID {
			gp = g
		}
	}
	if gp.id == p.ID && !containsPayment(*s.gps, p.ID) {
		*s.gps = append(*s.gps, gp)
	}
	if rapid.Bool().Draw(s.rt, "paid at once") {
		s.w.take(s.rt, gp)
		s.w.deliver(s.rt, gp, 1)
	}
}

func containsPayment(gps []*gatewayPayment, id uuid.UUID) bool {
	for _, g := range gps {
		if g.id == id {
			return true
		}
	}
	return false
}

// lapse: time passes to the lapse of the order's unpaid proration, and
// the leader runs.
func (s *modelSeq) lapse(o *modelOrder) {
	if o.pending == nil || o.pending.invoice == nil {
		return
	}
	if at := o.pending.lapseAt.Add(time.Hour); s.clock.Now().Before(at) {
		s.clock.Set(at)
	}
	s.pass()
}

// checkPlan follows order o's pending change to what became of it, checks
// that it became that for a reason, and that the order's plan is the
// model's: its product, renewal price and cycle; a period billed by a
// period-end change bills the new price.
func (s *modelSeq) checkPlan(o *modelOrder) {
	if o.pending == nil && o.product == nil {
		return // never changed: nothing to follow
	}
	tb, ctx := s.tb, context.Background()
	ord := s.b.order(tb, o.id)
	if c := o.pending; c != nil {
		ch, err := store.Q(s.b.pool).GetPlanChangeForUpdate(ctx, c.id)
		require.NoError(tb, err)
		switch ch.Status {
		case store.PlanChangePending:
			if ch.Timing == store.PlanChangeNow {
				inv := s.b.invoice(tb, *ch.InvoiceID)
				require.NotEqual(tb, string(order.InvoicePaid), inv.Status, "proration invoice %s paid, the change still pending", inv.ID)
				if !s.lastPass.Before(c.lapseAt) && inv.PaidAmount.IsZero() {
					require.Failf(tb, "an unpaid proration past its lapse", "change %s lapses at %s; a pass ran at %s", ch.ID, c.lapseAt, s.lastPass)
				}
			}
			if ch.Timing == store.PlanChangePeriodEnd && ch.PeriodSeq != nil {
				require.NotNil(tb, ch.InvoiceID, "the period billing the change has its invoice (the prices are > 0)")
				inv := s.b.invoice(tb, *ch.InvoiceID)
				require.Equal(tb, c.to.price.String(), inv.Amount.String(), "the renewal invoice of a period-end change bills the new product's price")
				if !s.lastPass.Before(*ch.EffectiveAt) {
					require.Failf(tb, "a due period-end change pending", "change %s takes effect at %s; a pass ran at %s", ch.ID, ch.EffectiveAt, s.lastPass)
				}
			}
		case store.PlanChangeApplied:
			require.NotNil(tb, ch.EffectiveAt)
			if ch.InvoiceID != nil && ch.Timing == store.PlanChangeNow {
				require.Equal(tb, string(order.InvoicePaid), s.b.invoice(tb, *ch.InvoiceID).Status, "an upgrade takes effect only once paid")
			}
			if ch.Timing == store.PlanChangeNow && ch.PeriodSeq != nil {
				// Never served the new plan through a period billed at the
				// old one.
				for _, p := range s.b.periods(tb, o.id) {
					if p.Seq > *ch.PeriodSeq && p.Status != store.PeriodCancelled && p.InvoiceID != nil {
						amount := s.b.invoice(tb, *p.InvoiceID).Amount
						require.Equal(tb, ch.ToPrice.String(), amount.String(), "period %d, billed at %s, is served on the plan of %s (change %s)", p.Seq, amount, ch.ToPrice, ch.ID)
					}
				}
			}
			if ch.Timing == store.PlanChangePeriodEnd {
				require.NotNil(tb, ch.PeriodSeq)
				require.True(tb, !ch.EffectiveAt.After(s.lastPass), "applied at %s before its period started (pass %s)", ch.EffectiveAt, s.lastPass)
			}
			// A change takes effect on a running service: never after it ended.
			if end, ok := s.endedAt(o); ok {
				require.False(tb, ch.EffectiveAt.After(end), "plan change %s took effect at %s on a service ended at %s (%s)", ch.ID, ch.EffectiveAt, end, ord.Status)
			}
			o.apply(c.to)
		case store.PlanChangeCancelled:
			// By the admin's cancel of its invoice, or because the service
			// ended (its invoice cancelled with it, or at its period's start).
			byHand := ch.InvoiceID != nil && o.cancelledByHand[*ch.InvoiceID]
			require.True(tb, byHand || !order.Status(ord.Status).Live(), "plan change %s cancelled, yet the model did not, its invoice was not cancelled by hand and order %s is %s", ch.ID, o.id, ord.Status)
			o.pending = nil
		case store.PlanChangeLapsed:
			require.Equal(tb, store.PlanChangeNow, ch.Timing)
			require.NotNil(tb, ch.InvoiceID)
			// At its lapse time, or earlier when the next period was billed.
			ps := s.b.periods(tb, o.id)
			renewed := ch.PeriodSeq != nil && ps[len(ps)-1].Seq > *ch.PeriodSeq
			require.True(tb, renewed || !s.lastPass.Before(c.lapseAt), "lapsed before its lapse time %s, the next period not billed", c.lapseAt)
			require.Equal(tb, string(order.InvoiceCancelled), s.b.invoice(tb, *ch.InvoiceID).Status)
			o.pending = nil
			s.changes.lapsed++
		default:
			require.Failf(tb, "plan change status", "%s", ch.Status)
		}
	}
	require.Equal(tb, o.price.String(), ord.RenewalPrice.Amount.String(), "order %s's renewal price", o.id)
	require.Equal(tb, o.cycle, ord.BillingCycle, "order %s's cycle", o.id)
	require.Equal(tb, fmt.Sprint(o.product), fmt.Sprint(ord.ProductID), "order %s's product", o.id)
}

// checkLines: every invoice of o has lines, and they sum to its amount.
func (s *modelSeq) checkLines(o *modelOrder) {
	tb, ctx := s.tb, context.Background()
	var bad int
	require.NoError(tb, s.b.pool.QueryRow(ctx, `SELECT count(*) FROM invoices i
		WHERE i.order_id = $1 AND i.amount IS DISTINCT FROM (SELECT sum(l.amount) FROM invoice_lines l WHERE l.invoice_id = i.id)`, o.id).Scan(&bad))
	require.Zero(tb, bad, "an invoice of order %s whose lines do not sum to its amount", o.id)
}

// endedAt is when o's service ended (the end of its last period with
// outcome ended or refunded), if it did.
func (s *modelSeq) endedAt(o *modelOrder) (time.Time, bool) {
	var at time.Time
	err := s.b.pool.QueryRow(context.Background(), `SELECT updated_at FROM service_periods WHERE order_id = $1 AND outcome IN ('ended', 'refunded')
		ORDER BY seq DESC LIMIT 1`, o.id).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return at, false
	}
	require.NoError(s.tb, err)
	return at, true
}

// checkMRR: the service's MRR (GetRecurringRevenue, as of a time after
// every sequence's clock, so that it is the live orders now) is the
// model's own monthly prices of this sequence's live orders, plus the
// other sequences' live orders as the orders table has them.
func (s *modelSeq) checkMRR(orders []*modelOrder) {
	tb, ctx := s.tb, context.Background()
	rr, err := s.w.pays.RecurringRevenue(s.w.admin, payment.RecurringQuery{
		TrendQuery: payment.TrendQuery{Zone: "UTC"}, Now: time.Date(2090, time.January, 1, 0, 0, 0, 0, time.UTC),
	})
	noInternal(s.rt, "RecurringRevenue", err)
	require.NoError(tb, err)
	var others int64
	require.NoError(tb, s.b.pool.QueryRow(ctx, `SELECT coalesce(sum(renewal_price * 100 * 12 / CASE billing_cycle WHEN 'monthly' THEN 1 WHEN 'quarterly' THEN 3
		WHEN 'semi_annual' THEN 6 ELSE 12 END), 0)::bigint FROM orders
		WHERE customer_id <> $1 AND status = ANY($2) AND billing_cycle <> 'one_time'`, s.customer, order.LiveStatuses()).Scan(&others))
	mine := int64(0)
	for _, o := range orders {
		if order.Status(s.b.order(tb, o.id).Status).Live() {
			mine += o.price.Cents() * 12 / int64(order.BillingCycle(o.cycle).Months())
		}
	}
	var got payment.Twelfths
	for _, c := range rr.Currencies {
		if c.Currency == "CNY" {
			got = c.End.Amount
		}
	}
	require.Equal(tb, payment.Twelfths(others+mine), got, "MRR %s: this sequence's live orders at the model's prices (%s) and the others (%s)",
		got, payment.Twelfths(mine), payment.Twelfths(others))

	// The year up to the sequence's clock, day by day, and the renewals
	// ahead of it, read from the rollup the triggers kept, are what the
	// rollup rebuilt from the records says (migration 00015's backfills):
	// every start, end and plan change of the sequence was recorded once,
	// at its price. The model makes no repricing, which only a trigger
	// can record.
	now := s.clock.Now()
	s.b.checkMRRRollup(tb, func() []payment.RecurringRevenue {
		rr, err := s.w.pays.RecurringRevenue(s.w.admin, payment.RecurringQuery{
			TrendQuery: payment.TrendQuery{From: now.AddDate(0, 0, -365).Format(time.DateOnly), To: now.Format(time.DateOnly), Zone: "Asia/Shanghai"},
			Now:        now,
		})
		noInternal(s.rt, "RecurringRevenue", err)
		require.NoError(tb, err)
		return []payment.RecurringRevenue{rr}
	})
}
