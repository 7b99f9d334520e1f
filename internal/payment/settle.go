package payment

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/text"
)

// Where a gateway's word about a payment came from.
const (
	fromCallback  = "callback"
	fromQuery     = "query"
	fromReconcile = "reconcile"
	fromConfirm   = "confirm"
)

// report is what a gateway (or an admin confirming a bank transfer) says
// about a payment.
type report struct {
	// Status is gatewaySuccess, gatewayFailed or gatewayPending.
	Status           string
	GatewayPaymentID string
	GatewayTxID      string
	// Amount is the amount the gateway received; nil when it did not say.
	Amount *money.Amount
	// RawAmount is the amount exactly as the gateway sent it (for the
	// anomaly record).
	RawAmount string
	// Currency is the currency the gateway reports, exactly as sent; ""
	// when it says none (epay's protocol has no currency).
	Currency string
	// Takes are the currencies the payment's interface takes
	// (Gateway.Currencies): a report that names no currency is in one of
	// them. nil skips that check (an admin confirming a transfer has seen
	// the money arrive).
	Takes []string
	// PaidAt is the gateway's payment time; zero means now.
	PaidAt time.Time
	// Reason is why a payment failed.
	Reason string
	// Gateway is the interface's plugin name, for the metrics.
	Gateway string
}

// Settlement is the outcome of applying a report.
type Settlement struct {
	// Payment is the payment afterwards.
	Payment store.Payment
	// Applied: this call moved the payment (pending → success or failed).
	Applied bool
	// Duplicate: the payment was already in the reported state with the
	// same gateway ids; nothing changed.
	Duplicate bool
	// OrderPaid: the order moved pending → paid and order_paid was queued.
	OrderPaid bool
	// Captured: the gateway took the money of a payment that could not
	// apply; it is failed with the money captured, to be returned.
	Captured bool
}

