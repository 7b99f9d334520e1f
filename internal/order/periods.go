package order

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
)

// This file is the one owner of an order's periods: every write of
// service_periods, orders.paid_until and orders.renews goes through it,
// as orders.status goes through Transition (docs/decisions.md, "One owner
// for periods"; internal/architecture's writers test holds it). The
// callers (the transitions, the billing run, the admin's operations) say
// what happened; the functions here write the periods, the paid end (and
// the instance's expiry that follows it) and the renewal flag, and the
// audit row of a renewal turned off.
//
// The dates of a period (its start, end and anchor, and when it was paid)
// are on the billing clock (docs/decisions.md, "The test clock is the one
// clock of billing"): with [billing].test_clock on, that is the moved
// clock; in production it is the real one. The rows' created_at and
// updated_at are the writer's time.

// billingShift is how far the billing clock is ahead of the writer's clock
// at the time of a move: billingAt - at, zero when billingAt is zero (no
// test clock: the billing clock is the real one).
func billingShift(at, billingAt time.Time) time.Duration {
	if billingAt.IsZero() {
		return 0
	}
	return billingAt.Sub(at)
}

// startFirstPeriod starts the first service period of a recurring order
// that has just gone active: from the billing clock's now, one cycle long
// in the billing time zone, paid by the order's own payment. A one-time
// order has none.
func startFirstPeriod(ctx context.Context, tx pgx.Tx, o store.Order, m Move) error {
	months := BillingCycle(o.BillingCycle).Months()
	if months == 0 {
		return nil
	}
	start := m.At.Add(billingShift(m.At, m.BillingAt))
	end := AddMonths(start, months, m.Location)
	if _, err := store.InsertServicePeriod(ctx, tx, store.NewServicePeriod{
		OrderID: o.ID, Seq: 1, StartsAt: start, EndsAt: end, AnchorAt: start, AnchorMonths: int32(months),
		PaidAt: &start, CreatedAt: m.At,
	}); err != nil {
		return err
	}
	return store.SetPaidEnd(ctx, tx, o.ID, end, m.At)
}

// Renewal is one period the billing run issues for a recurring order,
// decided under the order's lock.
type Renewal struct {
	// Order is the order, locked by the caller.
	Order store.Order
	// Latest is the order's latest period (LatestServicePeriod), Last its
	// last served one (LastServedOf), which Next follows: paid, not
	// followed.
	Latest, Last store.ServicePeriod
	// Next is the period issued; IssueRenewals completes it with its
	// invoice, or its paid time when it is free.
	Next store.NewServicePeriod
	// Price bills Next; zero makes it free: paid at once, no invoice.
	Price money.Amount
}

// IssueRenewals issues the periods rs in tx, by by at now (the billing
// run's renewals of one batch), in statements per batch: the invoices of
// the priced ones numbered at once in their year's series (in loc), written
// with their one line each in two statements, each due when its period
// starts, and audited; the unpaid periods in one statement (a free one, or
// one reissued in its cancelled row, alone: reissuePeriod); the periods
// they follow marked followed in one; a free period's order's paid end
// moved. It answers each renewal's invoice (zero for a free period) and
// completes each Next. A second period for the same time is
// store.ErrConflict (another run issued it; the caller rolls back).
//
// When Next's row is there, cancelled (its invoice was cancelled, and
// renewal has been turned back on since), the period is reissued in that
// row (docs/decisions.md, "renewals": what a cancelled period keeps): the
// keys (order_id, seq) and (order_id, starts_at) hold one row per period,
// so the new invoice takes the cancelled one's place, with an
// order.period_reissue audit row naming both.
func IssueRenewals(ctx context.Context, tx pgx.Tx, rs []Renewal, loc *time.Location, by audit.Actor, now time.Time) ([]store.Invoice, error) {
	invs := make([]store.Invoice, len(rs))
	var priced []int
	for i, r := range rs {
		if r.Price.Sign() != 0 {
			priced = append(priced, i)
		}
	}
	if len(priced) > 0 {
		numbers, err := TakeInvoiceNumbers(ctx, tx, now, loc, len(priced))
		if err != nil {
			return nil, err
		}
		ins := make([]store.NewRenewalInvoice, len(priced))
		for k, i := range priced {
			r := rs[i]
			ins[k] = store.NewRenewalInvoice{
				ID: uuid.New(), CustomerID: r.Order.CustomerID, OrderID: r.Order.ID, Number: numbers[k],
				Amount: r.Price, Currency: r.Order.Currency, Description: renewalDescription(r.Order, r.Next.Seq, r.Next.StartsAt, r.Next.EndsAt, loc),
				DueAt: r.Next.StartsAt, PeriodStart: r.Next.StartsAt, PeriodEnd: r.Next.EndsAt,
			}
		}
		rows, err := store.InsertRenewalInvoices(ctx, tx, now, ins)
		if err != nil {
			return nil, err
		}
		for k, i := range priced {
			invs[i] = rows[k]
			if err := audit.Write(ctx, tx, by, now, ActionInvoiceCreate, entityInvoice, rows[k].ID.String(), nil, InvoiceSnapshot(rows[k])); err != nil {
				return nil, err
			}
		}
	}
	var unpaid []store.NewServicePeriod
	var free []int
	followed := make([]store.ServicePeriod, len(rs))
	for i := range rs {
		r := &rs[i]
		if r.Price.Sign() == 0 {
			paid := now
			r.Next.PaidAt, r.Next.InvoiceID = &paid, nil
			free = append(free, i)
		} else {
			r.Next.InvoiceID = &invs[i].ID
		}
		var err error
		switch {
		case r.Latest.Seq == r.Next.Seq && r.Latest.Status == store.PeriodCancelled:
			err = reissuePeriod(ctx, tx, r.Latest, r.Next, by, now)
		case r.Next.PaidAt != nil:
			_, err = store.InsertServicePeriod(ctx, tx, r.Next)
		default:
			unpaid = append(unpaid, r.Next)
		}
		if err != nil {
			return nil, err
		}
		followed[i] = r.Last
	}
	if len(unpaid) > 0 {
		if err := store.InsertRenewalPeriods(ctx, tx, now, unpaid); err != nil {
			return nil, err
		}
	}
	if err := store.MarkServicePeriodsFollowed(ctx, tx, now, followed); err != nil {
		return nil, err
	}
	for _, i := range free {
		if err := store.SetPaidEnd(ctx, tx, rs[i].Order.ID, rs[i].Next.EndsAt, now); err != nil {
			return nil, err
		}
	}
	return invs, nil
}

