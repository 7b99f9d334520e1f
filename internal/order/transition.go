package order

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/store"
)

// Move is one order transition: where the order goes, who moves it and
// when, and what the move carries that its consequences need.
type Move struct {
	To Status
	By audit.Actor
	At time.Time
	// PaidAt is when the money arrived, for a move from pending (the
	// gateway's time of payment); zero means At.
	PaidAt time.Time
	// BillingAt is At on the billing clock, which dates the periods the
	// move starts (provisioning → active): the moved clock with
	// [billing].test_clock on; zero means At (production).
	BillingAt time.Time

	// Paid is the order_paid event of a move to paid (a gateway payment
	// settled it) or, for a balance payment, pending → provisioning.
	Paid *OrderPaidPayload
	// CancelReason (one of the CancelReason constants) and RefundDue are
	// the order_cancelled event of a move to cancelled.
	CancelReason string
	RefundDue    bool
	// FailReason is what the pending payments a move to paid or cancelled
	// fails are failed with (payments.failure_reason).
	FailReason string
	// InstanceID is the instance a move to active provisioned (nil when
	// the product has nothing to provision).
	InstanceID *uuid.UUID
	// Refunded names the payment and the refund of a move to refunded (its
	// order_refunded event; the transition adds the order's instance).
	Refunded *OrderRefundedPayload
	// SuspendReason (SuspendReasonOverdue or SuspendReasonAdmin) is why a
	// move to suspended suspends; EndReason (an EndReason constant) why a
	// move to terminated or completed ends the service.
	SuspendReason string
	EndReason     string
	// Location is the billing time zone the first service period of a
	// recurring order is counted in, for provisioning → active (nil: UTC).
	Location *time.Location
	// Note is an admin's reason, kept in the audit row's "after".
	Note string
	// EndCredit is what an ending now (EndService) did with the unused
	// share: kept in the audit row's "after" and the service_terminated
	// payload (the customer's notice).
	EndCredit *EndCreditNote
}

// Moved is what a transition did: the order as it is now, and the pending
// payments it failed (an order that is paid or cancelled takes no other
// payment). CancelledInvoices are the open renewal invoices an order that
// ended cancelled, each with the pending payments it failed.
type Moved struct {
	Order             store.Order
	FailedPayments    []store.Payment
	CancelledInvoices []InvoiceMoved
}

// actions name each transition in the audit log.
var actions = map[[2]Status]string{
	{StatusPending, StatusPaid}:           ActionOrderPaid,
	{StatusPending, StatusProvisioning}:   ActionOrderPay,
	{StatusPaid, StatusProvisioning}:      ActionOrderProvisioning,
	{StatusProvisioning, StatusActive}:    ActionOrderActivate,
	{StatusPending, StatusCancelled}:      ActionOrderCancel,
	{StatusProvisioning, StatusCancelled}: ActionOrderCancel,
	{StatusPaid, StatusRefunded}:          ActionOrderRefund,
	{StatusProvisioning, StatusRefunded}:  ActionOrderRefund,
	{StatusActive, StatusRefunded}:        ActionOrderRefund,
	{StatusSuspended, StatusRefunded}:     ActionOrderRefund,
	{StatusActive, StatusSuspended}:       ActionOrderSuspend,
	{StatusSuspended, StatusActive}:       ActionOrderResume,
	{StatusActive, StatusCompleted}:       ActionOrderComplete,
	{StatusActive, StatusTerminated}:      ActionOrderTerminate,
	{StatusSuspended, StatusTerminated}:   ActionOrderTerminate,
}

// TransitionAction is the audit action of the move from → to ("" for a
// move the table does not allow).
func TransitionAction(from, to Status) string { return actions[[2]Status{from, to}] }

// ErrTransition marks a move the state machine does not allow from the
// order's status.
var ErrTransition = apperr.New(apperr.FailedPrecondition, "order transition not allowed")

