package renewal_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/balance"
	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/order/renewal"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
	"github.com/rustbill/paymentd/internal/testkit"
)

func TestMain(m *testing.M) { testdb.Main(m).Run() }

type bundle struct {
	pool  *pgxpool.Pool
	clock *testkit.Clock
	run   *renewal.Run
	// loc is the billing time zone the first periods start in, as the
	// worker's activation counts them.
	loc *time.Location
}

func setup(t *testing.T, start time.Time, opts renewal.Options) *bundle {
	t.Helper()
	b := &bundle{pool: testdb.Pool(t), clock: testkit.NewClockAt(start), loc: opts.Location}
	opts.Clock, opts.Node = b.clock.Now, "node-test"
	b.run = renewal.New(b.pool, opts)
	return b
}

func defaults() renewal.Options { return renewal.DefaultOptions() }

// activeOrder is a recurring order of customer that went active at the
// clock's now, its first period started.
func (b *bundle) activeOrder(t testing.TB, customer uuid.UUID, cycle, price string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	var id uuid.UUID
	// The first period costs nothing (an order of 0.00 needs no payment
	// record); the later ones cost price.
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO orders (customer_id, total_amount, currency, status, billing_cycle, renewal_price, paid_at, description)
		VALUES ($1, 0, 'CNY', 'provisioning', $3, $2, $4, 'VPS') RETURNING id`, customer, money.MustParse(price), cycle, b.clock.Now()).Scan(&id))
	require.NoError(t, store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		body, err := json.Marshal(order.OrderPaidPayload{OrderID: id, Amount: money.MustParse("0.00"), Currency: "CNY", Method: order.MethodBalance})
		require.NoError(t, err)
		return store.AppendEvent(ctx, tx, order.EventOrderPaid, id, body)
	}))
	require.NoError(t, store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		o, err := store.Q(tx).GetOrderForUpdate(ctx, id)
		require.NoError(t, err)
		_, err = order.Transition(ctx, tx, o, order.Move{To: order.StatusActive, By: audit.System("test"), At: store.Timestamp(b.clock.Now()), Location: b.loc})
		return err
	}))
	return id
}

func (b *bundle) pass(t *testing.T) renewal.Round {
	t.Helper()
	r, err := b.run.RunOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, r.Errors)
	return r
}

func (b *bundle) order(t testing.TB, id uuid.UUID) store.Order {
	t.Helper()
	o, err := store.Q(b.pool).GetOrder(context.Background(), id)
	require.NoError(t, err)
	return o
}

func (b *bundle) periods(t testing.TB, id uuid.UUID) []store.ServicePeriod {
	t.Helper()
	ps, err := store.Q(b.pool).ListServicePeriods(context.Background(), id)
	require.NoError(t, err)
	return ps
}

func (b *bundle) invoice(t testing.TB, id uuid.UUID) store.Invoice {
	t.Helper()
	inv, err := store.Q(b.pool).GetInvoice(context.Background(), id)
	require.NoError(t, err)
	return inv
}

// topUp credits the customer's balance by amount, as an admin's manual
// adjustment does (a ledger row, so the ledger stays whole).
func (b *bundle) topUp(t testing.TB, customer uuid.UUID, amount string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := balance.Post(ctx, tx, balance.Entry{CustomerID: customer, Kind: balance.ManualAdjust, Amount: money.MustParse(amount),
			Description: "top-up", By: audit.System("test"), At: store.Timestamp(b.clock.Now())})
		return err
	}))
}

// eventTypes are the order's events but its reminders (b.reminders), in
// order.
func (b *bundle) eventTypes(t *testing.T, orderID uuid.UUID) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT event_type FROM events WHERE order_id = $1 AND event_type <> 'renewal_reminder'
		ORDER BY created_at, id`, orderID)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

func (b *bundle) checkMoney(t testing.TB) {
	t.Helper()
	testfixture.CheckMoneyInvariants(t, b.pool)
	rep, err := ledger.Verify(context.Background(), b.pool)
	require.NoError(t, err)
	require.True(t, rep.OK(), rep.String())
}

func at(m time.Month, d, h int) time.Time { return time.Date(2027, m, d, h, 0, 0, 0, time.UTC) }