// periodState is the audit snapshot of a period reissued.
type periodState struct {
	Seq       int32      `json:"seq"`
	Status    string     `json:"status"`
	InvoiceID *uuid.UUID `json:"invoice_id,omitempty"`
	StartsAt  time.Time  `json:"starts_at"`
	EndsAt    time.Time  `json:"ends_at"`
}

func periodSnapshot(p store.ServicePeriod) periodState {
	return periodState{Seq: p.Seq, Status: p.Status, InvoiceID: p.InvoiceID, StartsAt: p.StartsAt, EndsAt: p.EndsAt}
}

// reissuePeriod bills the cancelled period was again as next says, in its
// row, audited (order.period_reissue: the period before, with the
// cancelled invoice, and after, with the new one).
func reissuePeriod(ctx context.Context, tx pgx.Tx, was store.ServicePeriod, next store.NewServicePeriod, by audit.Actor, at time.Time) error {
	p, err := store.ReissueServicePeriod(ctx, tx, next)
	if err != nil {
		// Read cancelled under the order's lock: a miss is a bug.
		return store.BugIfNotFound(err, "reissue the cancelled period")
	}
	return audit.Write(ctx, tx, by, at, ActionOrderPeriodReissue, entityOrder, p.OrderID.String(), periodSnapshot(was), periodSnapshot(p))
}

// LastServedPeriod is order id's last period that is not cancelled: the
// one the next period follows, and whose end the service ends at when the
// order does not renew. A renewal invoice cancelled by hand leaves its
// period, cancelled, as the order's latest; the one before is the last
// again (before, the end step read the cancelled one and never ended the
// service, and the renewal step never issued the next period once renewal
// was back on). ErrNotFound when the order has no period.
func LastServedPeriod(ctx context.Context, db store.DB, id uuid.UUID) (store.ServicePeriod, error) {
	latest, err := store.Q(db).LatestServicePeriod(ctx, id)
	if err != nil {
		return latest, err
	}
	return LastServedOf(ctx, db, latest)
}

// LastServedOf is LastServedPeriod given the order's latest period
// (LatestServicePeriod): latest itself unless it is cancelled.
func LastServedOf(ctx context.Context, db store.DB, latest store.ServicePeriod) (store.ServicePeriod, error) {
	last := latest
	if last.Status != store.PeriodCancelled {
		return last, nil
	}
	ps, err := store.Q(db).ListServicePeriods(ctx, last.OrderID)
	if err != nil {
		return store.ServicePeriod{}, err
	}
	for i := len(ps) - 1; i >= 0; i-- {
		if ps[i].Status != store.PeriodCancelled {
			return ps[i], nil
		}
	}
	return last, nil
}

// payPeriod marks the unpaid period p (locked by the caller) paid, at
// paidAt on the writer's clock (the gateway's time of payment, or the
// move's), moved onto the billing clock; the period before it ends
// renewed, and the order's paid end and its instance's expiry move to
// p's end. It answers the period and the order as they are now.
func payPeriod(ctx context.Context, tx pgx.Tx, p store.ServicePeriod, m InvoiceMove, paidAt time.Time) (store.ServicePeriod, store.Order, error) {
	paidAt = store.Timestamp(paidAt.Add(billingShift(m.At, m.BillingAt)))
	p, err := store.MarkServicePeriodPaid(ctx, tx, p.OrderID, p.Seq, paidAt, m.At)
	if err != nil {
		// Locked and unpaid (the caller checked): a miss is a bug.
		return store.ServicePeriod{}, store.Order{}, store.BugIfNotFound(err, "mark the renewed period paid")
	}
	o, err := store.SetPaidEndOf(ctx, tx, p.OrderID, p.EndsAt, m.At)
	if err != nil {
		return store.ServicePeriod{}, store.Order{}, store.BugIfNotFound(err, "set the renewed order's paid end")
	}
	return p, o, nil
}

