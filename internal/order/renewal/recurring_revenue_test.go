package renewal_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/apd/v3"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// mrrService is what the test knows of a service it drove: its monthly
// price in twelfths of a cent, when it started, when it ended (zero: not),
// and whether its customer came back with it.
type mrrService struct {
	id           uuid.UUID
	twelfths     int64
	start, end   time.Time
	reactivation bool
}

// mrrModel is the figures a range should have, from what the test did.
func mrrModel(services []*mrrService, lo, hi time.Time) (start, end, newBiz, churn, react int64) {
	in := func(s *mrrService, t time.Time) bool {
		return s.start.Before(t) && (s.end.IsZero() || !s.end.Before(t))
	}
	for _, s := range services {
		if in(s, lo) {
			start += s.twelfths
		}
		if in(s, hi) {
			end += s.twelfths
		}
		if !s.start.Before(lo) && s.start.Before(hi) {
			if s.reactivation {
				react += s.twelfths
			} else {
				newBiz += s.twelfths
			}
		}
		if !s.end.IsZero() && !s.end.Before(lo) && s.end.Before(hi) {
			churn += s.twelfths
		}
	}
	return
}

// liveMRR is the sum of the live recurring orders' renewal prices, each
// divided by its cycle's months with apd, rounded half up to the cent:
// what GetRecurringRevenue's MRR at the end of a range ending today must
// say, computed apart from it.
func (b *bundle) liveMRR(t *testing.T) string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT billing_cycle, renewal_price FROM orders
		WHERE status = ANY($1) AND billing_cycle <> 'one_time'`, order.LiveStatuses())
	require.NoError(t, err)
	defer rows.Close()
	ctx := apd.BaseContext.WithPrecision(50)
	sum := apd.New(0, 0)
	for rows.Next() {
		var cycle string
		var price money.Amount
		require.NoError(t, rows.Scan(&cycle, &price))
		d := price.Decimal()
		var month apd.Decimal
		_, err := ctx.Quo(&month, &d, apd.New(int64(order.BillingCycle(cycle).Months()), 0))
		require.NoError(t, err)
		_, err = ctx.Add(sum, sum, &month)
		require.NoError(t, err)
	}
	require.NoError(t, rows.Err())
	ctx.Rounding = apd.RoundHalfUp
	var out apd.Decimal
	_, err = ctx.Quantize(&out, sum, -2)
	require.NoError(t, err)
	return out.Text('f')
}

// A sequence of services through the real renewal run — bought, renewed
// from the balance, ended with renewal off, suspended and terminated,
// suspended and resumed on payment, and a customer coming back — and
// GetRecurringRevenue's figures over several ranges: MRR at the end of a
// range ending now is the live orders' monthly-normalised renewal prices
// (annual / 12, quarterly / 3); each range's start, movements and end are
// what the services did; they add up; consecutive ranges meet; and the
// renewals, suspensions and terminations ahead are the run's next steps.
func TestRecurringRevenueIsWhatTheOrdersAndPeriodsSay(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.January, 1, 0), defaults())
	ctx := b.admin(t)
	svc := payment.NewService(b.pool, slog.New(slog.DiscardHandler))
	opts := defaults()
	ask := func(from, to string) payment.RecurringRevenue {
		t.Helper()
		rr, err := svc.RecurringRevenue(ctx, payment.RecurringQuery{
			TrendQuery: payment.TrendQuery{From: from, To: to, Zone: "UTC"}, Now: b.clock.Now(),
			SuspendAfter:   time.Duration(opts.SuspendAfterDays) * 24 * time.Hour,
			TerminateAfter: time.Duration(opts.TerminateAfterDays) * 24 * time.Hour,
		})
		require.NoError(t, err)
		return rr
	}
	var services []*mrrService
	buy := func(customer uuid.UUID, cycle, price string, reactivation bool) *mrrService {
		t.Helper()
		cents := money.MustParse(price).Cents()
		s := &mrrService{twelfths: cents * 12 / int64(order.BillingCycle(cycle).Months()), start: b.clock.Now(), reactivation: reactivation}
		s.id = b.activeOrder(t, customer, cycle, price)
		services = append(services, s)
		return s
	}
	ended := func(s *mrrService, status order.Status) {
		t.Helper()
		require.Equal(t, string(status), b.order(t, s.id).Status)
		s.end = b.clock.Now()
	}
	a, bc, c, d, e := testfixture.Customer(t, b.pool), testfixture.Customer(t, b.pool), testfixture.Customer(t, b.pool),
		testfixture.Customer(t, b.pool), testfixture.Customer(t, b.pool)

	a1 := buy(a, "monthly", "10.00", false)
	b.clock.Set(at(time.January, 2, 0))
	b1 := buy(bc, "monthly", "20.00", false)
	b.clock.Set(at(time.January, 3, 0))
	c1 := buy(c, "monthly", "15.00", false)
	_, err := store.Q(b.pool).SetOrderRenews(context.Background(), store.SetOrderRenewsParams{ID: c1.id, Renews: false, UpdatedAt: b.clock.Now()})
	require.NoError(t, err)
	b.clock.Set(at(time.January, 4, 0))
	buy(a, "annual", "100.00", false) // 8.333… a month, exact until answered
	b.clock.Set(at(time.January, 5, 0))
	buy(e, "quarterly", "30.00", false)
	b.clock.Set(at(time.January, 6, 0))
	d1 := buy(d, "monthly", "12.00", false)
	b.topUp(t, a, "100.00")

	// Jan 27: A1's renewal is issued and paid from the balance, B1's is
	// issued unpaid. Ahead: B1 renews by Feb 2 (7 days), D1 by Feb 6 (30
	// days); B1 is suspended on Feb 5 and terminated on Feb 16 (30 days).
	b.clock.Set(at(time.January, 27, 0))
	r := b.pass(t)
	require.Equal(t, 2, r.Issued)
	require.Equal(t, 1, r.AutoPaid)
	now := ask("", "")
	require.Len(t, now.Currencies, 1)
	cny := now.Currencies[0]
	require.Equal(t, payment.Ahead{Renewals: 1, RenewalCents: 2000}, cny.Near)
	require.Equal(t, payment.Ahead{Renewals: 2, RenewalCents: 3200, Suspensions: 1, SuspensionCents: 2000, Terminations: 1, TerminationCents: 2000}, cny.Far)
	require.Equal(t, b.liveMRR(t), cny.End.Amount.String())
	_, err = store.Q(b.pool).FoldRecurringRevenue(context.Background())
	require.NoError(t, err) // what follows reads folded changes and new ones

	b.clock.Set(at(time.January, 30, 0))
	require.Equal(t, 1, b.pass(t).Issued, "D1's renewal, unpaid")
	b.clock.Set(at(time.February, 3, 0))
	require.Equal(t, 1, b.pass(t).Ended, "C1 at its paid end, renewal off")
	ended(c1, order.StatusCompleted)
	b.clock.Set(at(time.February, 5, 0))
	require.Equal(t, 1, b.pass(t).Suspended, "B1")
	b.clock.Set(at(time.February, 9, 0))
	require.Equal(t, 1, b.pass(t).Suspended, "D1")
	require.Equal(t, b.liveMRR(t), ask("", "").Currencies[0].End.Amount.String(), "suspended services stay in MRR")
	b.clock.Set(at(time.February, 10, 0))
	buy(c, "monthly", "15.00", true) // C comes back
	b.clock.Set(at(time.February, 11, 0))
	b.topUp(t, d, "12.00")
	require.Equal(t, 1, b.pass(t).AutoPaid, "D1 paid and resumed")
	require.Equal(t, string(order.StatusActive), b.order(t, d1.id).Status)
	b.clock.Set(at(time.February, 16, 0))
	require.Equal(t, 1, b.pass(t).Terminated, "B1")
	ended(b1, order.StatusTerminated)
	b.clock.Set(at(time.February, 16, 5))
	require.Equal(t, string(order.StatusActive), b.order(t, a1.id).Status)

	day := func(s string) time.Time {
		d, err := time.Parse("2006-01-02", s)
		require.NoError(t, err)
		return d
	}
	for _, w := range []struct{ from, to string }{
		{"2027-01-01", "2027-01-31"}, {"2027-02-01", "2027-02-16"}, {"2026-12-20", "2027-02-16"},
		{"2027-01-10", "2027-02-04"}, {"2027-02-03", "2027-02-03"}, {"2027-02-10", "2027-02-16"},
	} {
		rr := ask(w.from, w.to)
		require.Len(t, rr.Currencies, 1, "%v", w)
		got := rr.Currencies[0]
		start, end, newBiz, churn, react := mrrModel(services, day(w.from), day(w.to).AddDate(0, 0, 1))
		require.Equal(t, payment.Twelfths(start), got.Start.Amount, "start of %v", w)
		require.Equal(t, payment.Twelfths(newBiz), got.New.Amount, "new in %v", w)
		require.Equal(t, payment.Twelfths(churn), got.Churn.Amount, "churn in %v", w)
		require.Equal(t, payment.Twelfths(react), got.Reactivation.Amount, "reactivation in %v", w)
		require.Equal(t, payment.Twelfths(end), got.End.Amount, "end of %v", w)
		require.Zero(t, got.Expansion.Amount, "no plan changes yet")
		require.Zero(t, got.Contraction.Amount, "no plan changes yet")
		require.Equal(t, got.End.Amount, got.Start.Amount+got.New.Amount+got.Expansion.Amount-got.Contraction.Amount-got.Churn.Amount+got.Reactivation.Amount,
			"the movements add up in %v", w)
		require.Equal(t, got.End, got.Days[len(got.Days)-1].End, "the last day ends at the range's end")
		var net payment.Movement
		for _, d := range got.Days {
			n := d.Net()
			net.Services += n.Services
			net.Amount += n.Amount
		}
		require.Equal(t, got.Net(), net, "the days add up to the range in %v", w)
	}
	today := ask("2027-02-01", "")
	require.Equal(t, b.liveMRR(t), today.Currencies[0].End.Amount.String())
	require.Equal(t, "55.33", today.Currencies[0].End.Amount.String(), "A1 10 + A2 8.33… + E1 10 + D1 12 + C2 15 (B1 and C1 ended)")
	require.Equal(t, ask("2027-01-01", "2027-01-31").Currencies[0].End, today.Currencies[0].Start, "consecutive ranges meet")
	b.checkMRRRollup(t, func() []payment.RecurringRevenue {
		return []payment.RecurringRevenue{ask("2027-01-01", "2027-01-31"), ask("2026-12-20", "2027-02-16"), ask("2027-02-10", "")}
	})
	b.checkMoney(t)
}

// checkMRRRollup: the answers of ask are the same before and after the
// changes are folded, and after the rollup and the renewal schedule are
// rebuilt from the records by migration 00015's backfills (what an
// upgraded database starts from): the triggers and the backfills write the
// same changes.
func (b *bundle) checkMRRRollup(t testing.TB, ask func() []payment.RecurringRevenue) {
	t.Helper()
	ctx := context.Background()
	want := ask()
	_, err := store.Q(b.pool).FoldRecurringRevenue(ctx)
	require.NoError(t, err)
	require.Equal(t, want, ask(), "folded")
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	_, err = tx.Exec(ctx, `LOCK TABLE orders IN SHARE ROW EXCLUSIVE MODE`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `TRUNCATE mrr_changes, mrr_quarters, mrr_days, mrr_totals, renewal_schedule_changes, renewal_schedule_quarters`)
	require.NoError(t, err)
	var added, scheduled int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT mrr_backfill()`).Scan(&added))
	require.NoError(t, tx.QueryRow(ctx, `SELECT renewal_schedule_install()`).Scan(&scheduled))
	added += scheduled
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, want, ask(), "rebuilt by the backfill, not folded")
	moved, err := store.Q(b.pool).FoldRecurringRevenue(ctx)
	require.NoError(t, err)
	require.Equal(t, added, moved)
	require.Equal(t, want, ask(), "rebuilt and folded")
}

