package renewal_test

import (
	"context"
	"flag"
	"os"
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
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/order/renewal"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
	"github.com/rustbill/paymentd/internal/testkit"
)

// modelChecks is how many sequences the test command runs; `task model`
// runs more (RAPID_CHECKS).
const modelChecks = 25

// modelOrder is what the model knows of one order.
type modelOrder struct {
	id     uuid.UUID
	months int
	// adminSuspended: an admin suspended it and has not resumed it.
	adminSuspended bool
	renewOff       bool
}

// The renewal cycle as a model: random recurring orders of one customer,
// a clock that runs through months in random steps, payments on time,
// late, never, or from a balance topped up later, admin suspensions and
// resumptions, renewal turned off, and billing passes cut off midway (a
// leader killed during its run) — and after every step:
//   - one invoice per (order, period): every later period has its own
//     invoice and every renewal invoice its period;
//   - the periods follow each other without gap, each ends where the
//     calendar rule puts it (the anchor plus whole cycles in the billing
//     time zone), and the order's paid_until is the last paid period's end;
//   - never suspended for non-payment while its last period is paid;
//   - never terminated before terminate_after_days past an unpaid due time;
//   - an admin's suspension is never lifted by a payment;
//   - at the end of each sequence, ledger.Verify is clean and the money
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
	ctx := context.Background()
	began := time.Now()
	var sequences, steps, passes, cut atomic.Int64
	var simulated atomic.Int64 // hours

	rapid.Check(t, func(rt *rapid.T) {
		sequences.Add(1)
		start := time.Date(2027, time.Month(rapid.IntRange(1, 12).Draw(rt, "month")), rapid.IntRange(1, 31).Draw(rt, "day"),
			rapid.IntRange(0, 23).Draw(rt, "hour"), 0, 0, 0, loc)
		clock := testkit.NewClockAt(start)
		run := renewal.New(b.pool, renewal.Options{
			Node: "model", Location: loc, InvoiceDays: opts.InvoiceDays, AutoApplyBalance: true,
			SuspendAfterDays: opts.SuspendAfterDays, TerminateAfterDays: opts.TerminateAfterDays,
			ReminderDaysBefore: opts.ReminderDaysBefore, OverdueReminderDays: opts.OverdueReminderDays,
			Clock: clock.Now, BatchSize: 3,
		})
		customer := testfixture.Customer(t, b.pool)
		b.clock.Set(start)
		var orders []*modelOrder
		for range rapid.IntRange(1, 3).Draw(rt, "orders") {
			cycle := rapid.SampledFrom([]string{"monthly", "quarterly", "annual"}).Draw(rt, "cycle")
			o := &modelOrder{id: b.activeOrder(t, customer, cycle, "7.00"), months: order.BillingCycle(cycle).Months()}
			orders = append(orders, o)
		}
		pass := func() {
			passes.Add(1)
			_, err := run.RunOnce(ctx)
			require.NoError(t, err)
		}
		withOrder := func(o *modelOrder, f func(tx pgx.Tx, ord store.Order) error) {
			require.NoError(t, store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
				ord, err := store.GetOrderForUpdate(ctx, tx, o.id)
				if err != nil {
					return err
				}
				return f(tx, ord)
			}))
		}
		before := clock.Now()
		for range rapid.IntRange(1, 25).Draw(rt, "steps") {
			steps.Add(1)
			switch rapid.IntRange(0, 9).Draw(rt, "action") {
			case 0, 1, 2: // time passes, the leader runs
				clock.Advance(time.Duration(rapid.Int64Range(1, 20*24).Draw(rt, "hours")) * time.Hour)
				pass()
			case 3: // a pass cut off midway, then a whole one
				cctx, cancel := context.WithTimeout(ctx, time.Duration(rapid.IntRange(0, 3000).Draw(rt, "µs"))*time.Microsecond)
				_, _ = run.RunOnce(cctx)
				cancel()
				cut.Add(1)
				pass()
			case 4, 5: // the customer tops up (pays, on time or late)
				topUp(t, b, customer, rapid.SampledFrom([]string{"7.00", "14.00", "3.50"}).Draw(rt, "top-up"), clock.Now())
				pass()
			case 6: // an admin suspends an active order
				o := rapid.SampledFrom(orders).Draw(rt, "order")
				withOrder(o, func(tx pgx.Tx, ord store.Order) error {
					if order.Status(ord.Status) != order.StatusActive {
						return nil
					}
					o.adminSuspended = true
					_, err := order.Transition(ctx, tx, ord, order.Move{To: order.StatusSuspended, SuspendReason: order.SuspendReasonAdmin, By: audit.System("admin"), At: store.Timestamp(clock.Now())})
					return err
				})
			case 7: // the admin resumes it
				o := rapid.SampledFrom(orders).Draw(rt, "order")
				withOrder(o, func(tx pgx.Tx, ord store.Order) error {
					if order.Status(ord.Status) != order.StatusSuspended || ord.SuspendReason != order.SuspendReasonAdmin {
						return nil
					}
					o.adminSuspended = false
					_, err := order.Transition(ctx, tx, ord, order.Move{To: order.StatusActive, By: audit.System("admin"), At: store.Timestamp(clock.Now())})
					return err
				})
				// The leader runs every interval: an order resumed while its
				// renewal is overdue past the suspension day is suspended
				// again by the next pass, which the check below then asks for.
				pass()
			case 8: // renewal turned off
				o := rapid.SampledFrom(orders).Draw(rt, "order")
				if !o.renewOff {
					o.renewOff = true
					_, err := store.SetOrderRenews(ctx, b.pool, o.id, false, clock.Now())
					require.NoError(t, err)
				}
			case 9: // nothing happens for months
				clock.Advance(time.Duration(rapid.IntRange(30, 120).Draw(rt, "days")) * 24 * time.Hour)
				pass()
			}
			for _, o := range orders {
				checkRenewalModel(t, b, o, clock.Now(), opts, loc)
			}
		}
		simulated.Add(int64(clock.Now().Sub(before) / time.Hour))
		testfixture.CheckMoneyInvariants(t, b.pool)
		rep, err := ledger.Verify(ctx, b.pool)
		require.NoError(t, err)
		require.True(t, rep.OK(), rep.String())
	})
	t.Logf("renewal model: %d sequences, %d steps, %d passes (%d cut off midway), %.0f simulated months, %s",
		sequences.Load(), steps.Load(), passes.Load(), cut.Load(), float64(simulated.Load())/24/30.44, time.Since(began).Round(time.Millisecond))
}

