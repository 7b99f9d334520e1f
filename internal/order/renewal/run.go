package renewal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
)

// DB is what the run needs of the database: reads for its scans and a
// transaction per order.
type DB interface {
	store.DB
	store.TxBeginner
}

// Run is the billing run. RunOnce is one pass; the billing leader calls it
// every Options.Interval.
type Run struct {
	db   DB
	opts Options
	log  *slog.Logger
	loop startstop.Loop

	// leftForAdmin are the partly paid renewal invoices past their
	// termination day already logged: each is logged once per process,
	// not on every pass (the metric and the overview keep counting them).
	mu           sync.Mutex
	leftForAdmin map[uuid.UUID]bool

	// passes makes this Run's passes take turns, so that RunAfter's pass
	// is the first to see what its move changed.
	passes sync.Mutex
}

// Start runs a pass every Options.Interval, while Options.Active says so,
// until ctx is cancelled or Stop is called.
func (r *Run) Start(ctx context.Context) error {
	if err := r.loop.Start(ctx, func(ctx context.Context, _ <-chan struct{}) { r.every(ctx) }); err != nil {
		return err
	}
	r.log.Info("billing run started", "interval", r.opts.Interval.String(), "renewal_invoice_days", r.opts.InvoiceDays,
		"suspend_after_days", r.opts.SuspendAfterDays, "terminate_after_days", r.opts.TerminateAfterDays,
		"auto_apply_balance", r.opts.AutoApplyBalance, "time_zone", r.opts.Location.String())
	return nil
}

// followerPoll is how often an instance that does not lead looks whether
// it does now.
const followerPoll = time.Second

// Stop ends the passes and waits for the one in progress.
func (r *Run) Stop() { r.loop.Stop() }

// Now is the billing clock's time (the test clock's, when it is on).
func (r *Run) Now() time.Time { return r.opts.Clock() }

// TerminateAfter is how long past due an unpaid renewal invoice ends the
// service (0: never).
func (r *Run) TerminateAfter() time.Duration { return time.Duration(r.opts.TerminateAfterDays) * day }

// PartlyPaidPastTermination counts the live orders whose renewal invoice
// is partly paid and past the termination day as of the billing clock: the
// ones the run leaves for an admin (the metric
// renewal_partly_paid_past_termination). 0 while the run ends no service.
func (r *Run) PartlyPaidPastTermination(ctx context.Context) (int64, error) {
	if r.TerminateAfter() <= 0 {
		return 0, nil
	}
	return store.Q(r.db).CountPartlyPaidPastTermination(ctx, store.CountPartlyPaidPastTerminationParams{
		DueBefore: r.Now().Add(-r.TerminateAfter()), LiveStatuses: order.LiveStatuses(),
	})
}

// SuspendAfter is how long past due an unpaid renewal invoice suspends the
// service (0: never); with TerminateAfter, what GetRenewalOverview tells
// of the run's settings.
func (r *Run) SuspendAfter() time.Duration { return time.Duration(r.opts.SuspendAfterDays) * day }

func (r *Run) every(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(r.round(ctx))
	}
}

// round runs a pass when this instance may, and says when to look again.
func (r *Run) round(ctx context.Context) (next time.Duration) {
	r.opts.Rounds.Begin()
	defer r.opts.Rounds.Done()
	if r.opts.Active == nil || r.opts.Active() {
		if _, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
			r.log.ErrorContext(ctx, "billing run failed; tried again at the next interval", "err", err)
		}
		return r.opts.Interval
	}
	// A follower looks every second, so that it runs at once when it
	// takes the role over, not an interval later.
	return min(r.opts.Interval, followerPoll)
}

