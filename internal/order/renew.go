package order

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/store"
)

// renewOnPaid is what paying an invoice in full does when the invoice
// bills a service period, whoever paid it (gateway callback, bank-transfer
// confirmation, reconciler, late capture, balance): in the caller's
// transaction, the period is paid, so the service runs until its end —
// one cycle from the previous end, not from the day of payment — the
// instance's expiry follows, service_renewed is queued, and an order
// suspended for non-payment is resumed (an admin's suspension stays). It
// reports whether inv bills a period (a renewal invoice).
//
// The caller holds the order's lock (the settlement locks an invoice's
// order before the invoice) and the invoice's.
func renewOnPaid(ctx context.Context, tx pgx.Tx, inv store.Invoice, m InvoiceMove) (bool, error) {
	if inv.OrderID == nil {
		return false, nil
	}
	p, err := store.Q(tx).GetServicePeriodByInvoiceForUpdate(ctx, &inv.ID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil // not a renewal invoice
	}
	if err != nil {
		return false, err
	}
	paidAt := m.At
	if !m.PaidAt.IsZero() {
		paidAt = m.PaidAt
	}
	if p.Status != store.PeriodUnpaid {
		// The period was closed (its order ended) while its invoice stayed
		// open: a partly paid invoice, left for an admin. That is a
		// verdict on the payment, not a bug: the payers check
		// (payment's notPayable) and capture the money instead.
		return true, apperr.Wrap(apperr.FailedPrecondition, ErrPeriodNotRenewable,
			"invoice %s bills period %d of order %s, which is %s: it can no longer be renewed", inv.ID, p.Seq, p.OrderID, p.Status)
	}
	// The order as its paid end's update left it (the caller holds its
	// lock; the update answers it).
	p, o, err := payPeriod(ctx, tx, p, m, paidAt)
	if err != nil {
		return true, err
	}
	resume := Status(o.Status) == StatusSuspended && o.SuspendReason == SuspendReasonOverdue
	body, err := json.Marshal(ServiceRenewedPayload{
		OrderID: o.ID, InvoiceID: inv.ID, Period: p.Seq, StartsAt: p.StartsAt, EndsAt: p.EndsAt,
		Amount: inv.Amount, Currency: inv.Currency, Resumed: resume,
	})
	if err != nil {
		return true, err
	}
	if err := store.AppendEvent(ctx, tx, EventServiceRenewed, o.ID, body); err != nil {
		return true, err
	}
	if !resume {
		return true, nil
	}
	_, err = Transition(ctx, tx, o, Move{To: StatusActive, By: m.By, At: m.At})
	return true, err
}

// ErrPeriodNotRenewable marks a payment that would complete a renewal
// invoice whose period is closed (cancelled when its order ended): the
// invoice cannot be paid (FailedPrecondition), and nothing changes.
var ErrPeriodNotRenewable = apperr.New(apperr.FailedPrecondition, "the invoice's service period can no longer be renewed")

// QueueRenewalReminder queues the renewal_reminder of kind (days before or
// after the due time) about the unpaid invoice inv of period seq, in tx,
// and records notice as sent with the ones that it makes stale (an
// overdue reminder sent late stands for the earlier ones), so that each is
// sent at most once. The caller holds the order's lock and has checked
// that notice was not sent.
func QueueRenewalReminder(ctx context.Context, tx pgx.Tx, inv store.Invoice, seq int32, kind string, days int, notices []string, at time.Time) error {
	if inv.OrderID == nil {
		return nil
	}
	if err := AppendInvoiceReminder(ctx, tx, inv, seq, kind, days); err != nil {
		return err
	}
	return recordNotices(ctx, tx, *inv.OrderID, seq, notices, at)
}

// AppendInvoiceReminder queues, in tx, a renewal_reminder of kind about
// what is left to pay of order invoice inv (of period seq, 0 when it names
// none; days as the kind reads it), and nothing for an invoice without an
// order. QueueRenewalReminder and the saved card's notices send theirs
// through it.
func AppendInvoiceReminder(ctx context.Context, tx pgx.Tx, inv store.Invoice, seq int32, kind string, days int) error {
	if inv.OrderID == nil {
		return nil
	}
	due, err := inv.Amount.Sub(inv.PaidAmount)
	if err != nil {
		return err
	}
	var dueAt time.Time
	if inv.DueAt != nil {
		dueAt = *inv.DueAt
	}
	body, err := json.Marshal(RenewalReminderPayload{
		OrderID: *inv.OrderID, InvoiceID: inv.ID, Period: seq, Kind: kind, Days: days,
		DueAt: dueAt, Amount: due, Currency: inv.Currency,
	})
	if err != nil {
		return err
	}
	return store.AppendEvent(ctx, tx, event.TypeRenewalReminder, *inv.OrderID, body)
}
