package order

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
)

// InvoiceMove is one invoice transition: where the invoice goes, who moves
// it and when, and what the move carries.
type InvoiceMove struct {
	// To is the status to move to. A payment (Pay set) leaves it empty:
	// the invoice becomes paid when the payment completes its amount, and
	// otherwise stays where it is.
	To InvoiceStatus
	By audit.Actor
	At time.Time

	// Pay is a settled payment's amount, added to paid_amount; PaidAt is
	// when the money arrived (the invoice's paid_at when it is paid in
	// full; zero means At).
	Pay    money.Amount
	PaidAt time.Time
	// BillingAt is At on the billing clock (zero means At, as in
	// production): a renewal invoice's period counts as paid at PaidAt (or
	// At) moved onto that clock.
	BillingAt time.Time
	// FailReason is what the pending payments of an invoice that is paid or
	// cancelled are failed with (payments.failure_reason).
	FailReason string

	// held is the plan change the invoice bills and its order, when the
	// caller holds the order locked and has not written the change yet
	// (ChangeOrderPlan paying its own proration invoice from the
	// balance): paying the invoice writes the change applied without
	// reading either.
	held *heldPlanChange
}

// heldPlanChange is a plan change as its caller asks for it (pending), not
// written yet, and its order, locked by the caller's transaction. Paying
// the invoice writes the change applied (one row, not a pending row
// updated at once); unpaid, the caller writes it pending.
type heldPlanChange struct {
	change store.InsertPlanChangeParams
	order  store.Order
}

// heldFor is the held plan change when it is the one invoice inv bills,
// else nil.
func (m InvoiceMove) heldFor(inv store.Invoice) *heldPlanChange {
	h := m.held
	if h == nil || h.change.InvoiceID == nil || *h.change.InvoiceID != inv.ID || h.order.ID != h.change.OrderID {
		return nil
	}
	return h
}

// InvoiceMoved is what an invoice transition did: the invoice as it is now,
// and the pending payments it failed.
type InvoiceMoved struct {
	Invoice        store.Invoice
	FailedPayments []store.Payment
	// Order and PlanChange, when the payment completed an upgrade's
	// proration invoice: the order as the change moved it, and the change
	// applied.
	Order      *store.Order
	PlanChange *store.PlanChange
}

// invoiceActions name each invoice transition in the audit log, as
// actions does the order's. A payment that does not complete the invoice
// (from → from) is an invoice.pay too.
var invoiceActions = map[[2]InvoiceStatus]string{
	{InvoiceIssued, InvoicePaid}:       ActionInvoicePay,
	{InvoiceOverdue, InvoicePaid}:      ActionInvoicePay,
	{InvoiceIssued, InvoiceIssued}:     ActionInvoicePay,
	{InvoiceOverdue, InvoiceOverdue}:   ActionInvoicePay,
	{InvoiceIssued, InvoiceOverdue}:    ActionInvoiceOverdue,
	{InvoiceDraft, InvoiceCancelled}:   ActionInvoiceCancel,
	{InvoiceIssued, InvoiceCancelled}:  ActionInvoiceCancel,
	{InvoiceOverdue, InvoiceCancelled}: ActionInvoiceCancel,
}

// ErrInvoiceTransition marks a move the invoice state machine does not
// allow from the invoice's status.
var ErrInvoiceTransition = apperr.New(apperr.FailedPrecondition, "invoice transition not allowed")