// settle applies a gateway's report about a payment: the one transition
// code behind callbacks, status queries, the reconciler and bank transfer
// confirmations.
//
// In one transaction it locks the order (if any), then the invoice (if
// any), then the payment, and decides on the locked rows:
//
//   - the payment must belong to interfaceID; a reported currency must be
//     the payment's, and a report without one must come from an interface
//     that takes the payment's currency (a payment made before currencies
//     were checked: 100.00 "USD" through epay was charged as 100.00 CNY);
//     a reported amount must equal the payment's (as decimals) — else
//     InvalidArgument, recorded as an anomaly, nothing changed;
//   - success, payment pending → success with the gateway ids and paid_at
//     (UPDATE … WHERE status = 'pending': the optimistic lock); the
//     invoice's paid_amount grows (paid when full); the order pending →
//     paid (directly, or when its invoice is paid in full) with its other
//     pending order payments failed and order_paid queued; audit rows;
//   - success, payment already success/refunded with the same gateway ids →
//     Duplicate; with other ids → InvalidArgument (order number mismatch),
//     recorded;
//   - success, payment failed → InvalidArgument, recorded: a final state is
//     never left (DESIGN.md: a late success for a failed payment);
//   - success, payment pending but its order or invoice can no longer be
//     paid (cancelled, paid otherwise) → the payment fails, InvalidArgument,
//     recorded: the money sits at the gateway and an admin must return it;
//   - failed, payment pending → failed (query and reconciler only);
//   - pending → nothing (the caller does not get here).
//
// Concurrent reports of one payment queue on the row locks; exactly one
// applies, the others see the result.
//
// The transaction is pipelined (store.WithPipelinedTx): a success that
// pays an order costs three round trips — BEGIN with the locks, the update
// with the order's move, the audit rows and order_paid with COMMIT
// (TestASuccessfulCallbackSettlesInFewRoundTrips).
func (s *Service) settle(ctx context.Context, src string, who audit.Actor, paymentID, interfaceID uuid.UUID, rep report) (Settlement, error) {
	// The gateway's ids are stored as they came and sent back to it later
	// (refunds, queries), so one PostgreSQL cannot hold is not mended: the
	// report is unreadable, like an unreadable amount.
	if strings.IndexByte(rep.GatewayPaymentID, 0) >= 0 || strings.IndexByte(rep.GatewayTxID, 0) >= 0 {
		return Settlement{}, apperr.New(apperr.InvalidArgument, "the gateway reports an unreadable gateway order or transaction number (a NUL character)")
	}
	var out Settlement
	var rejected error
	var failedOthers []store.Payment
	var voidedWithOrder int // the order's other pending payments, failed by its transition
	var moved bool          // the payment changed status in the transaction
	err := store.WithPipelinedTx(ctx, s.db, func(tx pgx.Tx) error {
		out, rejected, failedOthers, voidedWithOrder, moved = Settlement{}, nil, nil, 0, false
		// BEGIN and the three locks in one round trip.
		locked, err := store.LockForSettlement(ctx, tx, paymentID, interfaceID, rep.GatewayPaymentID)
		if err != nil {
			return paymentNotFound(err, paymentID)
		}
		ord, inv, p := locked.Order, locked.Invoice, locked.Payment
		if p.Method != methodGateway || p.GatewayInterfaceID == nil {
			return apperr.New(apperr.InvalidArgument, "payment %s was paid from the balance, not through a gateway", paymentID)
		}
		now := s.now()
		out.Payment = p

		// reject records an anomaly, commits it (and whatever was done
		// before it), and answers InvalidArgument with msg.
		note := func(kind, msg string) error {
			return s.recordAnomaly(ctx, tx, who, now, p, anomaly{
				Kind: kind, Message: msg, Source: src, GatewayPaymentID: rep.GatewayPaymentID,
				GatewayTxID: rep.GatewayTxID, Amount: rep.RawAmount, Currency: text.Clip(rep.Currency, 16),
			})
		}
		reject := func(kind, msg string) error {
			rejected = apperr.New(apperr.InvalidArgument, "%s", msg)
			return note(kind, msg)
		}
		// rejectTakenID rejects a gateway order id another payment of the
		// interface carries; false when it is free.
		rejectTakenID := func() (bool, error) {
			if locked.GatewayIDTakenBy == nil {
				return false, nil
			}
			return true, reject("order_number_mismatch", fmt.Sprintf("order number mismatch: gateway order %q already settled payment %s",
				text.Clip(rep.GatewayPaymentID, 80), *locked.GatewayIDTakenBy))
		}

		if *p.GatewayInterfaceID != interfaceID {
			return reject("interface_mismatch", fmt.Sprintf("payment %s does not belong to gateway interface %s", p.ID, interfaceID))
		}
		if problem := currencyMismatch(p, rep); problem != "" {
			return reject("currency_mismatch", problem)
		}
		if rep.Amount != nil && !rep.Amount.Equal(p.Amount) {
			return reject("amount_mismatch", fmt.Sprintf("amount mismatch: the gateway reports %s for payment %s of %s %s",
				text.Clip(rep.RawAmount, 40), p.ID, p.Amount, p.Currency))
		}

		paidAt := rep.PaidAt
		if paidAt.IsZero() || paidAt.After(now) {
			paidAt = now
		}
		paidAt = paidAt.UTC().Truncate(time.Microsecond)

		// capture records money that arrived for a payment that cannot
		// take it (failed already, or its order or invoice closed): the
		// payment is (or stays) failed with the money captured, to be
		// returned with RefundPayment; an anomaly tells the admins. A
		// callback is answered InvalidArgument (the payment did not
		// apply); a status query, the reconciler and a confirmation get
		// the captured record.
		capture := func(kind, msg, reason string) error {
			if taken, err := rejectTakenID(); taken || err != nil {
				return err
			}
			captured, err := store.CapturePayment(ctx, tx, p.ID, store.Capture{
				GatewayPaymentID: rep.GatewayPaymentID, GatewayTxID: rep.GatewayTxID,
				FailureReason: text.Clip(reason, 200), CapturedAt: paidAt, At: now,
			})
			if err != nil {
				return bug(err, "capture payment") // locked, pending or failed, not captured
			}
			if err := audit.Write(ctx, tx, who, now, ActionPaymentCapture, entityPayment, p.ID.String(), paymentSnapshot(p), settledState{paymentSnapshot(captured), src}); err != nil {
				return err
			}
			out.Payment, out.Captured = captured, true
			moved = Status(p.Status) != StatusFailed
			if src == fromCallback {
				return reject(kind, msg)
			}
			return note(kind, msg)
		}

		switch Status(p.Status) {
		case StatusSuccess, StatusRefunded:
			if rep.Status == gatewaySuccess && sameGatewayIDs(p, rep) {
				out.Duplicate = true
				return nil
			}
			if rep.Status == gatewayFailed {
				return reject("failed_after_success", fmt.Sprintf("the gateway reports payment %s failed, but it is %s here", p.ID, p.Status))
			}
			if rep.Status != gatewaySuccess {
				return nil // pending: nothing to apply
			}
			return reject("order_number_mismatch", fmt.Sprintf("order number mismatch: payment %s was settled as gateway order %q, the gateway now reports %q",
				p.ID, p.GatewayPaymentID, text.Clip(rep.GatewayPaymentID, 80)))
		case StatusFailed:
			switch {
			case rep.Status == gatewayFailed:
				out.Duplicate = true
				return nil
			case rep.Status != gatewaySuccess:
				return nil // pending: nothing to apply
			case p.CapturedAmount.Sign() > 0 && sameGatewayIDs(p, rep):
				out.Duplicate = true // the capture, reported again
				return nil
			case p.CapturedAmount.Sign() > 0:
				return reject("order_number_mismatch", fmt.Sprintf("order number mismatch: payment %s captured gateway order %q, the gateway now reports %q",
					p.ID, p.GatewayPaymentID, text.Clip(rep.GatewayPaymentID, 80)))
			}
			// A final state is never left: the money is captured, to be
			// returned.
			return capture("late_success", fmt.Sprintf("late success: payment %s is failed (%s), but the gateway took %s %s after all: recorded as captured money to return",
				p.ID, p.FailureReason, p.Amount, p.Currency), "")
		case StatusPending:
		default:
			return apperr.New(apperr.Internal, "payment %s has unknown status %q", p.ID, p.Status)
		}

		if rep.Status == gatewayFailed {
			reason := rep.Reason
			if reason == "" {
				reason = "the gateway reports the payment failed"
			}
			failed, err := store.MarkPaymentFailed(ctx, tx, p.ID, text.Clip(reason, 200), now)
			if err != nil {
				return bug(err, "fail payment") // locked and pending
			}
			out.Payment, out.Applied, moved = failed, true, true
			return audit.Write(ctx, tx, who, now, ActionPaymentFail, entityPayment, p.ID.String(), paymentSnapshot(p), paymentSnapshot(failed))
		}
		if rep.Status != gatewaySuccess {
			return nil // pending: nothing to apply
		}

		// Can the order or invoice still take this money?
		if problem := notPayable(ord, inv, p); problem != "" {
			return capture("paid_after_close", fmt.Sprintf("payment %s cannot be applied: %s; recorded as captured money to return", p.ID, problem),
				problem+"; paid at the gateway, to be returned")
		}
		if taken, err := rejectTakenID(); taken || err != nil {
			return err
		}

		// The update waits to go with the invoice's or the order's writes,
		// ahead of them, in one round trip: they need nothing of its answer
		// (the order's move, after it, no longer sees this payment pending).
		// When they fail, its own failure, if any, is the one to report.
		settled := store.MarkPaymentSucceededLater(ctx, tx, p.ID, store.PaymentSuccess{
			GatewayPaymentID: rep.GatewayPaymentID, GatewayTxID: rep.GatewayTxID, PaidAt: paidAt, At: now,
		})
		settleFailed := func(err error) error {
			if _, serr := settled.Get(ctx); serr != nil {
				return bug(serr, "settle payment") // locked and pending; the gateway id was checked free
			}
			return err
		}

		invoiceSettled := false
		if inv != nil {
			after, err := store.AddInvoicePayment(ctx, tx, inv.ID, p.Amount, paidAt, now)
			if err != nil {
				return settleFailed(bug(err, "add payment to invoice")) // checked payable under its lock
			}
			if err := audit.Write(ctx, tx, who, now, ActionInvoicePay, entityInvoice, inv.ID.String(), invoiceSnapshot(*inv), invoiceSnapshot(after)); err != nil {
				return err
			}
			if order.InvoiceStatus(after.Status) == order.InvoicePaid {
				invoiceSettled = true
				others, err := store.FailPendingInvoicePayments(ctx, tx, inv.ID, "invoice paid by payment "+p.ID.String(), now)
				if err != nil {
					return err
				}
				failedOthers = append(failedOthers, others...)
			}
		}
		if ord != nil && order.Status(ord.Status) == order.StatusPending && (inv == nil || invoiceSettled) {
			// The order's other pending payments fail with it (audited by
			// the transition).
			paidMove, err := order.Transition(ctx, tx, *ord, order.Move{
				To: order.StatusPaid, By: who, At: now, PaidAt: paidAt,
				FailReason: "order paid by payment " + p.ID.String(),
				Paid: &order.OrderPaidPayload{
					OrderID: ord.ID, PaymentID: &p.ID, Amount: p.Amount, Currency: p.Currency, Method: order.MethodGateway,
				},
			})
			if err != nil {
				return settleFailed(err)
			}
			out.OrderPaid, voidedWithOrder = true, len(paidMove.FailedPayments)
		}

		paid, err := settled.Get(ctx)
		if err != nil {
			return bug(err, "settle payment") // locked and pending; the gateway id was checked free
		}
		action := ActionPaymentSuccess
		if src == fromConfirm {
			action = ActionPaymentConfirm
		}
		if err := audit.Write(ctx, tx, who, now, action, entityPayment, p.ID.String(), paymentSnapshot(p), settledState{paymentSnapshot(paid), src}); err != nil {
			return err
		}
		out.Payment, out.Applied, moved = paid, true, true
		return auditFailedPayments(ctx, tx, who, now, failedOthers)
	})
	if err != nil {
		return Settlement{}, err
	}
	if moved {
		s.metrics.PaymentTransition(rep.Gateway, out.Payment.Status, out.Payment.Amount, out.Payment.Currency)
	}
	if out.Captured {
		s.metrics.MoneyCaptured(rep.Gateway, out.Payment.CapturedAmount, out.Payment.Currency)
		s.log.WarnContext(ctx, "money captured for a payment that cannot apply; to be returned", "payment_id", paymentID,
			"source", src, "amount", out.Payment.CapturedAmount.String(), "currency", out.Payment.Currency,
			"gateway_payment_id", out.Payment.GatewayPaymentID, "failure_reason", out.Payment.FailureReason)
	}
	if rejected != nil {
		return Settlement{Payment: out.Payment}, rejected
	}
	if out.Applied {
		s.log.InfoContext(ctx, "payment settled", "payment_id", paymentID, "status", out.Payment.Status,
			"source", src, "actor", who.Kind+":"+who.ID, "amount", out.Payment.Amount.String(), "currency", out.Payment.Currency,
			"gateway_payment_id", out.Payment.GatewayPaymentID, "order_paid", out.OrderPaid, "voided_payments", len(failedOthers)+voidedWithOrder)
	}
	return out, nil
}