// endPaidNow moves order id's paid end (and its instance's expiry) to now
// on the billing clock: its service ends now, before the end of its paid
// period (EndService). The periods keep their calendar dates (what was
// paid for); Transition ends them.
func endPaidNow(ctx context.Context, tx pgx.Tx, id uuid.UUID, now, at time.Time) error {
	return store.SetPaidEnd(ctx, tx, id, now, at)
}

// closePeriods ends every period of order id that has not ended, with
// outcome (an unpaid one is cancelled): the order's service ended.
func closePeriods(ctx context.Context, tx pgx.Tx, id uuid.UUID, outcome string, at time.Time) error {
	_, err := store.Q(tx).CloseServicePeriods(ctx, store.CloseServicePeriodsParams{
		OrderID: id, Outcome: outcome, UpdatedAt: at,
	})
	return err
}

// renewalOffNote is the audit note of a renewal turned off because the
// renewal invoice was cancelled.
const renewalOffNote = "renewal invoice %s cancelled: the service ends at its paid end"

// cancelUnpaidPeriod is what cancelling invoice inv does to the period it
// bills, if an unpaid one: the period is cancelled (it ends unpaid), the
// one before is the last again, and the order stops renewing, so that its
// service ends at that period's end. The renewal turned off is audited
// (order.renewal, the invoice named in the note). The caller holds the
// order's lock, then the invoice's.
func cancelUnpaidPeriod(ctx context.Context, tx pgx.Tx, inv store.Invoice, m InvoiceMove) error {
	p, err := store.CancelUnpaidServicePeriod(ctx, tx, inv.ID, m.At)
	if errors.Is(err, store.ErrNotFound) {
		return nil // not a renewal invoice, or its period has ended
	}
	if err != nil {
		return err
	}
	o, err := store.Q(tx).GetOrderForUpdate(ctx, p.OrderID)
	if err != nil {
		return store.BugIfNotFound(err, "lock the order of a cancelled period")
	}
	_, err = setRenews(ctx, tx, o, false, m.By, m.At, fmt.Sprintf(renewalOffNote, inv.ID))
	return err
}

// checkRenewsAgain refuses to turn order o's renewal (locked by the
// caller, off) back on once its paid service is over as of now, on the
// billing clock: its last served period paid, not followed by an invoiced
// one, and ended. The service ended at its paid end (the billing run ends
// the order on its next pass, if it has not yet); a new period would start
// in the past, due at once. Before the paid end, or while the next
// period's invoice is still open, it may.
func checkRenewsAgain(ctx context.Context, tx pgx.Tx, o store.Order, now time.Time) error {
	last, err := LastServedPeriod(ctx, tx, o.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // not active yet: no period
	}
	if err != nil {
		return err
	}
	if last.Status == store.PeriodPaid && !last.Followed && last.Outcome == nil && !last.EndsAt.After(now) {
		return apperr.New(apperr.FailedPrecondition,
			"order %s's paid service ended at %s with its renewal off: renewal cannot be turned back on (a new order buys the service again)",
			o.ID, last.EndsAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// setRenews turns order o's renewal (locked by the caller) on or off, by
// by at at, with the audit row (order.renewal, note in its "after"); a
// flag already so writes nothing.
func setRenews(ctx context.Context, tx pgx.Tx, o store.Order, renews bool, by audit.Actor, at time.Time, note string) (store.Order, error) {
	if o.Renews == renews {
		return o, nil
	}
	out, err := store.Q(tx).SetOrderRenews(ctx, store.SetOrderRenewsParams{ID: o.ID, Renews: renews, UpdatedAt: at})
	if err != nil {
		return store.Order{}, store.BugIfNotFound(err, "set the order's renewal")
	}
	after := orderSnapshot(out)
	after.Note = note
	return out, audit.Write(ctx, tx, by, at, ActionOrderRenewal, entityOrder, o.ID.String(), orderSnapshot(o), after)
}

// extendPeriod moves the end of period seq of order id (its last, paid) to
// end, which later periods count from, and the order's paid end with it.
func extendPeriod(ctx context.Context, tx pgx.Tx, id uuid.UUID, seq int32, end, at time.Time) (store.ServicePeriod, error) {
	p, err := store.Q(tx).ExtendServicePeriod(ctx, store.ExtendServicePeriodParams{
		OrderID: id, Seq: seq, EndsAt: end, UpdatedAt: at,
	})
	if err != nil {
		return store.ServicePeriod{}, err
	}
	return p, store.SetPaidEnd(ctx, tx, id, end, at)
}

// recordNotices records notices as queued for period seq of order id.
func recordNotices(ctx context.Context, tx pgx.Tx, id uuid.UUID, seq int32, notices []string, at time.Time) error {
	return store.Q(tx).AddServicePeriodNotices(ctx, store.AddServicePeriodNoticesParams{
		OrderID: id, Seq: seq, Notices: notices, UpdatedAt: at,
	})
}
