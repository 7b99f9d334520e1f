package order

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/audit"
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

// IssuePeriod writes next, the period after last (the order's last, paid
// and not followed, read under the order's lock, which the caller holds),
// and records last as followed: the billing run's renewal. A free period
// (next.PaidAt set) is paid at once, so the order's paid end moves to its
// end. A second period for the same time is store.ErrConflict (another
// run issued it; the caller rolls back).
func IssuePeriod(ctx context.Context, tx pgx.Tx, last store.ServicePeriod, next store.NewServicePeriod, at time.Time) error {
	if _, err := store.InsertServicePeriod(ctx, tx, next); err != nil {
		return err
	}
	if err := store.Q(tx).MarkServicePeriodFollowed(ctx, store.MarkServicePeriodFollowedParams{
		OrderID: last.OrderID, Seq: last.Seq, UpdatedAt: at,
	}); err != nil {
		return err
	}
	if next.PaidAt == nil {
		return nil
	}
	return store.SetPaidEnd(ctx, tx, next.OrderID, next.EndsAt, at)
}

// payPeriod marks the unpaid period p (locked by the caller) paid, at
// paidAt on the writer's clock (the gateway's time of payment, or the
// move's), moved onto the billing clock; the period before it ends
// renewed, and the order's paid end and its instance's expiry move to
// p's end.
func payPeriod(ctx context.Context, tx pgx.Tx, p store.ServicePeriod, m InvoiceMove, paidAt time.Time) (store.ServicePeriod, error) {
	paidAt = store.Timestamp(paidAt.Add(billingShift(m.At, m.BillingAt)))
	p, err := store.MarkServicePeriodPaid(ctx, tx, p.OrderID, p.Seq, paidAt, m.At)
	if err != nil {
		// Locked and unpaid (the caller checked): a miss is a bug.
		return store.ServicePeriod{}, store.BugIfNotFound(err, "mark the renewed period paid")
	}
	return p, store.SetPaidEnd(ctx, tx, p.OrderID, p.EndsAt, m.At)
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