// A service counts in MRR at the price it started at until a plan change
// or a repricing moves it: the move is expansion or contraction on its
// day, and a range that ends before it has the service at its old price.
// Two services: A monthly at 10.00, upgraded on Jan 11 to 30.00; B monthly
// at 30.00, downgraded on Jan 12 to 25.00, both now and paid (or credited)
// from the balance, and B's new product repriced for its orders to 28.00
// on Jan 15. Before the rollup (migration 00015) a service that started in
// a range counted at its price now, and its plan change again as
// expansion: A's start read 30.00, not 10.00.
func TestRecurringRevenueCountsAServiceAtItsPriceBeforeAPlanChange(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.January, 1, 0), defaults())
	admin := b.admin(t)
	pays := payment.NewService(b.pool, slog.New(slog.DiscardHandler))
	orders := order.NewService(b.pool, []string{"CNY"}, nil, b.clock.Now, slog.New(slog.DiscardHandler))
	ask := func(from, to string) payment.CurrencyMRR {
		t.Helper()
		rr, err := pays.RecurringRevenue(admin, payment.RecurringQuery{
			TrendQuery: payment.TrendQuery{From: from, To: to, Zone: "UTC"}, Now: b.clock.Now(),
		})
		require.NoError(t, err)
		require.Len(t, rr.Currencies, 1)
		c := rr.Currencies[0]
		require.Equal(t, c.End, func() payment.Movement {
			s := c.Start
			s.Services += c.Net().Services
			s.Amount += c.Net().Amount
			return s
		}(), "the movements add up in %s to %s", from, to)
		return c
	}
	month, product := monthTwelfths, func(price string) uuid.UUID { return b.monthlyProduct(t, price) }
	ca, cb := testfixture.Customer(t, b.pool), testfixture.Customer(t, b.pool)
	a := b.activeOrder(t, ca, "monthly", "10.00")
	b.clock.Set(at(time.January, 2, 0))
	bo := b.activeOrder(t, cb, "monthly", "30.00")
	b.topUp(t, ca, "100.00")

	b.clock.Set(at(time.January, 11, 0))
	res, err := orders.ChangeOrderPlan(asCustomer(ca), a, product("30.00"), store.PlanChangeNow)
	require.NoError(t, err)
	require.Equal(t, store.PlanChangeApplied, res.Change.Status, "the proration paid from the balance")
	b.clock.Set(at(time.January, 12, 0))
	cheaper := product("25.00")
	res, err = orders.ChangeOrderPlan(asCustomer(cb), bo, cheaper, store.PlanChangeNow)
	require.NoError(t, err)
	require.Equal(t, store.PlanChangeApplied, res.Change.Status, "a downgrade's credit")
	b.clock.Set(at(time.January, 20, 0))

	before := ask("2027-01-01", "2027-01-10")
	require.Equal(t, payment.Movement{}, before.Start)
	require.Equal(t, payment.Movement{Services: 2, Amount: month("40.00")}, before.New, "A at 10.00 and B at 30.00, the prices they started at")
	require.Equal(t, payment.Movement{Services: 2, Amount: month("40.00")}, before.End)

	changes := ask("2027-01-11", "2027-01-19")
	require.Equal(t, payment.Movement{Services: 2, Amount: month("40.00")}, changes.Start)
	require.Equal(t, payment.Movement{}, changes.New)
	require.Equal(t, payment.Movement{Amount: month("20.00")}, changes.Expansion)
	require.Equal(t, payment.Movement{Amount: month("5.00")}, changes.Contraction)
	require.Equal(t, payment.Movement{Services: 2, Amount: month("55.00")}, changes.End)
	require.Equal(t, month("20.00"), changes.Days[0].Expansion.Amount, "Jan 11")
	require.Equal(t, month("5.00"), changes.Days[1].Contraction.Amount, "Jan 12")

	all := ask("2027-01-01", "2027-01-19")
	require.Equal(t, payment.Movement{Services: 2, Amount: month("40.00")}, all.New)
	require.Equal(t, payment.Movement{Services: 2, Amount: month("55.00")}, all.End)
	require.Equal(t, b.liveMRR(t), all.End.Amount.String())
	b.checkMRRRollup(t, func() []payment.RecurringRevenue {
		var out []payment.RecurringRevenue
		for _, w := range [][2]string{{"2027-01-01", "2027-01-10"}, {"2027-01-11", "2027-01-19"}, {"2027-01-01", "2027-01-19"}, {"2027-01-05", "2027-01-05"}} {
			rr, err := pays.RecurringRevenue(admin, payment.RecurringQuery{
				TrendQuery: payment.TrendQuery{From: w[0], To: w[1], Zone: "Asia/Kathmandu"}, Now: b.clock.Now(),
			})
			require.NoError(t, err)
			out = append(out, rr)
		}
		return out
	})

	// Jan 20: the admin reprices B's new product to 28.00 for the orders
	// that have it: B's price moves by 3.00 that day, with no plan change.
	// (The backfill cannot know this: a repricing has no record but the
	// order's price.)
	dearer := money.MustParse("28.00")
	_, err = orders.UpdateProduct(admin, cheaper, order.ProductUpdate{Price: &dearer, ApplyToExistingOrders: true})
	require.NoError(t, err)
	require.Equal(t, "28.00", b.order(t, bo).RenewalPrice.Amount.String())
	repriced := ask("2027-01-11", "2027-01-20")
	require.Equal(t, payment.Movement{Amount: month("23.00")}, repriced.Expansion)
	require.Equal(t, month("3.00"), repriced.Days[9].Expansion.Amount, "Jan 20")
	require.Equal(t, payment.Movement{Services: 2, Amount: month("58.00")}, repriced.End)
	require.Equal(t, b.liveMRR(t), repriced.End.Amount.String())
}

