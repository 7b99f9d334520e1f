package renewal_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/order/renewal"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
	"github.com/rustbill/paymentd/internal/testkit"
)

// cardRetryDays is [billing].card_retry_days in the model: its default.
var cardRetryDays = []int{2, 5, 9}

// cardModes are the answers of the saved card's gateway.
var cardModes = []string{cardSucceeds, cardDeclines, cardAuth}

// modelChecks is how many sequences the test command runs; `task model`
// runs more (RAPID_CHECKS).
const modelChecks = 25

// modelActions are the model's actions, each as often as it is listed.
var modelActions = []string{
	"time passes", "time passes", "time passes", "pass cut off", "top-up", "top-up",
	"admin suspends", "admin resumes", "renewal off", "months pass",
	"invoice gateway payment", "invoice gateway payment", "invoice gateway payment",
	"gateway takes money", "notification arrives", "notification arrives",
	"admin refunds", "admin refunds", "admin cancels invoice", "admin ends order",
	"invoice cancelled, renewal back on", "the card's answer changes",
	"end now", "end now", "refund a period's payment", "refund a period's payment",
	"plan change now", "plan change now", "plan change at period end", "cancel plan change",
	"pay the proration", "proration lapses",
	"dispute opened", "dispute moves", "dispute moves", "dispute moves", "invalid dispute",
}

// modelOrder is what the model knows of one order.
type modelOrder struct {
	id uuid.UUID
	// price, cycle and product are the order's plan as the model has it:
	// 7.00 in its first cycle and no product, until a plan change.
	price   money.Amount
	cycle   string
	product *uuid.UUID
	// firstCycle is the cycle it was bought with.
	firstCycle string
	// pending is its pending plan change; periodEndAsked: it was asked a
	// change at the period end.
	pending        *modelChange
	periodEndAsked bool
	// adminSuspended: an admin suspended it and has not resumed it.
	adminSuspended bool
	// adminEnded: an admin ended it (terminated before any due day).
	adminEnded bool
	renewOff   bool
	// endedAt: ended now (EndService, or a refund of its current period's
	// payment) at this paid end; periods is how many it had then.
	endedAt *time.Time
	periods int
	// disputeSuspended: a dispute of one of its payments suspended it,
	// and has not been won or lost.
	disputeSuspended bool
	// cancelledByHand are the invoices an admin cancelled: their period
	// ends the service at its paid end (terminated if suspended then), not
	// terminate_after_days past due.
	cancelledByHand map[uuid.UUID]bool
}

// cancelInvoice has the admin cancel invoice inv of o, and records it.
func (o *modelOrder) cancelInvoice(rt *rapid.T, w *payWorld, inv uuid.UUID, what string) {
	_, err := w.orders.CancelInvoice(w.admin, inv)
	noInternal(rt, what, err)
	if err == nil {
		if o.cancelledByHand == nil {
			o.cancelledByHand = map[uuid.UUID]bool{}
		}
		o.cancelledByHand[inv] = true
	}
}