// Transition is the one writer of orders.status. It moves o (locked in tx
// by the caller, with GetOrderForUpdate) to m.To when the state machine
// allows it from o's status, and in the same transaction does what the move
// implies:
//
//	pending → paid              fail the other pending payments for the order itself
//	                            (not its invoices'), queue order_paid
//	pending → provisioning      (balance) the same
//	paid → provisioning         nothing more (the worker took order_paid)
//	provisioning → active       start the first service period of a recurring
//	                            order, queue order_provisioned
//	active → suspended          record the reason, queue service_suspended
//	suspended → active          queue service_resumed
//	→ terminated, completed     end the open service periods, queue
//	                            service_terminated
//	→ cancelled                 fail the pending payments, queue order_cancelled
//	→ refunded                  end the open service periods, queue
//	                            order_refunded (its handler ends the service)
//
// and, on every move to a final status (terminated, completed, cancelled,
// refunded), whichever path makes it (a refund, an admin, the billing
// run, a cancellation), it cancels the order's open renewal invoice and
// fails its pending payments through InvoiceTransition — except a partly
// paid one, which stays for an admin to decide (its money is the
// customer's; cancelling would strand it). Money that arrives for the
// order afterwards is captured, to be returned (payment's settlement).
//
// and writes the audit rows of the order and of every payment it failed. A
// move the table refuses is ErrTransition (FailedPrecondition) and changes
// nothing.
func Transition(ctx context.Context, tx pgx.Tx, o store.Order, m Move) (Moved, error) {
	from := Status(o.Status)
	if !CanTransition(from, m.To) {
		return Moved{}, apperr.Wrap(apperr.FailedPrecondition, ErrTransition, "order %s is %s; it cannot become %s", o.ID, from, m.To)
	}
	if from == StatusPending && (m.To == StatusPaid || m.To == StatusProvisioning) && m.Paid == nil {
		return Moved{}, apperr.New(apperr.Internal, "order %s: paid without an order_paid payload", o.ID)
	}
	// An order that ends takes no more money for its service: its open
	// renewal invoice is cancelled first, through the one invoice writer
	// (audit rows, its pending payments failed), so that the order row
	// written next already carries what the cancel changed of it.
	var out Moved
	var cancelled []InvoiceMoved
	// Only a recurring order has periods, so only its end looks for their
	// invoices: a one-time order's cancellation (the pending timeout's
	// sweep, a customer's) or refund makes no extra round trip.
	if m.To.IsFinal() && BillingCycle(o.BillingCycle).Months() > 0 {
		var err error
		if cancelled, err = cancelOpenRenewalInvoices(ctx, tx, o, m); err != nil {
			return Moved{}, err
		}
		proration, err := cancelPendingPlanChange(ctx, tx, o, m)
		if err != nil {
			return Moved{}, err
		}
		cancelled = append(cancelled, proration...)
	}
	// The order and the pending payments the move fails are written in one
	// round trip.
	var err error
	switch {
	case m.To == StatusCancelled:
		out.Order, out.FailedPayments, err = store.CancelOrderFailingPayments(ctx, tx, o.ID, string(from), m.CancelReason, m.At, m.FailReason)
	case from == StatusPending && (m.To == StatusPaid || m.To == StatusProvisioning):
		paidAt := m.At
		if !m.PaidAt.IsZero() {
			paidAt = m.PaidAt
		}
		out.Order, out.FailedPayments, err = store.SetOrderStatusFailingPayments(ctx, tx, o.ID, string(from), string(m.To), &paidAt, m.At, m.FailReason)
	case m.To == StatusSuspended:
		if m.SuspendReason != SuspendReasonOverdue && m.SuspendReason != SuspendReasonAdmin && m.SuspendReason != SuspendReasonDispute {
			return Moved{}, apperr.New(apperr.Internal, "order %s: suspended without a reason", o.ID)
		}
		out.Order, err = store.Q(tx).SuspendOrder(ctx, store.SuspendOrderParams{
			ID: o.ID, FromStatus: string(from), SuspendReason: m.SuspendReason, UpdatedAt: m.At,
		})
	default:
		out.Order, err = store.Q(tx).SetOrderStatus(ctx, store.SetOrderStatusParams{
			ID: o.ID, FromStatus: string(from), ToStatus: string(m.To), UpdatedAt: m.At,
		})
	}
	if err != nil {
		// The row is locked by the caller in status from: a miss is a bug.
		return Moved{}, store.Bug(err, "order %s: move %s → %s", o.ID, from, m.To)
	}
	out.CancelledInvoices = cancelled
	after := orderSnapshot(out.Order)
	after.Note = m.Note
	after.EndCredit = m.EndCredit
	if err := audit.Write(ctx, tx, m.By, m.At, TransitionAction(from, m.To), entityOrder, o.ID.String(), orderSnapshot(o), after); err != nil {
		return Moved{}, err
	}

	var event string
	var payload any
	switch {
	case from == StatusPending && (m.To == StatusPaid || m.To == StatusProvisioning):
		event, payload = EventOrderPaid, m.Paid
	case from == StatusSuspended && m.To == StatusActive:
		p, err := servicePayload(ctx, tx, o.ID, "")
		if err != nil {
			return Moved{}, err
		}
		event, payload = EventServiceResumed, p
	case m.To == StatusActive:
		if err := startFirstPeriod(ctx, tx, out.Order, m); err != nil {
			return Moved{}, err
		}
		event, payload = EventOrderProvisioned, OrderProvisionedPayload{OrderID: o.ID, InstanceID: m.InstanceID}
	case m.To == StatusSuspended:
		p, err := servicePayload(ctx, tx, o.ID, m.SuspendReason)
		if err != nil {
			return Moved{}, err
		}
		event, payload = EventServiceSuspended, p
	case m.To == StatusTerminated || m.To == StatusCompleted:
		if m.EndReason == "" {
			return Moved{}, apperr.New(apperr.Internal, "order %s: ended without a reason", o.ID)
		}
		if err := closePeriods(ctx, tx, o.ID, store.OutcomeEnded, m.At); err != nil {
			return Moved{}, err
		}
		p, err := servicePayload(ctx, tx, o.ID, m.EndReason)
		if err != nil {
			return Moved{}, err
		}
		if c := m.EndCredit; c != nil {
			p.CreditMode, p.Credited, p.Currency = c.Mode, &c.Credited, c.Currency
		}
		event, payload = EventServiceTerminated, p
	case m.To == StatusCancelled:
		event, payload = EventOrderCancelled, OrderCancelledPayload{OrderID: o.ID, Reason: m.CancelReason, RefundDue: m.RefundDue}
	case m.To == StatusRefunded:
		if m.Refunded == nil {
			return Moved{}, apperr.New(apperr.Internal, "order %s: refunded without an order_refunded payload", o.ID)
		}
		if err := closePeriods(ctx, tx, o.ID, store.OutcomeRefunded, m.At); err != nil {
			return Moved{}, err
		}
		p := *m.Refunded
		p.OrderID = o.ID
		// The order row is locked: its instance, if any, is the one the
		// worker created under the same lock.
		inst, err := store.Q(tx).GetOrderInstance(ctx, o.ID)
		switch {
		case err == nil:
			p.InstanceID = &inst.ID
		case !errors.Is(err, store.ErrNotFound):
			return Moved{}, err
		}
		event, payload = EventOrderRefunded, p
	}
	if err := AuditFailedPayments(ctx, tx, m.By, m.At, out.FailedPayments); err != nil {
		return Moved{}, err
	}
	if event != "" {
		body, err := json.Marshal(payload)
		if err != nil {
			return Moved{}, err
		}
		if err := store.AppendEvent(ctx, tx, event, o.ID, body); err != nil {
			return Moved{}, err
		}
	}
	return out, nil
}

