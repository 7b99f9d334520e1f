package order

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
)

// EndReasonRefunded is why a service ended when the payment that bought
// its current period was refunded in full (RefundEndsService).
const EndReasonRefunded = "refunded"

// EndNowMove is an ending now: who, when (At on the service's clock, Now on
// the billing clock: the paid end becomes Now), why (an EndReason), what
// the unused share became (Credit, nil when nothing was counted) and an
// admin's note.
type EndNowMove struct {
	By     audit.Actor
	At     time.Time
	Now    time.Time
	Reason string
	Credit *EndCreditNote
	Note   string
}

// EndNowInTx ends live order o (locked by the caller) now: its paid end
// (paid_until, the instance's expiry) becomes m.Now, and Transition
// terminates it (its periods end, its open renewal invoice is cancelled,
// service_terminated ends the instance at the provider). EndService and a
// refund of the current period's payment (internal/payment's addRefund)
// end a service through it.
func EndNowInTx(ctx context.Context, tx pgx.Tx, o store.Order, m EndNowMove) (Moved, error) {
	if err := endPaidNow(ctx, tx, o.ID, m.Now, m.At); err != nil {
		return Moved{}, err
	}
	return Transition(ctx, tx, o, Move{
		To: StatusTerminated, EndReason: m.Reason, By: m.By, At: m.At, BillingAt: m.Now,
		EndCredit: m.Credit, Note: m.Note,
	})
}

// RefundEndsService reports whether refunding payment paymentID of live
// recurring order o (locked by the caller, the refund already added to the
// payment) ends the service now (docs/operations.md, "Refunds and
// periods"): the payment bought a paid period that has not ended at now
// (billing clock) — the current one, or one paid ahead — and every
// payment of that period is now refunded in full, so nothing paid for the
// time the service would still run. A refund of an earlier period's
// payment, a partial refund, or a period another payment still pays for
// leaves the service alone. Balance and gateway payments are alike.
func RefundEndsService(ctx context.Context, tx pgx.Tx, o store.Order, paymentID uuid.UUID, now time.Time) (bool, error) {
	if !BillingCycle(o.BillingCycle).Recurring() || !Status(o.Status).Live() {
		return false, nil
	}
	ps, err := store.Q(tx).ListServicePeriods(ctx, o.ID)
	if err != nil {
		return false, err
	}
	for _, p := range ps {
		if p.Status != store.PeriodPaid || !runs(p) || !now.Before(p.EndsAt) {
			continue // unpaid, closed, or over: not time the service still runs
		}
		pays, err := periodPayments(ctx, tx, o, p)
		if err != nil {
			return false, err
		}
		bought, held := false, money.Zero()
		for _, pay := range pays {
			if pay.ID == paymentID {
				bought = true
			}
			net, err := pay.Amount.Sub(pay.RefundedAmount)
			if err != nil {
				return false, err
			}
			if held, err = held.Add(net); err != nil {
				return false, err
			}
		}
		if bought && held.Sign() <= 0 {
			return true, nil
		}
	}
	return false, nil
}

// periodPayments are the payments that paid period p of order o, settled
// (success, or refunded since), oldest first: the order's own payments for
// the first period, its invoice's for a later one; none for a free period.
func periodPayments(ctx context.Context, tx pgx.Tx, o store.Order, p store.ServicePeriod) ([]store.Payment, error) {
	f := store.PaymentFilter{OrderID: &o.ID}
	switch {
	case p.Seq == 1:
	case p.InvoiceID != nil:
		f.InvoiceID = p.InvoiceID
	default:
		return nil, nil
	}
	pays, _, err := store.ListPayments(ctx, tx, f, 1000, 0)
	if err != nil {
		return nil, err
	}
	var out []store.Payment
	for _, pay := range pays {
		if pay.Status != "success" && pay.Status != "refunded" {
			continue
		}
		if p.Seq == 1 && pay.InvoiceID != nil {
			continue // a renewal's payment, not the order's own
		}
		out = append(out, pay)
	}
	return out, nil
}

// runs reports whether paid period p is still the service's: not closed
// by an end (its outcome is none yet, or renewed: a period whose successor
// was paid ahead ends renewed at once, and still runs to its end).
func runs(p store.ServicePeriod) bool {
	return p.Outcome == nil || *p.Outcome == store.OutcomeRenewed
}