// The renewal cycle as a model: random recurring orders of one customer
// (the first period free, or paid from the balance or through the
// gateway), a clock that runs through months in random steps, payments on
// time, late, never, or from a balance topped up later, gateway payments of
// renewal invoices whose money the gateway takes now, later, or never, and
// whose notification arrives at once, after other actions, or from two
// callers at once; full and partial refunds of any period's payment (the
// first or a renewal, gateway or balance); an admin cancelling an invoice,
// or suspending, resuming or ending an order; renewal turned off, the open
// renewal invoice cancelled and renewal turned back on, and
// billing passes cut off midway (a leader killed during its run) — and
// after every step:
//   - no call answers Internal (what the client would get over the wire);
//   - money taken is always recorded: every payment whose money the
//     gateway took, once its notification arrived, is settled or failed
//     with the whole amount captured, to be returned;
//   - one invoice per (order, period): every later period has its own
//     invoice and every renewal invoice its period, but a cancelled one
//     whose period was reissued (renewal turned back on) with a new one;
//   - the periods follow each other without gap, each ends where the
//     calendar rule puts it (the anchor plus whole cycles in the billing
//     time zone), and the order's paid_until is the last paid period's end;
//   - never suspended for non-payment while its last period is paid;
//   - a live order that renews never keeps a cancelled period as its
//     latest (renewal turned back on: the period is billed again);
//   - never terminated before terminate_after_days past an unpaid due time;
//   - an admin's suspension is never lifted by a payment;
//   - at the end of each sequence, after the gateway delivered every
//     notification once more, ledger.Verify is clean and the money
//     invariants hold.
func TestRenewalModel(t *testing.T) {
	t.Parallel()
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == "100" && os.Getenv("RAPID_CHECKS") == "" {
		require.NoError(t, flag.Set("rapid.checks", strconv.Itoa(modelChecks)))
	}
	loc, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	opts := renewal.DefaultOptions()
	opts.Location = loc
	b := setup(t, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), opts)
	w := newPayWorld(t, b)
	products := modelCatalogue(t, b)
	changes := planCounts{refused: map[string]int{}}
	var disputes disputeCounts
	ctx := context.Background()
	began := time.Now()
	var sequences, steps, passes, cut, gatewayPays, refunds atomic.Int64
	var simulated atomic.Int64 // hours

	rapid.Check(t, func(rt *rapid.T) {
		tb := propertyTB{TB: t, rt: rt}
		sequences.Add(1)
		start := time.Date(2027, time.Month(rapid.IntRange(1, 12).Draw(rt, "month")), rapid.IntRange(1, 31).Draw(rt, "day"),
			rapid.IntRange(0, 23).Draw(rt, "hour"), 0, 0, 0, loc)
		clock := testkit.NewClockAt(start)
		w.clock.Store(clock)
		run := renewal.New(b.pool, renewal.Options{
			Node: "model", Location: loc, InvoiceDays: opts.InvoiceDays, AutoApplyBalance: true,
			SuspendAfterDays: opts.SuspendAfterDays, TerminateAfterDays: opts.TerminateAfterDays,
			ReminderDaysBefore: opts.ReminderDaysBefore, OverdueReminderDays: opts.OverdueReminderDays,
			Clock: clock.Now, BatchSize: 3,
			// The dunning step charges a saved card (the customer has one
			// in some sequences) for what the balance did not cover.
			ChargeSaved: func(ctx context.Context) (int, error) {
				r, err := w.pays.ChargeDue(ctx, cardRetryDays, "model")
				return r.Charged, err
			},
		})
		customer := testfixture.Customer(tb, b.pool)
		b.clock.Set(start)
		// A saved card in some sequences; its gateway answers as drawn
		// until the model changes it.
		card := rapid.Bool().Draw(rt, "a saved card")
		if card {
			w.card.saveCard(tb, b, customer, start)
		}
		w.card.setMode(rapid.SampledFrom(cardModes).Draw(rt, "the card's answer"))
		var orders []*modelOrder
		var gps []*gatewayPayment
		var ds []*modelDispute
		for range rapid.IntRange(1, 3).Draw(rt, "orders") {
			cycle := rapid.SampledFrom([]string{"monthly", "quarterly", "annual"}).Draw(rt, "cycle")
			o := &modelOrder{price: money.MustParse("7.00"), cycle: cycle, firstCycle: cycle}
			switch rapid.SampledFrom([]string{"free", "balance", "gateway"}).Draw(rt, "first payment") {
			case "free":
				o.id = b.activeOrder(tb, customer, cycle, "7.00")
			case "balance":
				o.id, _ = b.paidOrder(rt, w, customer, cycle, "7.00", false)
			case "gateway":
				var gp *gatewayPayment
				o.id, gp = b.paidOrder(rt, w, customer, cycle, "7.00", true)
				gps = append(gps, gp)
			}
			orders = append(orders, o)
		}
		seq := &modelSeq{rt: rt, tb: tb, b: b, w: w, customer: customer, clock: clock, products: products, gps: &gps, changes: &changes}
		pass := func() {
			passes.Add(1)
			_, err := run.RunOnce(ctx)
			noInternal(rt, "a billing pass", err)
			require.NoError(tb, err)
			seq.lastPass = clock.Now()
		}
		seq.pass = pass
		withOrder := func(o *modelOrder, f func(tx pgx.Tx, ord store.Order) error) {
			require.NoError(tb, store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
				ord, err := store.Q(tx).GetOrderForUpdate(ctx, o.id)
				if err != nil {
					return err
				}
				return f(tx, ord)
			}))
		}
		// latestInvoice is the order's newest invoice (any status: paying
		// or cancelling a closed one must be refused, not break).
		latestInvoice := func(o *modelOrder) (uuid.UUID, bool) {
			var id uuid.UUID
			err := b.pool.QueryRow(ctx, `SELECT id FROM invoices WHERE order_id = $1 ORDER BY created_at DESC, id LIMIT 1`, o.id).Scan(&id)
			if errors.Is(err, pgx.ErrNoRows) {
				return id, false
			}
			require.NoError(tb, err)
			return id, true
		}
		before := clock.Now()
		for range rapid.IntRange(1, 25).Draw(rt, "steps") {
			steps.Add(1)
			switch rapid.SampledFrom(modelActions).Draw(rt, "action") {
			case "time passes": // time passes, the leader runs
				clock.Advance(time.Duration(rapid.Int64Range(1, 20*24).Draw(rt, "hours")) * time.Hour)
				pass()
			case "pass cut off": // a pass cut off midway, then a whole one
				cctx, cancel := context.WithTimeout(ctx, time.Duration(rapid.IntRange(0, 3000).Draw(rt, "µs"))*time.Microsecond)
				_, _ = run.RunOnce(cctx)
				cancel()
				cut.Add(1)
				pass()
			case "top-up": // the customer tops up (pays, on time or late)
				topUp(tb, b, customer, rapid.SampledFrom([]string{"7.00", "14.00", "3.50"}).Draw(rt, "top-up"), clock.Now())
				pass()
			case "admin suspends": // an admin suspends an order
				o := rapid.SampledFrom(orders).Draw(rt, "order")
				_, err := w.orders.SuspendOrder(w.admin, o.id, "model")
				noInternal(rt, "SuspendOrder", err)
				if err == nil {
					o.adminSuspended = true
				}
			case "admin resumes": // the admin resumes it
				o := rapid.SampledFrom(orders).Draw(rt, "order")
				if o.adminSuspended {
					_, err := w.orders.ResumeOrder(w.admin, o.id, "model")
					noInternal(rt, "ResumeOrder", err)
					if err == nil {
						o.adminSuspended = false
					}
				}
				// The leader runs every interval: an order resumed while its
				// renewal is overdue past the suspension day is suspended
				// again by the next pass, which the check below then asks for.
				pass()
			case "renewal off": // renewal turned off
				o := rapid.SampledFrom(orders).Draw(rt, "order")
				if !o.renewOff {
					o.renewOff = true
					_, err := store.Q(b.pool).SetOrderRenews(ctx, store.SetOrderRenewsParams{
						ID: o.id, Renews: false, UpdatedAt: clock.Now(),
					})
					require.NoError(tb, err)
				}
			case "months pass": // nothing happens for months
				clock.Advance(time.Duration(rapid.IntRange(30, 120).Draw(rt, "days")) * 24 * time.Hour)
				pass()
			case "invoice gateway payment": // the customer starts a gateway payment of the renewal invoice
				o := rapid.SampledFrom(orders).Draw(rt, "order")
				// No invoice out yet: time passes to the day the next one is
				// issued, and the leader issues it.
				ps := b.periods(tb, o.id)
				if last := ps[len(ps)-1]; last.Status == store.PeriodPaid {
					if due := last.EndsAt.Add(-time.Duration(opts.InvoiceDays)*24*time.Hour + time.Hour); clock.Now().Before(due) {
						clock.Set(due)
						pass()
					}
				}
				inv, ok := latestInvoice(o)
				if !ok {
					break
				}
				p, err := w.pays.CreatePayment(asCustomer(customer), payment.NewPayment{InvoiceID: &inv, GatewayInterfaceID: w.gw.InterfaceID, ReturnURL: "https://shop.example/done"})
				noInternal(rt, "CreatePayment of a renewal invoice", err)
				if err == nil && !slices.ContainsFunc(gps, func(g *gatewayPayment) bool { return g.id == p.ID }) {
					gatewayPays.Add(1)
					gps = append(gps, &gatewayPayment{id: p.ID})
				}
			case "gateway takes money": // the buyer pays at the gateway; its notification is lost for now
				if len(gps) > 0 {
					w.take(rt, rapid.SampledFrom(gps).Draw(rt, "payment"))
				}
			case "notification arrives": // the gateway's notification arrives (now or late), or two at once
				if len(gps) > 0 {
					p := rapid.SampledFrom(gps).Draw(rt, "payment")
					w.take(rt, p)
					w.deliver(rt, p, rapid.IntRange(1, 2).Draw(rt, "callers"))
				}
			case "admin refunds": // an admin refunds a payment of any period, in full or in part
				var ids []uuid.UUID
				rows, err := b.pool.Query(ctx, `SELECT id FROM payments WHERE customer_id = $1
					AND (status = 'success' OR (status = 'failed' AND captured_amount > refunded_amount)) ORDER BY created_at, id`, customer)
				require.NoError(tb, err)
				ids, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
				require.NoError(tb, err)
				if len(ids) == 0 {
					break
				}
				id := rapid.SampledFrom(ids).Draw(rt, "refunded payment")
				amount := rapid.SampledFrom([]string{"", "", "1.00", "3.50"}).Draw(rt, "refund amount") // "": all that is left
				live := map[*modelOrder]bool{}
				for _, o := range orders {
					live[o] = order.Status(b.order(tb, o.id).Status).Live()
				}
				_, err = w.pays.RefundPayment(w.admin, id, amount, "model", "")
				noInternal(rt, "RefundPayment", err)
				if err == nil {
					refunds.Add(1)
				}
				// A refund of a current period's payment in full ended its
				// service now ("refund a period's payment" checks when).
				for _, o := range orders {
					if live[o] && b.order(tb, o.id).Status == string(order.StatusTerminated) {
						o.ended(tb, b, store.Timestamp(clock.Now()))
					}
				}
			case "admin cancels invoice": // an admin cancels the order's newest invoice
				o := rapid.SampledFrom(orders).Draw(rt, "order")
				if inv, ok := latestInvoice(o); ok {
					o.cancelInvoice(rt, w, inv, "CancelInvoice")
				}
			case "invoice cancelled, renewal back on": // the open renewal invoice cancelled (renewal off with it), then renewal turned back on
				o := rapid.SampledFrom(orders).Draw(rt, "order")
				// No invoice out yet: time passes to the day the next one is
				// issued, and the leader issues it.
				ps := b.periods(tb, o.id)
				if last := ps[len(ps)-1]; last.Status == store.PeriodPaid {
					if due := last.EndsAt.Add(-time.Duration(opts.InvoiceDays)*24*time.Hour + time.Hour); clock.Now().Before(due) {
						clock.Set(due)
						pass()
					}
				}
				ps = b.periods(tb, o.id)
				if last := ps[len(ps)-1]; last.Status == store.PeriodUnpaid && last.InvoiceID != nil {
					o.cancelInvoice(rt, w, *last.InvoiceID, "CancelInvoice of the open renewal invoice")
				}
				// Refused (FailedPrecondition) once the paid end has passed
				// or the order has ended; never Internal.
				_, err := w.orders.SetOrderRenewal(asCustomer(customer), o.id, true)
				noInternal(rt, "SetOrderRenewal back on", err)
				if err == nil {
					o.renewOff = false
				}
				pass()
			case "end now": // the customer or an admin ends a service now, with each credit
				o := rapid.SampledFrom(orders).Draw(rt, "order")
				credit := rapid.SampledFrom([]string{"none", "balance", "gateway"}).Draw(rt, "credit")
				who := asCustomer(customer)
				if credit == "gateway" || rapid.Bool().Draw(rt, "by an admin") {
					who = w.admin
				}
				before := b.order(tb, o.id)
				ended, err := w.orders.EndService(who, o.id, credit)
				noInternal(rt, "EndService", err)
				if err != nil {
					require.False(tb, order.Status(before.Status).Live(), "EndService of a live order refused: %v", err)
					break
				}
				for _, r := range ended.Refunds {
					_, err := w.pays.RefundShare(w.admin, r.PaymentID, r.Amount, "model: ended now")
					noInternal(rt, "the gateway credit's refund", err)
				}
				require.Equal(tb, string(order.StatusTerminated), ended.Order.Status)
				require.True(tb, ended.Credited.Cmp(ended.Unused) <= 0, "credited %s of an unused %s", ended.Credited, ended.Unused)
				o.ended(tb, b, store.Timestamp(clock.Now()))
			case "refund a period's payment": // an admin refunds the payment of one paid period, in full or in part
				o := rapid.SampledFrom(orders).Draw(rt, "order")
				var paid []store.ServicePeriod
				for _, p := range b.periods(tb, o.id) {
					if p.Status == store.PeriodPaid {
						paid = append(paid, p)
					}
				}
				if len(paid) == 0 {
					break
				}
				p := rapid.SampledFrom(paid).Draw(rt, "period")
				pays := b.periodPayments(tb, o.id, p)
				if len(pays) == 0 {
					break // a free period
				}
				pay := rapid.SampledFrom(pays).Draw(rt, "payment")
				before := b.order(tb, o.id)
				res, err := w.pays.RefundPayment(w.admin, pay, rapid.SampledFrom([]string{"", "", "1.00"}).Draw(rt, "refund amount"), "model", "")
				noInternal(rt, "RefundPayment of a period's payment", err)
				if err != nil || res.Refund.Status != store.RefundSucceeded {
					break
				}
				refunds.Add(1)
				// The rule (docs/operations.md, "Refunds and periods"): the
				// service ends now when this payment bought a period still
				// running and that period's payments now hold nothing;
				// otherwise it is left as it was.
				held := money.Zero()
				for _, id := range b.periodPayments(tb, o.id, p) {
					got, err := store.Q(b.pool).GetPayment(ctx, id)
					require.NoError(tb, err)
					net, err := got.Amount.Sub(got.RefundedAmount)
					require.NoError(tb, err)
					held, err = held.Add(net)
					require.NoError(tb, err)
				}
				now := store.Timestamp(clock.Now())
				ends := order.Status(before.Status).Live() && now.Before(p.EndsAt) && held.Sign() <= 0 && res.Payment.Status == "refunded" &&
					(p.Outcome == nil || *p.Outcome == store.OutcomeRenewed)
				after := b.order(tb, o.id)
				if ends {
					require.Equal(tb, string(order.StatusTerminated), after.Status, "the current period's payment refunded in full ends the service")
					o.ended(tb, b, now)
				} else {
					require.Equal(tb, before.Status, after.Status, "a refund of an earlier period's payment, or a partial one, leaves the service alone (period %d)", p.Seq)
				}
			case "the card's answer changes": // the saved card succeeds, is declined, or asks for authentication from now on
				w.card.setMode(rapid.SampledFrom(cardModes).Draw(rt, "the card's answer"))
				pass()
			case "plan change now": // the customer or an admin changes the plan now: an upgrade, a downgrade, the same price
				seq.changePlan(rapid.SampledFrom(orders).Draw(rt, "order"), store.PlanChangeNow)
			case "plan change at period end": // or at the period end, maybe to another cycle
				seq.changePlan(rapid.SampledFrom(orders).Draw(rt, "order"), store.PlanChangePeriodEnd)
			case "cancel plan change": // the pending change withdrawn
				seq.cancelPlanChange(seq.pendingFirst(orders))
			case "pay the proration": // a gateway payment of an open proration invoice
				seq.payProration(seq.pendingFirst(orders))
			case "proration lapses": // an unpaid proration's lapse time passes, the leader runs
				seq.lapse(seq.pendingFirst(orders))
			case "dispute opened": // the card's holder disputes a settled charge, in full or in part
				seq.openDispute(orders, &card, &ds, &disputes)
				pass()
			case "dispute moves": // an open dispute goes under review, is won or lost, or is reported again
				if !anyOpen(ds) {
					// None open: one is opened, and days pass.
					seq.openDispute(orders, &card, &ds, &disputes)
					clock.Advance(time.Duration(rapid.IntRange(1, 10).Draw(rt, "days")) * 24 * time.Hour)
					pass()
				}
				seq.moveDispute(orders, ds, &disputes)
				// The leader runs every interval: an order resumed while its
				// renewal is overdue is suspended for that by the next pass.
				pass()
			case "invalid dispute": // a dispute that is about none of the customer's payments as they are
				seq.invalidDispute(orders, &disputes)
			case "admin ends order": // an admin ends an active or suspended order
				o := rapid.SampledFrom(orders).Draw(rt, "order")
				withOrder(o, func(tx pgx.Tx, ord store.Order) error {
					st := order.Status(ord.Status)
					if st != order.StatusActive && st != order.StatusSuspended {
						return nil
					}
					_, err := order.Transition(ctx, tx, ord, order.Move{To: order.StatusTerminated, EndReason: order.EndReasonAdmin, By: audit.System("admin"), At: store.Timestamp(clock.Now())})
					noInternal(rt, "ending an order", err)
					o.adminEnded = err == nil
					return err
				})
			}
			checkTakenMoneyRecorded(rt, b, gps)
			if card {
				w.card.checkCardCharges(rt, b, customer, cardRetryDays)
			}
			for _, o := range orders {
				seq.checkPlan(o)
				seq.checkDisputeHold(o)
				checkRenewalModel(tb, b, o, clock.Now(), opts, loc)
			}
		}
		// In the end every buyer pays, however late (a payment page left
		// open for weeks), and the gateway delivers every notification
		// once more (its retry): all the money it took is recorded.
		for _, p := range gps {
			w.take(rt, p)
			w.deliver(rt, p, 1)
		}
		checkTakenMoneyRecorded(rt, b, gps)
		for _, o := range orders {
			seq.checkPlan(o)
			seq.checkLines(o)
		}
		seq.checkMRR(orders)
		if card {
			// The customer removes the card: later sequences' passes
			// charge their own customers only.
			_, err := b.pool.Exec(ctx, `UPDATE saved_payment_methods SET removed_at = $2 WHERE customer_id = $1`, customer, clock.Now())
			require.NoError(tb, err)
		}
		simulated.Add(int64(clock.Now().Sub(before) / time.Hour))
		testfixture.CheckMoneyInvariants(tb, b.pool)
		rep, err := ledger.Verify(ctx, b.pool)
		require.NoError(tb, err)
		require.True(tb, rep.OK(), rep.String())
	})
	var reissued int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = $1`, order.ActionOrderPeriodReissue).Scan(&reissued))
	var applied, lapsed, periodEnd int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'applied'), count(*) FILTER (WHERE status = 'lapsed'),
		count(*) FILTER (WHERE status = 'applied' AND timing = 'period_end') FROM plan_changes`).Scan(&applied, &lapsed, &periodEnd))
	t.Logf("renewal model: %d sequences, %d steps, %d passes (%d cut off midway), %d gateway payments of invoices, %d refunds, %d periods reissued, %.0f simulated months, %s",
		sequences.Load(), steps.Load(), passes.Load(), cut.Load(), gatewayPays.Load(), refunds.Load(), reissued, float64(simulated.Load())/24/30.44, time.Since(began).Round(time.Millisecond))
	t.Logf("plan changes: %d upgrades now, %d downgrades now, %d at period end asked, refused %v, %d cancelled; %d applied (%d at period end), %d lapsed",
		changes.upgrades, changes.downgrades, changes.periodEnd, changes.refused, changes.cancelled, applied, periodEnd, lapsed)
	var charged, declined, auth int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE outcome = 'succeeded'), count(*) FILTER (WHERE outcome = 'declined'),
		count(*) FILTER (WHERE outcome = 'authentication_required') FROM saved_charge_attempts`).Scan(&charged, &declined, &auth))
	t.Logf("saved-card charges: %d succeeded, %d declined, %d asked for authentication", charged, declined, auth)
	t.Logf("disputes: %d opened, %d under review, %d won, %d lost (%d in full), %d reported again, %d refused as anomalies",
		disputes.opened, disputes.updated, disputes.won, disputes.lost, disputes.lostInFull, disputes.replayed, disputes.invalid)
}

// ended records that o ended now at paid end at: terminated, its paid end
// that moment and its periods as they are.
func (o *modelOrder) ended(t testing.TB, b *bundle, at time.Time) {
	t.Helper()
	o.adminEnded = true
	if o.endedAt == nil {
		o.endedAt = &at
		o.periods = len(b.periods(t, o.id))
	}
	require.True(t, b.order(t, o.id).PaidUntil.Equal(at), "the paid end is the moment it ended")
}

// periodPayments are the successful payments that paid period p of order
// id: the order's own for the first, its invoice's for a later one.
func (b *bundle) periodPayments(t testing.TB, id uuid.UUID, p store.ServicePeriod) []uuid.UUID {
	t.Helper()
	q := `SELECT id FROM payments WHERE order_id = $1 AND invoice_id IS NULL AND status IN ('success', 'refunded') ORDER BY created_at, id`
	args := []any{id}
	if p.Seq > 1 {
		if p.InvoiceID == nil {
			return nil
		}
		q = `SELECT id FROM payments WHERE invoice_id = $1 AND status IN ('success', 'refunded') ORDER BY created_at, id`
		args = []any{*p.InvoiceID}
	}
	rows, err := b.pool.Query(context.Background(), q, args...)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	return ids
}

func topUp(t testing.TB, b *bundle, customer uuid.UUID, amount string, at time.Time) {
	t.Helper()
	b.clock.Set(at)
	b.topUp(t, customer, amount)
}

// checkRenewalModel checks the model's rules for one order as of now.
func checkRenewalModel(t testing.TB, b *bundle, o *modelOrder, now time.Time, opts renewal.Options, loc *time.Location) {
	t.Helper()
	ctx := context.Background()
	ord := b.order(t, o.id)
	ps := b.periods(t, o.id)
	require.NotEmpty(t, ps)
	// One invoice per later period (a proration invoice bills no period);
	// an invoice no period names is one
	// cancelled, unpaid, whose period was reissued with a new invoice
	// (order.period_reissue names it): nothing billed twice.
	var invoices, stray int
	require.NoError(t, b.pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE p.invoice_id IS NOT NULL),
		       count(*) FILTER (WHERE p.invoice_id IS NULL AND NOT (i.status = 'cancelled' AND i.paid_amount = 0 AND EXISTS (
		           SELECT 1 FROM audit_log a WHERE a.entity_type = 'order' AND a.entity_id = $2 AND a.action = $3
		             AND a.before->>'invoice_id' = i.id::text)))
		FROM invoices i LEFT JOIN service_periods p ON p.invoice_id = i.id
		WHERE i.order_id = $1
		  AND NOT EXISTS (SELECT 1 FROM plan_changes pc WHERE pc.invoice_id = i.id AND pc.timing = 'now')`, o.id, o.id.String(), order.ActionOrderPeriodReissue).Scan(&invoices, &stray))
	require.Equal(t, len(ps)-1, invoices, "one invoice per later period (order %s)", o.id)
	require.Zero(t, stray, "an invoice of order %s bills no period and was not replaced by a reissue", o.id)
	// The calendar: the anchor plus whole cycles, and a period-end change
	// of cycle counts from the start of the period it billed (the period
	// still bills that change's invoice: one reissued after its invoice was
	// cancelled bills the old plan).
	type billed struct {
		Invoice            uuid.UUID
		FromCycle, ToCycle string
	}
	cycles := map[uuid.UUID]billed{}
	if o.periodEndAsked {
		rows, err := b.pool.Query(ctx, `SELECT invoice_id, from_cycle, to_cycle FROM plan_changes
			WHERE order_id = $1 AND timing = 'period_end' AND invoice_id IS NOT NULL`, o.id)
		require.NoError(t, err)
		chs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[billed])
		require.NoError(t, err)
		for _, ch := range chs {
			cycles[ch.Invoice] = ch
		}
	}
	anchor, months, cycle := ps[0].StartsAt, 0, o.firstCycle
	var lastPaid *store.ServicePeriod
	for i, p := range ps {
		require.EqualValues(t, i+1, p.Seq)
		if i > 0 {
			require.NotNil(t, p.InvoiceID, "period %d has its invoice", p.Seq)
			require.True(t, p.StartsAt.Equal(ps[i-1].EndsAt), "period %d starts where %d ended", p.Seq, i)
			if ch, ok := cycles[*p.InvoiceID]; ok {
				if ch.ToCycle != ch.FromCycle {
					anchor, months = p.StartsAt, 0
				}
				cycle = ch.ToCycle
			}
		}
		months += order.BillingCycle(cycle).Months()
		want := order.AddMonths(anchor, months, loc)
		require.True(t, p.EndsAt.Equal(want), "period %d ends %s, the calendar says %s", p.Seq, p.EndsAt, want)
		if p.Status == store.PeriodPaid {
			lastPaid = &ps[i]
		}
	}
	require.NotNil(t, lastPaid)
	if o.endedAt != nil {
		// Ended now: the paid end is that moment for good, and nothing was
		// billed after it (never twice for the same time).
		require.NotNil(t, ord.PaidUntil)
		require.True(t, ord.PaidUntil.Equal(*o.endedAt), "paid_until %s, ended now at %s", ord.PaidUntil, o.endedAt)
		require.Len(t, ps, o.periods, "a period billed after the service ended now")
		require.Equal(t, string(order.StatusTerminated), ord.Status)
	}
	if ord.PaidUntil != nil && lastPaid.Outcome == nil {
		require.True(t, ord.PaidUntil.Equal(lastPaid.EndsAt), "paid_until %s is the last paid end %s", ord.PaidUntil, lastPaid.EndsAt)
	}
	last := ps[len(ps)-1]
	st := order.Status(ord.Status)
	if st == order.StatusSuspended && ord.SuspendReason == order.SuspendReasonOverdue {
		// Unpaid, or cancelled by an admin's CancelInvoice: the next pass
		// ends the service at its paid end.
		require.NotEqual(t, store.PeriodPaid, last.Status, "suspended for non-payment while its last period is paid")
		require.False(t, now.Before(last.StartsAt.Add(time.Duration(opts.SuspendAfterDays)*24*time.Hour)), "suspended before suspend_after_days")
	}
	// An invoice cancelled by hand ends the service at its paid end
	// (terminated when it was suspended then), whenever that is.
	byHand := last.InvoiceID != nil && o.cancelledByHand[*last.InvoiceID]
	if st == order.StatusTerminated && last.Status == store.PeriodCancelled && !o.adminEnded && !byHand {
		require.False(t, last.UpdatedAt.Before(last.StartsAt.Add(time.Duration(opts.TerminateAfterDays)*24*time.Hour)),
			"terminated at %s, before terminate_after_days past the due time %s", last.UpdatedAt, last.StartsAt)
	}
	if st.Live() && ord.Renews && last.Status == store.PeriodCancelled {
		// Renewal turned back on after the invoice was cancelled (before the
		// paid end: later is refused), and a pass has run since: the
		// period is billed again, not left cancelled with nothing due.
		require.Failf(t, "renewing with its next period cancelled", "order %s renews, yet period %d stays cancelled after a pass", o.id, last.Seq)
	}
	if o.adminSuspended {
		// It ends (terminated, completed, or refunded when its money went
		// back in full), but an admin's suspension is never lifted.
		require.Contains(t, []order.Status{order.StatusSuspended, order.StatusTerminated, order.StatusCompleted, order.StatusRefunded}, st, "an admin's suspension lifted")
		if st == order.StatusSuspended {
			require.Equal(t, order.SuspendReasonAdmin, ord.SuspendReason)
		}
	}
	if st == order.StatusActive && last.Status == store.PeriodUnpaid {
		require.True(t, now.Before(last.StartsAt.Add(time.Duration(opts.SuspendAfterDays)*24*time.Hour+opts.Interval)) || o.renewOff || !ord.Renews,
			"active %s past the suspension day of its unpaid period due %s", now, last.StartsAt)
	}
}