// Two plan changes of one service at one instant each move MRR, and so do
// two repricings then: an upgrade from 10.00 to 30.00 paid from the
// balance and a downgrade to 20.00 credited back, at Jan 11 00:00; then the
// 20.00 product repriced for its orders to 22.00 and to 21.00, at the same
// instant. Every price move was keyed by the order and its time, so the
// downgrade and the repricings were dropped (TestRenewalModel found it:
// MRR 7.80 short, two changes of one order with the sequence's clock
// standing still); migration 00017 keys a plan change's move by the
// change and adds up a service's repricings of one instant.
func TestPlanChangesAtOneInstantEachMoveRecurringRevenue(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.January, 1, 0), defaults())
	admin := b.admin(t)
	pays := payment.NewService(b.pool, slog.New(slog.DiscardHandler))
	orders := order.NewService(b.pool, []string{"CNY"}, nil, b.clock.Now, slog.New(slog.DiscardHandler))
	month, product := monthTwelfths, func(price string) uuid.UUID { return b.monthlyProduct(t, price) }
	ask := func() payment.RecurringRevenue {
		t.Helper()
		rr, err := pays.RecurringRevenue(admin, payment.RecurringQuery{
			TrendQuery: payment.TrendQuery{From: "2027-01-01", To: "2027-01-19", Zone: "UTC"}, Now: b.clock.Now(),
		})
		require.NoError(t, err)
		require.Len(t, rr.Currencies, 1)
		return rr
	}
	c := testfixture.Customer(t, b.pool)
	a := b.activeOrder(t, c, "monthly", "10.00")
	b.topUp(t, c, "100.00")

	b.clock.Set(at(time.January, 11, 0))
	res, err := orders.ChangeOrderPlan(asCustomer(c), a, product("30.00"), store.PlanChangeNow)
	require.NoError(t, err)
	require.Equal(t, store.PlanChangeApplied, res.Change.Status, "the proration paid from the balance")
	mid := product("20.00")
	res, err = orders.ChangeOrderPlan(asCustomer(c), a, mid, store.PlanChangeNow)
	require.NoError(t, err)
	require.Equal(t, store.PlanChangeApplied, res.Change.Status, "a downgrade's credit")
	got := ask().Currencies[0]
	require.Equal(t, payment.Movement{Amount: month("20.00")}, got.Expansion)
	require.Equal(t, payment.Movement{Amount: month("10.00")}, got.Contraction, "the second change of the instant")
	require.Equal(t, payment.Movement{Services: 1, Amount: month("20.00")}, got.End)
	require.Equal(t, b.liveMRR(t), got.End.Amount.String())
	b.checkMRRRollup(t, func() []payment.RecurringRevenue { return []payment.RecurringRevenue{ask()} })

	// The repricings (which the rollup's rebuild cannot know: a repricing
	// has no record but the order's price), at the same instant.
	for _, p := range []string{"22.00", "21.00"} {
		price := money.MustParse(p)
		_, err = orders.UpdateProduct(admin, mid, order.ProductUpdate{Price: &price, ApplyToExistingOrders: true})
		require.NoError(t, err)
	}
	require.Equal(t, "21.00", b.order(t, a).RenewalPrice.Amount.String())
	got = ask().Currencies[0]
	require.Equal(t, payment.Movement{Amount: month("21.00")}, got.Expansion, "20.00 up, and 1.00 by the repricings")
	require.Equal(t, payment.Movement{Amount: month("10.00")}, got.Contraction)
	require.Equal(t, payment.Movement{Services: 1, Amount: month("21.00")}, got.End)
	require.Equal(t, b.liveMRR(t), got.End.Amount.String())
}

// monthTwelfths is a monthly price in MRR's twelfths of a cent.
func monthTwelfths(price string) payment.Twelfths {
	return payment.Twelfths(money.MustParse(price).Cents() * 12)
}

// monthlyProduct is a new monthly CNY product at price.
func (b *bundle) monthlyProduct(t *testing.T, price string) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	require.NoError(t, b.pool.QueryRow(context.Background(), `INSERT INTO products (name, price, currency, billing_cycle)
		VALUES ('VPS ' || $1::text, $1::numeric, 'CNY', 'monthly') RETURNING id`, price).Scan(&id))
	return id
}