// servicePayload is the service_* event body of order id: its instance
// (the one the worker created under the order's lock, which the caller
// holds), if any, and the reason.
func servicePayload(ctx context.Context, tx pgx.Tx, orderID uuid.UUID, reason string) (ServicePayload, error) {
	p := ServicePayload{OrderID: orderID, Reason: reason}
	inst, err := store.Q(tx).GetOrderInstance(ctx, orderID)
	switch {
	case err == nil:
		p.InstanceID = &inst.ID
	case !errors.Is(err, store.ErrNotFound):
		return ServicePayload{}, err
	}
	return p, nil
}

// failedByOrderEnd is the failure reason of the pending payments of a
// renewal invoice cancelled because its order ended.
const failedByOrderEnd = "invoice cancelled: the order ended"

// cancelPendingPlanChange cancels order o's pending plan change for the
// move m to a final status: an upgrade's unpaid proration invoice through
// InvoiceTransition (which cancels the change, planChangeOnCancel, and
// fails the invoice's pending payments), a change waiting for the period
// end directly. A partly paid proration is left as it is, as a partly paid
// renewal invoice is (an admin decides). A period-end change already billed
// went with its renewal invoice (cancelOpenRenewalInvoices, first). The
// caller holds o's lock.
func cancelPendingPlanChange(ctx context.Context, tx pgx.Tx, o store.Order, m Move) ([]InvoiceMoved, error) {
	pending, err := store.Q(tx).PendingPlanChange(ctx, o.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ch, err := store.Q(tx).GetPlanChangeForUpdate(ctx, pending.ID)
	if err != nil {
		return nil, store.BugIfNotFound(err, "lock the pending plan change")
	}
	if ch.InvoiceID != nil {
		inv, err := store.Q(tx).GetInvoiceForUpdate(ctx, *ch.InvoiceID)
		if err != nil {
			return nil, store.BugIfNotFound(err, "lock the plan change's invoice")
		}
		if !inv.PaidAmount.IsZero() || (InvoiceStatus(inv.Status) != InvoiceIssued && InvoiceStatus(inv.Status) != InvoiceOverdue) {
			return nil, nil
		}
		moved, err := InvoiceTransition(ctx, tx, inv, InvoiceMove{
			To: InvoiceCancelled, By: m.By, At: m.At, FailReason: failedByOrderEnd + " (" + string(m.To) + ")",
		})
		if err != nil {
			return nil, err
		}
		return []InvoiceMoved{moved}, nil
	}
	after, err := store.Q(tx).SetPlanChangeStatus(ctx, store.SetPlanChangeStatusParams{
		ID: ch.ID, Status: store.PlanChangeCancelled, Credited: ch.Credited, UpdatedAt: m.At,
	})
	if err != nil {
		return nil, store.BugIfNotFound(err, "cancel the plan change")
	}
	return nil, audit.Write(ctx, tx, m.By, m.At, ActionPlanChangeCancel, entityPlanChange, ch.ID.String(), planChangeSnapshot(ch), planChangeSnapshot(after))
}

// cancelOpenRenewalInvoices cancels, through InvoiceTransition, the issued
// or overdue invoices billing order o's unpaid periods, for the move m to
// a final status; a partly paid one is left as it is (an admin decides:
// refund what was paid, or take the rest). The caller holds o's lock.
func cancelOpenRenewalInvoices(ctx context.Context, tx pgx.Tx, o store.Order, m Move) ([]InvoiceMoved, error) {
	invs, err := store.Q(tx).LockOpenRenewalInvoices(ctx, o.ID)
	if err != nil {
		return nil, err
	}
	var out []InvoiceMoved
	for _, inv := range invs {
		if !inv.PaidAmount.IsZero() {
			continue
		}
		moved, err := InvoiceTransition(ctx, tx, inv, InvoiceMove{
			To: InvoiceCancelled, By: m.By, At: m.At, FailReason: failedByOrderEnd + " (" + string(m.To) + ")",
		})
		if err != nil {
			return nil, err
		}
		out = append(out, moved)
	}
	return out, nil
}