// currencyMismatch says why a report cannot be about p's money ("" when it
// can): it names another currency, or it is a success that names none and
// comes from an interface that does not take p's. Codes compare without regard to case
// or surrounding spaces ("usd" is USD); anything else differs.
func currencyMismatch(p store.Payment, rep report) string {
	if got := strings.ToUpper(strings.TrimSpace(rep.Currency)); got != "" {
		if got == p.Currency {
			return ""
		}
		return fmt.Sprintf("currency mismatch: the gateway reports %s %s for payment %s of %s %s",
			text.Clip(rep.RawAmount, 40), text.Clip(rep.Currency, 16), p.ID, p.Amount, p.Currency)
	}
	// Only money that arrived needs its currency: a failure moved none, and
	// fails a pending payment made before currencies were checked, as it
	// should.
	if rep.Status != gatewaySuccess || rep.Takes == nil || slices.Contains(rep.Takes, p.Currency) {
		return ""
	}
	return fmt.Sprintf("currency mismatch: payment %s is of %s %s, but its gateway interface takes %s, so what it reports is not %s",
		p.ID, p.Amount, p.Currency, currenciesText(rep.Takes), p.Currency)
}

// settledState is the audit "after" of a settlement: the payment and what
// settled it (callback, query, reconcile, confirm).
type settledState struct {
	paymentState
	Source string `json:"source"`
}