// A monthly service bought on Jan 31: its periods end on the anchor day or
// the month's last (Feb 28, Mar 31); the invoice comes 7 days before the
// end, goes unpaid, suspends the service 3 days past due; paying it
// resumes the service from the previous end, not from the payment day.
func TestAMonthlyServiceIsInvoicedSuspendedAndResumedOnTime(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.January, 31, 10), defaults())
	customer := testfixture.Customer(t, b.pool)
	id := b.activeOrder(t, customer, "monthly", "10.00")
	ps := b.periods(t, id)
	require.Len(t, ps, 1)
	require.Equal(t, at(time.February, 28, 10), ps[0].EndsAt.UTC())

	b.clock.Set(at(time.February, 21, 9)) // 7 days and an hour before the end
	require.Zero(t, b.pass(t).Issued)
	b.clock.Set(at(time.February, 21, 10))
	require.Equal(t, 1, b.pass(t).Issued)
	require.Zero(t, b.pass(t).Issued, "a second pass issues nothing")
	ps = b.periods(t, id)
	require.Len(t, ps, 2)
	require.Equal(t, store.PeriodUnpaid, ps[1].Status)
	require.Equal(t, at(time.February, 28, 10), ps[1].StartsAt.UTC())
	require.Equal(t, at(time.March, 31, 10), ps[1].EndsAt.UTC(), "the anchor day comes back")
	inv := b.invoice(t, *ps[1].InvoiceID)
	require.Equal(t, "10.00", inv.Amount.String())
	require.Equal(t, at(time.February, 28, 10), inv.DueAt.UTC())
	require.Equal(t, string(order.InvoiceIssued), inv.Status)

	b.clock.Set(at(time.March, 3, 9))
	require.Zero(t, b.pass(t).Suspended, "not yet 3 days past due")
	b.clock.Set(at(time.March, 3, 10))
	require.Equal(t, 1, b.pass(t).Suspended)
	o := b.order(t, id)
	require.Equal(t, string(order.StatusSuspended), o.Status)
	require.Equal(t, order.SuspendReasonOverdue, o.SuspendReason)

	// The customer tops up on Mar 5: the next pass pays from the balance,
	// the period runs from Feb 28 to Mar 31, and the service resumes.
	b.topUp(t, customer, "25.00")
	b.clock.Set(at(time.March, 5, 12))
	r := b.pass(t)
	require.Equal(t, 1, r.AutoPaid)
	o = b.order(t, id)
	require.Equal(t, string(order.StatusActive), o.Status)
	require.Empty(t, o.SuspendReason)
	ps = b.periods(t, id)
	require.Equal(t, store.PeriodPaid, ps[1].Status)
	require.Equal(t, at(time.March, 31, 10), ps[1].EndsAt.UTC(), "extended from the previous end, not from the payment")
	require.Equal(t, store.OutcomeRenewed, *ps[0].Outcome)
	require.Equal(t, string(order.InvoicePaid), b.invoice(t, *ps[1].InvoiceID).Status)
	evs := b.eventTypes(t, id)
	require.Equal(t, []string{event.TypeOrderPaid, event.TypeOrderProvisioned, event.TypeServiceSuspended}, evs[:3])
	// Renewed and resumed are queued in one transaction.
	require.ElementsMatch(t, []string{event.TypeServiceRenewed, event.TypeServiceResumed}, evs[3:])
	acct, err := store.GetBalanceAccount(context.Background(), b.pool, customer)
	require.NoError(t, err)
	require.Equal(t, "15.00", acct.Balance.String())
	b.checkMoney(t)
}

// With enough balance the invoice is paid the moment it is issued, and the
// service never falls due.
func TestARenewalIsPaidFromTheBalanceWhenIssued(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.January, 15, 0), defaults())
	customer := testfixture.Customer(t, b.pool)
	b.topUp(t, customer, "100.00")
	id := b.activeOrder(t, customer, "quarterly", "30.00")
	for _, m := range []time.Month{time.April, time.July, time.October} {
		b.clock.Set(time.Date(2027, m, 8, 0, 0, 0, 0, time.UTC))
		r := b.pass(t)
		require.Equal(t, 1, r.Issued, "%s", m)
		require.Equal(t, 1, r.AutoPaid, "%s", m)
	}
	ps := b.periods(t, id)
	require.Len(t, ps, 4)
	require.Equal(t, time.Date(2028, time.January, 15, 0, 0, 0, 0, time.UTC), ps[3].EndsAt.UTC())
	acct, err := store.GetBalanceAccount(context.Background(), b.pool, customer)
	require.NoError(t, err)
	require.Equal(t, "10.00", acct.Balance.String())
	// The fourth renewal is not covered: issued, left unpaid.
	b.clock.Set(time.Date(2028, time.January, 8, 0, 0, 0, 0, time.UTC))
	r := b.pass(t)
	require.Equal(t, 1, r.Issued)
	require.Zero(t, r.AutoPaid)
	require.Equal(t, string(order.StatusActive), b.order(t, id).Status)
	b.checkMoney(t)
}