// InvoiceTransition is the one writer of invoices.status. It moves inv
// (locked in tx by the caller) as m says when the state machine
// (CanTransitionInvoice) allows it, and in the same transaction does what
// the move implies:
//
//	a payment (m.Pay)   add it to paid_amount; when that completes the
//	                    amount, → paid and fail the other pending payments;
//	                    a renewal invoice's period is then paid, the service
//	                    extended and, if suspended for non-payment, resumed
//	→ overdue           nothing more
//	→ cancelled         fail the pending payments; a renewal invoice's
//	                    period is cancelled and the order stops renewing
//	                    (its service ends at its paid end)
//
// and writes the audit rows of the invoice (its one snapshot,
// InvoiceSnapshot) and of every payment it failed. A move the table
// refuses is ErrInvoiceTransition (FailedPrecondition) and changes nothing;
// the callers check their own preconditions first (CancelInvoice refuses a
// partly paid invoice, the settlement one that cannot take the amount).
func InvoiceTransition(ctx context.Context, tx pgx.Tx, inv store.Invoice, m InvoiceMove) (InvoiceMoved, error) {
	from := InvoiceStatus(inv.Status)
	w := store.SetInvoiceStatusParams{ID: inv.ID, FromStatus: inv.Status, ToStatus: string(m.To), AddPaid: m.Pay, UpdatedAt: m.At}
	if m.Pay.Sign() > 0 {
		w.ToStatus = string(from)
		if sum, err := inv.PaidAmount.Add(m.Pay); err == nil && sum.Equal(inv.Amount) {
			paidAt := m.At
			if !m.PaidAt.IsZero() {
				paidAt = m.PaidAt
			}
			w.ToStatus, w.PaidAt = string(InvoicePaid), &paidAt
		}
	}
	to := InvoiceStatus(w.ToStatus)
	action := invoiceActions[[2]InvoiceStatus{from, to}]
	if action == "" || (from != to && !CanTransitionInvoice(from, to)) || (to == InvoicePaid && m.Pay.Sign() <= 0) {
		return InvoiceMoved{}, apperr.Wrap(apperr.FailedPrecondition, ErrInvoiceTransition, "invoice %s is %s; it cannot become %s", inv.ID, from, to)
	}
	var out InvoiceMoved
	var err error
	if out.Invoice, err = store.Q(tx).SetInvoiceStatus(ctx, w); err != nil {
		// The row is locked by the caller in status from, and the amount
		// checked: a miss is a bug.
		return InvoiceMoved{}, store.Bug(err, "invoice %s: move %s → %s", inv.ID, from, to)
	}
	if err := audit.Write(ctx, tx, m.By, m.At, action, entityInvoice, inv.ID.String(), InvoiceSnapshot(inv), InvoiceSnapshot(out.Invoice)); err != nil {
		return InvoiceMoved{}, err
	}
	if to == InvoicePaid && from != InvoicePaid {
		// A renewal invoice: its period is paid. A proration invoice made
		// in the caller's transaction bills no period.
		renewal := false
		if m.heldFor(inv) == nil {
			if renewal, err = renewOnPaid(ctx, tx, out.Invoice, m); err != nil {
				return InvoiceMoved{}, err
			}
		}
		// An upgrade's proration invoice, which bills no period: the plan
		// change takes effect. (A renewal invoice may bill a period-end
		// change, which waits for its period: ApplyDuePlanChange.)
		if !renewal {
			if out.Order, out.PlanChange, err = planChangeOnPaid(ctx, tx, out.Invoice, m); err != nil {
				return InvoiceMoved{}, err
			}
		}
	}
	if to == InvoiceCancelled {
		// A cancelled renewal invoice: its period will not be served.
		if err := cancelUnpaidPeriod(ctx, tx, inv, m); err != nil {
			return InvoiceMoved{}, err
		}
		// A proration invoice: its plan change lapses or is cancelled.
		if err := planChangeOnCancel(ctx, tx, inv, m); err != nil {
			return InvoiceMoved{}, err
		}
	}
	if to == InvoicePaid || to == InvoiceCancelled {
		out.FailedPayments, err = store.FailPendingPayments(ctx, tx, store.PendingOf{InvoiceID: &inv.ID}, m.FailReason, m.At)
		if err != nil {
			return InvoiceMoved{}, err
		}
		if err := AuditFailedPayments(ctx, tx, m.By, m.At, out.FailedPayments); err != nil {
			return InvoiceMoved{}, err
		}
	}
	return out, nil
}

// overdueBatch is how many due invoices MarkOverdueInvoices locks and
// moves per transaction.
const overdueBatch = 100

// MarkOverdueInvoices moves every issued invoice due by now to overdue,
// through InvoiceTransition (an invoice.overdue audit row each, by by), in
// transactions of overdueBatch invoices, and returns how many moved. An
// invoice another transaction holds is skipped and moves on a later run:
// it is idempotent, an overdue invoice is no longer issued.
func MarkOverdueInvoices(ctx context.Context, db store.TxBeginner, now time.Time, by audit.Actor) (int64, error) {
	var moved int64
	for {
		var n int
		err := store.WithTx(ctx, db, func(tx pgx.Tx) error {
			due, err := store.Q(tx).LockDueInvoices(ctx, store.LockDueInvoicesParams{Now: now, RowLimit: overdueBatch})
			if err != nil {
				return err
			}
			for _, inv := range due {
				if _, err := InvoiceTransition(ctx, tx, inv, InvoiceMove{To: InvoiceOverdue, By: by, At: now}); err != nil {
					return err
				}
			}
			n = len(due)
			return nil
		})
		if err != nil {
			return moved, err
		}
		moved += int64(n)
		if n < overdueBatch {
			return moved, nil
		}
	}
}