// sameGatewayIDs reports whether a report names the gateway order (and
// transaction, when both sides know one) a settled payment already carries:
// the repeat of an applied callback.
func sameGatewayIDs(p store.Payment, rep report) bool {
	if p.GatewayPaymentID != rep.GatewayPaymentID {
		return false
	}
	return p.GatewayTxID == "" || rep.GatewayTxID == "" || p.GatewayTxID == rep.GatewayTxID
}

// notPayable says why a pending payment's order or invoice can no longer
// take it ("" when they can): the invoice must be issued or overdue with
// room for the amount; an order paid without an invoice must be pending.
func notPayable(ord *store.Order, inv *store.Invoice, p store.Payment) string {
	if inv != nil {
		if !order.CanTransitionInvoice(order.InvoiceStatus(inv.Status), order.InvoicePaid) {
			return fmt.Sprintf("invoice %s is %s", inv.ID, inv.Status)
		}
		total, err := inv.PaidAmount.Add(p.Amount)
		if err != nil || total.Cmp(inv.Amount) > 0 {
			return fmt.Sprintf("invoice %s has only %s left to pay", inv.ID, mustSub(inv.Amount, inv.PaidAmount))
		}
		return ""
	}
	if ord != nil && !order.CanTransition(order.Status(ord.Status), order.StatusPaid) {
		return fmt.Sprintf("order %s is %s", ord.ID, ord.Status)
	}
	return ""
}

func mustSub(a, b money.Amount) money.Amount {
	d, err := a.Sub(b)
	if err != nil {
		return money.Zero()
	}
	return d
}