// Unpaid to the end: suspended at 3 days, terminated at 14, the invoice
// cancelled, the periods closed; with both steps off nothing happens.
func TestAnUnpaidServiceIsTerminatedAndItsInvoiceCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.March, 1, 0), defaults())
	customer := testfixture.Customer(t, b.pool)
	id := b.activeOrder(t, customer, "monthly", "10.00")
	b.clock.Set(at(time.March, 30, 0))
	require.Equal(t, 1, b.pass(t).Issued)
	b.clock.Set(at(time.April, 14, 23))
	r := b.pass(t)
	require.Equal(t, 1, r.Suspended)
	require.Zero(t, r.Terminated)
	b.clock.Set(at(time.April, 15, 0))
	require.Equal(t, 1, b.pass(t).Terminated)
	o := b.order(t, id)
	require.Equal(t, string(order.StatusTerminated), o.Status)
	ps := b.periods(t, id)
	require.Equal(t, store.OutcomeEnded, *ps[0].Outcome)
	require.Equal(t, store.PeriodCancelled, ps[1].Status)
	require.Equal(t, store.OutcomeUnpaid, *ps[1].Outcome)
	require.Equal(t, string(order.InvoiceCancelled), b.invoice(t, *ps[1].InvoiceID).Status)
	require.Equal(t, []string{event.TypeOrderPaid, event.TypeOrderProvisioned, event.TypeServiceSuspended, event.TypeServiceTerminated}, b.eventTypes(t, id))
	require.Zero(t, b.pass(t), "nothing more to do")

	off := defaults()
	off.SuspendAfterDays, off.TerminateAfterDays = 0, 0
	b2 := setup(t, at(time.March, 1, 0), off)
	id2 := b2.activeOrder(t, testfixture.Customer(t, b2.pool), "monthly", "10.00")
	b2.clock.Set(at(time.March, 30, 0))
	require.Equal(t, 1, b2.pass(t).Issued)
	b2.clock.Set(at(time.December, 1, 0))
	r = b2.pass(t)
	require.Zero(t, r.Suspended)
	require.Zero(t, r.Terminated)
	require.Equal(t, string(order.StatusActive), b2.order(t, id2).Status)
}

// Renewal turned off: no invoice, and the service ends when its period
// does.
func TestAServiceWhoseRenewalIsOffEndsAtItsPeriodEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.May, 10, 0), defaults())
	id := b.activeOrder(t, testfixture.Customer(t, b.pool), "monthly", "10.00")
	_, err := store.Q(b.pool).SetOrderRenews(context.Background(), store.SetOrderRenewsParams{
		ID: id, Renews: false, UpdatedAt: b.clock.Now(),
	})
	require.NoError(t, err)
	b.clock.Set(at(time.June, 9, 23))
	require.Zero(t, b.pass(t))
	b.clock.Set(at(time.June, 10, 0))
	require.Equal(t, 1, b.pass(t).Ended)
	require.Equal(t, string(order.StatusCompleted), b.order(t, id).Status)
	require.Len(t, b.periods(t, id), 1)
}