func topUp(t *testing.T, b *bundle, customer uuid.UUID, amount string, at time.Time) {
	t.Helper()
	b.clock.Set(at)
	b.topUp(t, customer, amount)
}

// checkRenewalModel checks the model's rules for one order as of now.
func checkRenewalModel(t *testing.T, b *bundle, o *modelOrder, now time.Time, opts renewal.Options, loc *time.Location) {
	t.Helper()
	ctx := context.Background()
	ord := b.order(t, o.id)
	ps := b.periods(t, o.id)
	require.NotEmpty(t, ps)
	var invoices int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM invoices WHERE order_id = $1`, o.id).Scan(&invoices))
	require.Equal(t, len(ps)-1, invoices, "one invoice per later period (order %s)", o.id)
	anchor := ps[0].StartsAt
	var lastPaid *store.ServicePeriod
	for i, p := range ps {
		require.EqualValues(t, i+1, p.Seq)
		if i > 0 {
			require.NotNil(t, p.InvoiceID, "period %d has its invoice", p.Seq)
			require.True(t, p.StartsAt.Equal(ps[i-1].EndsAt), "period %d starts where %d ended", p.Seq, i)
		}
		want := order.AddMonths(anchor, (i+1)*o.months, loc)
		require.True(t, p.EndsAt.Equal(want), "period %d ends %s, the calendar says %s", p.Seq, p.EndsAt, want)
		if p.Status == store.PeriodPaid {
			lastPaid = &ps[i]
		}
	}
	require.NotNil(t, lastPaid)
	if ord.PaidUntil != nil && lastPaid.Outcome == nil {
		require.True(t, ord.PaidUntil.Equal(lastPaid.EndsAt), "paid_until %s is the last paid end %s", ord.PaidUntil, lastPaid.EndsAt)
	}
	last := ps[len(ps)-1]
	st := order.Status(ord.Status)
	if st == order.StatusSuspended && ord.SuspendReason == order.SuspendReasonOverdue {
		require.Equal(t, store.PeriodUnpaid, last.Status, "suspended for non-payment while its last period is paid")
		require.False(t, now.Before(last.StartsAt.Add(time.Duration(opts.SuspendAfterDays)*24*time.Hour)), "suspended before suspend_after_days")
	}
	if st == order.StatusTerminated && last.Status == store.PeriodCancelled {
		require.False(t, last.UpdatedAt.Before(last.StartsAt.Add(time.Duration(opts.TerminateAfterDays)*24*time.Hour)),
			"terminated at %s, before terminate_after_days past the due time %s", last.UpdatedAt, last.StartsAt)
	}
	if o.adminSuspended {
		require.Contains(t, []order.Status{order.StatusSuspended, order.StatusTerminated, order.StatusCompleted}, st, "an admin's suspension lifted")
		if st == order.StatusSuspended {
			require.Equal(t, order.SuspendReasonAdmin, ord.SuspendReason)
		}
	}
	if st == order.StatusActive && last.Status == store.PeriodUnpaid {
		require.True(t, now.Before(last.StartsAt.Add(time.Duration(opts.SuspendAfterDays)*24*time.Hour+opts.Interval)) || o.renewOff || !ord.Renews,
			"active %s past the suspension day of its unpaid period due %s", now, last.StartsAt)
	}
}