// New returns a run over db. A zero Location, Interval, BatchSize or Clock
// takes its default; the other options are read as given, so a zero
// SuspendAfterDays or TerminateAfterDays turns that step off, and a zero
// ReminderDaysBefore sends no reminder (DefaultOptions has every default).
func New(db DB, opts Options) *Run {
	d := DefaultOptions()
	if opts.Location == nil {
		opts.Location = d.Location
	}
	if opts.Interval <= 0 {
		opts.Interval = d.Interval
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = d.BatchSize
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Run{db: db, opts: opts, log: log.With("role", "billing"), leftForAdmin: map[uuid.UUID]bool{}}
}

// Round is what one pass did.
type Round struct {
	Issued, AutoPaid, Overdue, Suspended, Terminated, Ended, Reminded int
	// PlanChanged counts the period-end plan changes that took effect,
	// PlanLapsed the unpaid prorations that lapsed.
	PlanChanged, PlanLapsed int
	// CardCharged counts the renewal invoices a saved method paid.
	CardCharged int
	// Errors counts the orders a step failed for; each is tried again on
	// the next pass.
	Errors int
}

// day is a billing day: the settings count whole days of 24 hours.
const day = 24 * time.Hour

// RunOnce is one pass of the billing run as of the billing clock's now.
// Issued invoices past due become overdue (order.MarkOverdueInvoices), then:
//
//  1. every renewing order whose paid period ends within InvoiceDays gets
//     the next period and its invoice, due at the period's end, paid at
//     once from the balance when AutoApplyBalance and the balance covers
//     it;
//  2. every unpaid renewal invoice that the customer's balance now covers
//     (topped up since) is paid from it, when AutoApplyBalance;
//  3. every service whose paid period has ended and that does not renew
//     ends (completed; terminated if it was suspended);
//  4. every active order whose renewal invoice is SuspendAfterDays past
//     due is suspended (reason overdue);
//  5. every active or suspended order whose renewal invoice is
//     TerminateAfterDays past due ends (terminated), the invoice cancelled;
//  6. every period-end plan change whose period has started takes effect
//     (order.ApplyDuePlanChange), and every upgrade whose proration
//     invoice is unpaid at its lapse time lapses (order.LapsePlanChange).
//
// Each order is one transaction (the renewal invoices: a batch of orders,
// issueAll, retried one order at a time when the batch fails), locked
// customer → order → invoice, and each step checks its condition again
// under the locks, so a pass that
// stops anywhere leaves nothing half done, a pass run twice (two leaders
// for a moment, a restart) does nothing twice, and a pass after downtime
// catches up on everything that fell due meanwhile. The database holds the
// last word: a second invoice for a period is refused by service_periods'
// primary key.
func (r *Run) RunOnce(ctx context.Context) (Round, error) {
	return r.RunAfter(ctx, nil)
}

// RunAfter runs move, when not nil, and then a pass (RunOnce), with no
// other pass of this Run in between: the billing test clock moves its
// clock this way, so that the pass it reports is the one that finds what
// fell due, not the periodic pass that happened to start first.
func (r *Run) RunAfter(ctx context.Context, move func()) (Round, error) {
	r.passes.Lock()
	defer r.passes.Unlock()
	if move != nil {
		move()
	}
	return r.pass(ctx)
}

func (r *Run) pass(ctx context.Context) (Round, error) {
	now := store.Timestamp(r.opts.Clock())
	by := audit.System(r.opts.Node)
	var round Round
	// Invoices past due are overdue first: the billing run is the one
	// place that marks them, on the billing clock (which the test clock
	// moves), so every later step sees them overdue.
	overdue, err := order.MarkOverdueInvoices(ctx, r.db, now, by)
	if err != nil {
		return round, fmt.Errorf("billing run: overdue invoices: %w", err)
	}
	round.Overdue = int(overdue)
	type step struct {
		name string
		on   bool
		scan func(ctx context.Context, limit int) ([]uuid.UUID, error)
		// act acts on a scan's new orders: what it did and its error,
		// for each (eachOrder for a step that takes them one at a time).
		act  func(ctx context.Context, ids []uuid.UUID) []outcome
		done *int
	}
	steps := []step{
		{name: "renewal invoice", on: true, scan: func(ctx context.Context, limit int) ([]uuid.UUID, error) {
			return store.Q(r.db).ListRenewalsDue(ctx, store.ListRenewalsDueParams{
				EndsBefore:   now.Add(time.Duration(r.opts.InvoiceDays) * day),
				LiveStatuses: order.LiveStatuses(),
				MaxRows:      int32(limit),
			})
		}, act: func(ctx context.Context, ids []uuid.UUID) []outcome {
			out := r.issueAll(ctx, ids, now, by)
			for _, o := range out {
				if o.paid {
					round.AutoPaid++
				}
			}
			return out
		}, done: &round.Issued},
		{name: "balance payment", on: r.opts.AutoApplyBalance, scan: func(ctx context.Context, limit int) ([]uuid.UUID, error) {
			return store.Q(r.db).ListUnpaidPeriodsCoveredByBalance(ctx, store.ListUnpaidPeriodsCoveredByBalanceParams{
				DueBefore: now.Add(366 * day), LiveStatuses: order.LiveStatuses(), MaxRows: int32(limit),
			})
		}, act: eachOrder(func(ctx context.Context, id uuid.UUID) (bool, error) {
			return r.payFromBalance(ctx, id, now, by)
		}), done: &round.AutoPaid},
		{name: "reminder", on: r.opts.ReminderDaysBefore > 0 || len(r.opts.OverdueReminderDays) > 0, scan: func(ctx context.Context, limit int) ([]uuid.UUID, error) {
			// Unpaid periods are few (the invoices outstanding): the scan
			// reads them all, page by page, and keeps those a reminder is
			// due for.
			var ids []uuid.UUID
			for skip := 0; len(ids) < limit; skip += r.opts.BatchSize {
				rows, err := store.Q(r.db).ListUnpaidPeriodsForNotices(ctx, store.ListUnpaidPeriodsForNoticesParams{
					DueBefore:    now.Add(time.Duration(r.opts.ReminderDaysBefore) * day),
					LiveStatuses: order.LiveStatuses(),
					MaxRows:      int32(r.opts.BatchSize),
					Skip:         int32(skip),
				})
				if err != nil {
					return nil, err
				}
				for _, p := range rows {
					if r.notice(p.StartsAt, p.Notices, now).kind != "" && len(ids) < limit {
						ids = append(ids, p.OrderID)
					}
				}
				if len(rows) < r.opts.BatchSize {
					break
				}
			}
			return ids, nil
		}, act: eachOrder(func(ctx context.Context, id uuid.UUID) (bool, error) {
			return r.remind(ctx, id, now)
		}), done: &round.Reminded},
		{name: "end of service", on: true, scan: func(ctx context.Context, limit int) ([]uuid.UUID, error) {
			return store.Q(r.db).ListServicesEnding(ctx, store.ListServicesEndingParams{
				Now: now, LiveStatuses: order.LiveStatuses(), MaxRows: int32(limit),
			})
		}, act: eachOrder(func(ctx context.Context, id uuid.UUID) (bool, error) {
			return r.end(ctx, id, now, by)
		}), done: &round.Ended},
		{name: "suspension", on: r.opts.SuspendAfterDays > 0, scan: func(ctx context.Context, limit int) ([]uuid.UUID, error) {
			return store.Q(r.db).ListUnpaidPeriodsDue(ctx, store.ListUnpaidPeriodsDueParams{
				DueBefore: now.Add(-time.Duration(r.opts.SuspendAfterDays) * day),
				Statuses:  []string{string(order.StatusActive)},
				MaxRows:   int32(limit),
			})
		}, act: eachOrder(func(ctx context.Context, id uuid.UUID) (bool, error) {
			return r.suspend(ctx, id, now, by)
		}), done: &round.Suspended},
		{name: "termination", on: r.opts.TerminateAfterDays > 0, scan: func(ctx context.Context, limit int) ([]uuid.UUID, error) {
			return store.Q(r.db).ListUnpaidPeriodsDue(ctx, store.ListUnpaidPeriodsDueParams{
				DueBefore: now.Add(-time.Duration(r.opts.TerminateAfterDays) * day),
				Statuses:  order.LiveStatuses(),
				MaxRows:   int32(limit),
			})
		}, act: eachOrder(func(ctx context.Context, id uuid.UUID) (bool, error) {
			return r.terminate(ctx, id, now, by)
		}), done: &round.Terminated},
		{name: "plan change", on: true, scan: func(ctx context.Context, limit int) ([]uuid.UUID, error) {
			return store.Q(r.db).ListPlanChangesDue(ctx, store.ListPlanChangesDueParams{Now: &now, MaxRows: int32(limit)})
		}, act: eachOrder(func(ctx context.Context, id uuid.UUID) (bool, error) {
			return r.planChange(ctx, id, now, by, order.ApplyDuePlanChange)
		}), done: &round.PlanChanged},
		{name: "plan change lapse", on: true, scan: func(ctx context.Context, limit int) ([]uuid.UUID, error) {
			return store.Q(r.db).ListPlanChangesLapsing(ctx, store.ListPlanChangesLapsingParams{Now: &now, MaxRows: int32(limit)})
		}, act: eachOrder(func(ctx context.Context, id uuid.UUID) (bool, error) {
			return r.planChange(ctx, id, now, by, order.LapsePlanChange)
		}), done: &round.PlanLapsed},
	}
	for _, s := range steps {
		if !s.on {
			continue
		}
		// Scan, act on each order, scan again until a scan finds nothing
		// new: an order a step failed for is left for the next pass.
		tried := map[uuid.UUID]bool{}
		for {
			limit := r.opts.BatchSize + len(tried)
			ids, err := s.scan(ctx, limit)
			if err != nil {
				return round, fmt.Errorf("billing run: %s scan: %w", s.name, err)
			}
			var fresh []uuid.UUID
			for _, id := range ids {
				if !tried[id] {
					tried[id], fresh = true, append(fresh, id)
				}
			}
			out := s.act(ctx, fresh)
			for i, id := range fresh {
				switch o := out[i]; {
				case o.err != nil && ctx.Err() != nil:
					return round, ctx.Err()
				case o.err != nil:
					round.Errors++
					r.log.ErrorContext(ctx, "billing run: "+s.name+" failed; tried again on the next pass", "order_id", id, "err", o.err)
				case o.did:
					*s.done++
				}
			}
			if ctx.Err() != nil {
				return round, ctx.Err()
			}
			if len(fresh) == 0 || len(ids) < limit {
				break
			}
		}
		if s.name == "balance payment" && r.opts.ChargeSaved != nil {
			// What the balance did not cover, the saved card pays.
			n, err := r.opts.ChargeSaved(ctx)
			round.CardCharged += n
			if err != nil {
				if ctx.Err() != nil {
					return round, ctx.Err()
				}
				round.Errors++
				r.log.ErrorContext(ctx, "billing run: saved-method charges failed; tried again on the next pass", "err", err)
			}
		}
	}
	if round != (Round{}) {
		r.log.InfoContext(ctx, "billing run", "issued", round.Issued, "auto_paid", round.AutoPaid, "overdue", round.Overdue,
			"reminded", round.Reminded, "card_charged", round.CardCharged, "suspended", round.Suspended,
			"plan_changed", round.PlanChanged, "plan_lapsed", round.PlanLapsed,
			"terminated", round.Terminated, "ended", round.Ended, "errors", round.Errors)
	}
	return round, nil
}

// locked is an order with its customer's balance, locked in that order.
type locked struct {
	acct store.BalanceAccount
	o    store.Order
}

// lockOrder locks the order's customer, then the order, in tx.
func lockOrder(ctx context.Context, tx pgx.Tx, id uuid.UUID) (locked, error) {
	// The customer found through the order, then the order, in one round
	// trip: the lock order of every balance change.
	acct, o, err := store.LockForBalancePayment(ctx, tx, id)
	if err != nil {
		return locked{}, store.BugIfNotFound(err, "lock the customer, then the order")
	}
	return locked{acct: acct, o: o}, nil
}

// live reports whether o's service runs (order.Status.Live, the set the
// scans take as order.LiveStatuses): each step checks it again under the
// order's lock.
func live(o store.Order) bool { return order.Status(o.Status).Live() }

// outcome is what a step did for one order, and its error; paid, for the
// renewal step, that the invoice it issued was paid from the balance.
type outcome struct {
	did, paid bool
	err       error
}

// eachOrder is a step's act that takes the orders one at a time, each in
// a transaction of its own, until ctx ends.
func eachOrder(act func(ctx context.Context, id uuid.UUID) (bool, error)) func(context.Context, []uuid.UUID) []outcome {
	return func(ctx context.Context, ids []uuid.UUID) []outcome {
		out := make([]outcome, len(ids))
		for i, id := range ids {
			if out[i].did, out[i].err = act(ctx, id); ctx.Err() != nil {
				break
			}
		}
		return out
	}
}

// issueBatchSize is how many orders the renewal step issues in one
// transaction: their customers stay locked until it commits (a balance
// payment or top-up of one of them waits for it), so a batch is kept to
// what takes a fraction of a second.
const issueBatchSize = 25

// issueAll issues the next period and invoice of each order of ids, paid
// from the balance when it may and can (prepare, order.IssueRenewals,
// finish), issueBatchSize
// orders to a transaction (issueBatch). A batch that fails (a period
// another run issued meanwhile, any one order's error) is rolled back
// whole and its orders issued again one transaction each, so that one
// order's failure leaves the others issued, as a transaction per order
// would; so is an order whose customer has another order ahead of it in
// its batch, after the batch (its balance payment decides on the balance
// the first one left).
func (r *Run) issueAll(ctx context.Context, ids []uuid.UUID, now time.Time, by audit.Actor) []outcome {
	out := make([]outcome, len(ids))
	for start := 0; start < len(ids) && ctx.Err() == nil; start += issueBatchSize {
		end := min(start+issueBatchSize, len(ids))
		batch, res := ids[start:end], out[start:end]
		alone, err := r.issueBatch(ctx, batch, now, by, res)
		if err != nil {
			if len(batch) == 1 || ctx.Err() != nil {
				res[0] = outcome{err: err}
				continue
			}
			r.log.WarnContext(ctx, "billing run: a batch of renewals failed; its orders are issued one at a time",
				"orders", len(batch), "err", err)
			alone = make([]int, len(batch))
			for i := range alone {
				alone[i] = i
			}
		}
		for _, i := range alone {
			if ctx.Err() != nil {
				break
			}
			if _, err := r.issueBatch(ctx, batch[i:i+1], now, by, res[i:i+1]); err != nil {
				res[i] = outcome{err: err}
			}
		}
	}
	return out
}

// issueBatch issues the orders of ids in one transaction, locked
// customers, then orders, each in id order (store.LockForBalancePayments),
// with their pending plan changes and latest periods read in one round
// trip: out[i] is what it did for ids[i], once it has committed. alone
// are the indexes of ids left for a transaction of their own: the orders
// of a customer with another order in the batch, but the first. A period
// another run issued is store.ErrConflict, and rolls the batch back: for
// one order it is no error (the other run issued it).
func (r *Run) issueBatch(ctx context.Context, ids []uuid.UUID, now time.Time, by audit.Actor, out []outcome) (alone []int, err error) {
	index := make(map[uuid.UUID]int, len(ids))
	for i, id := range ids {
		index[id] = i
	}
	err = store.WithPipelinedTx(ctx, r.db, func(tx pgx.Tx) error {
		accts, os, err := store.LockForBalancePayments(ctx, tx, ids)
		if err != nil {
			return err
		}
		if len(os) != len(ids) {
			return store.BugIfNotFound(store.ErrNotFound, "lock the customer, then the order")
		}
		facts, err := store.ReadRenewalFacts(ctx, tx, ids)
		if err != nil {
			return err
		}
		first := make(map[uuid.UUID]bool, len(os))
		var rns []*renewing
		var at []int
		for _, o := range os {
			i := index[o.ID]
			if first[o.CustomerID] {
				alone = append(alone, i)
				continue
			}
			first[o.CustomerID] = true
			rn, err := r.prepare(ctx, tx, locked{acct: accts[o.CustomerID], o: o}, facts, now, by)
			if err != nil {
				return err
			}
			if rn != nil {
				rns, at = append(rns, rn), append(at, i)
			}
		}
		if len(rns) == 0 {
			return nil
		}
		rs := make([]order.Renewal, len(rns))
		for k, rn := range rns {
			rs[k] = rn.renewal
		}
		invs, err := order.IssueRenewals(ctx, tx, rs, r.opts.Location, by, now)
		if err != nil {
			return err // ErrConflict: issued by another run; this one rolls back
		}
		for k, rn := range rns {
			paid, err := r.finish(ctx, tx, rn, rs[k], invs[k], now, by)
			if err != nil {
				return err
			}
			out[at[k]] = outcome{did: true, paid: paid}
		}
		return nil
	})
	if err != nil {
		clear(out)
		if errors.Is(err, store.ErrConflict) && len(ids) == 1 {
			return nil, nil
		}
		return nil, err
	}
	return alone, nil
}

// renewing is an order the renewal step issues a period for, decided by
// prepare: the period, its price, and the plan change it bills.
type renewing struct {
	acct     store.BalanceAccount
	renewal  order.Renewal
	change   store.PlanChange
	changing bool
}

// prepare decides order l.o's next period under its locks, held by tx:
// nil when there is none to issue (the order does not renew or is not
// live, the period is issued or not due yet). A period-end plan change
// whose period has started is applied first, and an unpaid upgrade
// lapses; facts are the batch's reads.
func (r *Run) prepare(ctx context.Context, tx pgx.Tx, l locked, facts store.RenewalFacts, now time.Time, by audit.Actor) (*renewing, error) {
	id := l.o.ID
	if !l.o.Renews || !live(l.o) {
		return nil, nil
	}
	// A period-end change whose period has started takes effect
	// first (the plan change step does it too, later in the pass): a
	// pass that catches up on more than a period must bill the next
	// one at the plan the order now has, not bill the change again.
	// The order's pending change, read once for the three steps
	// below (an order has at most one).
	var pending *store.PlanChange
	if ch, ok := facts.Pending[id]; ok {
		pending = &ch
	}
	applied, stillPending, err := order.ApplyDuePendingPlanChange(ctx, tx, l.o, pending, by, now, now)
	if err != nil {
		return nil, err
	}
	if !stillPending {
		pending = nil
	}
	if applied {
		if l.o, err = store.Q(tx).GetOrder(ctx, id); err != nil {
			return nil, err
		}
	}
	cycle := order.BillingCycle(l.o.BillingCycle)
	if !cycle.Recurring() || !l.o.RenewalPrice.Valid {
		return nil, nil
	}
	// The order's latest period, as the batch read it unless a plan
	// change took effect since, and the last served one: a cancelled one
	// after it (its invoice cancelled, renewal turned back on since) is
	// reissued.
	latest, ok := facts.Latest[id]
	if applied || !ok {
		if latest, err = store.Q(tx).LatestServicePeriod(ctx, id); err != nil {
			return nil, store.BugIfNotFound(err, "read the last period")
		}
	}
	last, err := order.LastServedOf(ctx, tx, latest)
	if err != nil {
		return nil, err
	}
	if last.Status != store.PeriodPaid || last.Followed || last.Outcome != nil ||
		last.EndsAt.After(now.Add(time.Duration(r.opts.InvoiceDays)*day)) {
		return nil, nil // issued meanwhile, or no longer due
	}
	months := last.AnchorMonths + int32(cycle.Months())
	next := store.NewServicePeriod{
		OrderID: id, Seq: last.Seq + 1, StartsAt: last.EndsAt,
		EndsAt: order.AddMonths(last.AnchorAt, int(months), r.opts.Location), AnchorAt: last.AnchorAt, AnchorMonths: months,
		CreatedAt: now,
	}
	price := l.o.RenewalPrice.Amount
	// A pending period-end plan change: the next period bills the new
	// product's price, and a new cycle counts from the period's start.
	change, changing := order.NextPeriodPlan(pending)
	if changing {
		price = change.ToPrice
		if to := order.BillingCycle(change.ToCycle); to != cycle {
			next.AnchorAt, next.AnchorMonths = last.EndsAt, int32(to.Months())
			next.EndsAt = order.AddMonths(last.EndsAt, to.Months(), r.opts.Location)
		}
	}
	// An upgrade still unpaid lapses now: the period billed here is
	// billed at the plan the order has, and the upgrade's proration
	// covers the current period only.
	if _, err := order.LapseUpgradeBeforeRenewal(ctx, tx, pending, by, now, now); err != nil {
		return nil, err
	}
	return &renewing{acct: l.acct, change: change, changing: changing, renewal: order.Renewal{
		Order: l.o, Latest: latest, Last: last, Next: next, Price: price,
	}}, nil
}

// finish follows rn's period, issued as issued says (order.IssueRenewals
// completed its Next) with inv, its invoice (zero when free): the plan
// change it bills recorded, the invoice paid from the balance when it may
// and can, else the customer told. It reports whether the balance paid it.
func (r *Run) finish(ctx context.Context, tx pgx.Tx, rn *renewing, issued order.Renewal, inv store.Invoice, now time.Time, by audit.Actor) (paid bool, err error) {
	next := issued.Next
	if rn.changing {
		if err := order.PlanChangeBilled(ctx, tx, rn.change, next, now); err != nil {
			return false, err
		}
	}
	if issued.Price.Sign() == 0 {
		return false, nil // paid: the order's paid end moved
	}
	if r.opts.AutoApplyBalance {
		if paid, err = order.PayInvoiceFromBalance(ctx, tx, rn.acct, inv, by, now); err != nil || paid {
			return paid, err // paid: service_renewed tells the customer
		}
	}
	// Issued and unpaid: the customer is told, and that stands for the
	// reminder before the due day when it falls within it.
	sent := []string{noticeIssued}
	if r.opts.ReminderDaysBefore > 0 && !next.StartsAt.After(now.Add(time.Duration(r.opts.ReminderDaysBefore)*day)) {
		sent = append(sent, noticeBefore)
	}
	days := int(next.StartsAt.Sub(now) / day)
	return false, order.QueueRenewalReminder(ctx, tx, inv, next.Seq, order.ReminderIssued, days, sent, now)
}

// planChange locks order id (its customer, then it) and runs step on it:
// a due plan change applied, or an unpaid proration lapsed.
func (r *Run) planChange(ctx context.Context, id uuid.UUID, now time.Time, by audit.Actor,
	step func(ctx context.Context, tx pgx.Tx, o store.Order, by audit.Actor, at, now time.Time) (bool, error)) (bool, error) {
	var did bool
	err := store.WithTx(ctx, r.db, func(tx pgx.Tx) error {
		l, err := lockOrder(ctx, tx, id)
		if err != nil {
			return err
		}
		did, err = step(ctx, tx, l.o, by, now, now)
		return err
	})
	return did, err
}

// The notices a period records (service_periods.notices).
const (
	noticeIssued  = "issued"
	noticeBefore  = "before"
	noticeOverdue = "overdue:"
)

// dueNotice is the reminder due for an unpaid period: its kind ("" when
// none), the days before or past due, and what to record as sent.
type dueNotice struct {
	kind string
	days int
	sent []string
}

// notice is the reminder due now for an unpaid period due at due that has
// notices recorded: before the due time, the one reminder within
// ReminderDaysBefore; after it, the latest overdue day reached, which also
// stands for the earlier ones not sent (a run that was down for a week
// sends one reminder, not two).
func (r *Run) notice(due time.Time, notices []string, now time.Time) dueNotice {
	if now.Before(due) {
		if r.opts.ReminderDaysBefore > 0 && !slices.Contains(notices, noticeBefore) &&
			!due.After(now.Add(time.Duration(r.opts.ReminderDaysBefore)*day)) {
			return dueNotice{kind: order.ReminderDueSoon, days: int((due.Sub(now) + day - 1) / day), sent: []string{noticeBefore}}
		}
		return dueNotice{}
	}
	late := -1
	for _, d := range r.opts.OverdueReminderDays {
		if !now.Before(due.Add(time.Duration(d) * day)) {
			late = d
		}
	}
	if late < 0 || slices.Contains(notices, noticeOverdue+strconv.Itoa(late)) {
		return dueNotice{}
	}
	sent := []string{noticeBefore}
	for _, d := range r.opts.OverdueReminderDays {
		if d <= late {
			sent = append(sent, noticeOverdue+strconv.Itoa(d))
		}
	}
	return dueNotice{kind: order.ReminderOverdue, days: late, sent: sent}
}

// remind queues the reminder due now about order id's unpaid renewal
// invoice, if one still is under the order's lock.
func (r *Run) remind(ctx context.Context, id uuid.UUID, now time.Time) (bool, error) {
	sent := false
	err := store.WithTx(ctx, r.db, func(tx pgx.Tx) error {
		l, err := lockOrder(ctx, tx, id)
		if err != nil || !live(l.o) {
			return err
		}
		last, inv, ok, err := unpaid(ctx, tx, id, now, -366*day)
		if err != nil || !ok {
			return err
		}
		n := r.notice(last.StartsAt, last.Notices, now)
		if n.kind == "" {
			return nil
		}
		sent = true
		return order.QueueRenewalReminder(ctx, tx, inv, last.Seq, n.kind, n.days, n.sent, now)
	})
	return sent, err
}

// unpaid is the order's last period when it is unpaid and its invoice is
// at least age past due as of now, with that invoice locked.
func unpaid(ctx context.Context, tx pgx.Tx, id uuid.UUID, now time.Time, age time.Duration) (store.ServicePeriod, store.Invoice, bool, error) {
	last, err := store.Q(tx).LatestServicePeriod(ctx, id)
	if err != nil {
		return store.ServicePeriod{}, store.Invoice{}, false, store.BugIfNotFound(err, "read the last period")
	}
	if last.Status != store.PeriodUnpaid || last.InvoiceID == nil || last.StartsAt.After(now.Add(-age)) {
		return last, store.Invoice{}, false, nil
	}
	inv, err := store.Q(tx).GetInvoiceForUpdate(ctx, *last.InvoiceID)
	if err != nil {
		return last, inv, false, store.BugIfNotFound(err, "lock the renewal invoice")
	}
	return last, inv, true, nil
}

// payFromBalance pays order id's unpaid renewal invoice from a balance
// that covers it now (topped up since the invoice was issued).
func (r *Run) payFromBalance(ctx context.Context, id uuid.UUID, now time.Time, by audit.Actor) (bool, error) {
	paid := false
	err := store.WithTx(ctx, r.db, func(tx pgx.Tx) error {
		l, err := lockOrder(ctx, tx, id)
		if err != nil || !live(l.o) {
			return err
		}
		_, inv, ok, err := unpaid(ctx, tx, id, now, -366*day)
		if err != nil || !ok {
			return err
		}
		paid, err = order.PayInvoiceFromBalance(ctx, tx, l.acct, inv, by, now)
		return err
	})
	return paid, err
}

// suspend suspends order id for non-payment.
func (r *Run) suspend(ctx context.Context, id uuid.UUID, now time.Time, by audit.Actor) (bool, error) {
	suspended := false
	err := store.WithTx(ctx, r.db, func(tx pgx.Tx) error {
		l, err := lockOrder(ctx, tx, id)
		if err != nil || order.Status(l.o.Status) != order.StatusActive {
			return err
		}
		_, _, due, err := unpaid(ctx, tx, id, now, time.Duration(r.opts.SuspendAfterDays)*day)
		if err != nil || !due {
			return err
		}
		_, err = order.Transition(ctx, tx, l.o, order.Move{To: order.StatusSuspended, SuspendReason: order.SuspendReasonOverdue, By: by, At: now})
		suspended = err == nil
		return err
	})
	return suspended, err
}

// terminate ends order id's service for non-payment and cancels the
// unpaid invoice.
func (r *Run) terminate(ctx context.Context, id uuid.UUID, now time.Time, by audit.Actor) (bool, error) {
	terminated := false
	err := store.WithTx(ctx, r.db, func(tx pgx.Tx) error {
		l, err := lockOrder(ctx, tx, id)
		if err != nil || !live(l.o) {
			return err
		}
		_, inv, due, err := unpaid(ctx, tx, id, now, time.Duration(r.opts.TerminateAfterDays)*day)
		if err != nil || !due {
			return err
		}
		if inv.PaidAmount.Sign() > 0 {
			// Partly paid: cancelling would strand the money. An admin
			// decides (refund, or a payment of the rest); the overview
			// lists it and paymentd_renewal_partly_paid_past_termination
			// counts it (alert PaymentdRenewalPartlyPaidPastTermination).
			if r.firstTimeLeft(inv.ID) {
				r.log.WarnContext(ctx, "billing run: a partly paid renewal invoice is past the termination day; left for an admin (GetRenewalOverview)",
					"order_id", id, "invoice_id", inv.ID, "paid_amount", inv.PaidAmount.String())
			}
			return nil
		}
		if _, err := order.InvoiceTransition(ctx, tx, inv, order.InvoiceMove{
			To: order.InvoiceCancelled, By: by, At: now, FailReason: "invoice cancelled: the service ended unpaid",
		}); err != nil {
			return err
		}
		_, err = order.Transition(ctx, tx, l.o, order.Move{To: order.StatusTerminated, EndReason: order.EndReasonUnpaid, By: by, At: now})
		terminated = err == nil
		return err
	})
	return terminated, err
}

// firstTimeLeft reports whether the partly paid invoice id is left for an
// admin for the first time in this process, and records it.
func (r *Run) firstTimeLeft(id uuid.UUID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leftForAdmin[id] {
		return false
	}
	r.leftForAdmin[id] = true
	return true
}

// lastServed is order id's last period that is not cancelled
// (order.LastServedPeriod); the scan that found the order found one.
func lastServed(ctx context.Context, tx pgx.Tx, id uuid.UUID) (store.ServicePeriod, error) {
	last, err := order.LastServedPeriod(ctx, tx, id)
	return last, store.BugIfNotFound(err, "read the last period")
}

// end ends the service of order id whose paid period is over and that does
// not renew.
func (r *Run) end(ctx context.Context, id uuid.UUID, now time.Time, by audit.Actor) (bool, error) {
	ended := false
	err := store.WithTx(ctx, r.db, func(tx pgx.Tx) error {
		l, err := lockOrder(ctx, tx, id)
		if err != nil || !live(l.o) || (l.o.Renews && order.BillingCycle(l.o.BillingCycle).Recurring()) {
			return err
		}
		last, err := lastServed(ctx, tx, id)
		if err != nil {
			return err
		}
		if last.Status != store.PeriodPaid || last.Followed || last.Outcome != nil || last.EndsAt.After(now) {
			return nil
		}
		to := order.StatusCompleted
		if order.Status(l.o.Status) == order.StatusSuspended {
			to = order.StatusTerminated
		}
		_, err = order.Transition(ctx, tx, l.o, order.Move{To: to, EndReason: order.EndReasonNotRenewed, By: by, At: now})
		ended = err == nil
		return err
	})
	return ended, err
}