// Down for months: one pass issues each order's missing invoice once, and
// concurrent passes (two leaders for a moment) still issue one invoice per
// period: the primary key refuses the second.
func TestCatchUpAndConcurrentPassesIssueEachInvoiceOnce(t *testing.T) {
	t.Parallel()
	opts := defaults()
	opts.BatchSize = 7
	b := setup(t, at(time.January, 1, 0), opts)
	const orders = 40
	var ids []uuid.UUID
	for range orders {
		ids = append(ids, b.activeOrder(t, testfixture.Customer(t, b.pool), "monthly", "5.00"))
	}
	b.clock.Set(at(time.January, 29, 0))
	// The passes report to the test goroutine, which alone may fail the
	// test (a require in a goroutine would end it as a timeout).
	type pass struct {
		round renewal.Round
		err   error
	}
	runs := make(chan pass, 3)
	for range 3 {
		go func() {
			r, err := renewal.New(b.pool, renewal.Options{Clock: b.clock.Now, Node: "n", BatchSize: 7, InvoiceDays: 7,
				SuspendAfterDays: 3, TerminateAfterDays: 14}).RunOnce(context.Background())
			runs <- pass{r, err}
		}()
	}
	issued := 0
	for range 3 {
		p := testkit.WaitOrTimeout(t, runs, "a pass")
		require.NoError(t, p.err)
		issued += p.round.Issued
	}
	require.Equal(t, orders, issued, "each invoice once across the three passes")
	var invoices int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM invoices`).Scan(&invoices))
	require.Equal(t, orders, invoices)
	for _, id := range ids {
		require.Len(t, b.periods(t, id), 2)
	}
}

// reminders are the kinds and days of the order's renewal_reminder events,
// in order.
func (b *bundle) reminders(t *testing.T, orderID uuid.UUID) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT payload->>'kind' || ':' || (payload->>'days') FROM events
		WHERE order_id = $1 AND event_type = 'renewal_reminder' ORDER BY created_at, id`, orderID)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// The customer hears of an unpaid renewal invoice when it is issued, 3
// days before it is due, 1 and 7 days after; each once however many passes
// run, and a run that was down past several reminder days sends the latest
// one only.
func TestRenewalRemindersAreSentOnceEachOnTheirDays(t *testing.T) {
	t.Parallel()
	opts := defaults()
	opts.SuspendAfterDays, opts.TerminateAfterDays = 0, 0
	b := setup(t, at(time.March, 1, 0), opts)
	id := b.activeOrder(t, testfixture.Customer(t, b.pool), "monthly", "10.00") // due Apr 1
	steps := []struct {
		at   time.Time
		want []string
	}{
		{at(time.March, 25, 0), []string{"issued:7"}},
		{at(time.March, 27, 0), []string{"issued:7"}},
		{at(time.March, 29, 0), []string{"issued:7", "due_soon:3"}},
		{at(time.March, 31, 0), []string{"issued:7", "due_soon:3"}},
		{at(time.April, 2, 0), []string{"issued:7", "due_soon:3", "overdue:1"}},
		{at(time.April, 8, 0), []string{"issued:7", "due_soon:3", "overdue:1", "overdue:7"}},
		{at(time.April, 30, 0), []string{"issued:7", "due_soon:3", "overdue:1", "overdue:7"}},
	}
	for _, s := range steps {
		b.clock.Set(s.at)
		b.pass(t)
		b.pass(t)
		require.Equal(t, s.want, b.reminders(t, id), "at %s", s.at)
	}

	// Down from before the due day to 8 days past it: one reminder, the
	// 7-day one, which stands for the day-1 one.
	b2 := setup(t, at(time.March, 1, 0), opts)
	id2 := b2.activeOrder(t, testfixture.Customer(t, b2.pool), "monthly", "10.00")
	b2.clock.Set(at(time.March, 25, 0))
	b2.pass(t)
	b2.clock.Set(at(time.April, 9, 0))
	b2.pass(t)
	b2.pass(t)
	require.Equal(t, []string{"issued:7", "overdue:7"}, b2.reminders(t, id2))
}

// A pass after a move of the clock (the billing test clock's advance) is
// the first pass to see it: the periodic passes of the same Run, running
// back to back here, wait, so the pass reports the invoice that fell due.
// (Planted: RunAfter without the turn, the move followed by RunOnce; the
// periodic pass issued the invoice during the move and the reported pass
// found none.)
func TestAPassAfterAMoveOfTheClockIsTheFirstToSeeIt(t *testing.T) {
	t.Parallel()
	opts := defaults()
	opts.Interval = time.Millisecond
	b := setup(t, at(time.January, 1, 0), opts)
	id := b.activeOrder(t, testfixture.Customer(t, b.pool), "monthly", "5.00")
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, b.run.Start(ctx))
	t.Cleanup(func() { cancel(); b.run.Stop() })

	r, err := b.run.RunAfter(ctx, func() {
		b.clock.Set(at(time.January, 29, 0))
		// Time for a periodic pass to start, were it allowed to.
		time.Sleep(50 * time.Millisecond)
	})
	require.NoError(t, err)
	require.Equal(t, 1, r.Issued, "the pass after the move issues the renewal invoice")
	require.Len(t, b.periods(t, id), 2)
}
