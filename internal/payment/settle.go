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
	"github.com/rustbill/paymentd/internal/timerange"
)

// Where a gateway's word about a payment came from.
const (
	fromCallback  = "callback"
	fromQuery     = "query"
	fromReconcile = "reconcile"
	fromConfirm   = "confirm"
	// fromCharge: the answer of a charge of a saved method (charge_saved).
	fromCharge = "charge"
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
// It runs in named steps, in one transaction:
//
//	lock     the order (if any), the invoice (if any) and the payment, and
//	         ask which payment already carries the reported gateway order
//	decide   on the locked rows what the report means (decide, pure)
//	apply    the decision: a rejection or a failure is recorded on its own;
//	         a success is applied to the payment, then to the invoice
//	         (applyToInvoice), then to the order (applyToOrder)
//
// What decide answers:
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
//   - success, payment failed → the money is captured, to be returned
//     (recorded, and InvalidArgument to a callback): a final state is
//     never left (docs/decisions.md, "payment transitions": a late
//     success for a failed payment);
//   - success, payment pending but its order or invoice can no longer be
//     paid (cancelled, paid otherwise) → the payment fails with the money
//     captured, to be returned; recorded, and InvalidArgument to a callback;
//   - failed, payment pending → failed (a status query or the reconciler:
//     a callback that is not a success does not get here);
//   - pending → nothing (the caller does not get here).
//
// Concurrent reports of one payment queue on the row locks; exactly one
// applies, the others see the result.
//
// The transaction is pipelined (store.WithPipelinedTx): a success that
// pays an order costs three round trips — BEGIN with the locks, the update
// with the order's move, the audit rows and order_paid with COMMIT
// (TestASuccessfulCallbackSettlesInFewRoundTrips). The steps keep that
// order of statements; moving one changes the count.
func (s *Service) settle(ctx context.Context, src string, who audit.Actor, paymentID, interfaceID uuid.UUID, rep report) (Settlement, error) {
	// The gateway's ids are stored as they came and sent back to it later
	// (refunds, queries), so one PostgreSQL cannot hold is not mended: the
	// report is unreadable, like an unreadable amount.
	if strings.IndexByte(rep.GatewayPaymentID, 0) >= 0 || strings.IndexByte(rep.GatewayTxID, 0) >= 0 {
		return Settlement{}, apperr.New(apperr.InvalidArgument, "the gateway reports an unreadable gateway order or transaction number (a NUL character)")
	}
	var st *settling
	err := store.WithPipelinedTx(ctx, s.db, func(tx pgx.Tx) error {
		st = &settling{s: s, tx: tx, src: src, who: who, rep: rep} // afresh on a retry
		if err := st.lock(ctx, paymentID, interfaceID); err != nil {
			return err
		}
		d, err := decide(st.rows, interfaceID, rep, st.now)
		if err != nil {
			return err
		}
		return st.apply(ctx, d)
	})
	if err != nil {
		return Settlement{}, err
	}
	return st.result(ctx, paymentID)
}

// settling is one run of settle's transaction: what it locked and what it
// did. A retried transaction starts a new one.
type settling struct {
	s   *Service
	tx  pgx.Tx
	src string
	who audit.Actor
	rep report
	now time.Time

	rows store.SettlementRows
	// settled is the payment's pending → success, waiting to go with the
	// invoice's or the order's writes (pay).
	settled *store.Later[store.Payment]

	out Settlement
	// rejected is the answer to a report recorded as an anomaly: the
	// transaction commits the record, the caller gets the error.
	rejected error
	// voidedWithInvoice and voidedWithOrder count the invoice's and the
	// order's other pending payments, failed by their transitions.
	voidedWithInvoice, voidedWithOrder int
	moved                              bool // the payment changed status in the transaction
}

// lock is settle's first step: BEGIN and the three locks in one round
// trip. Only a gateway payment is settled by a gateway's report.
func (st *settling) lock(ctx context.Context, paymentID, interfaceID uuid.UUID) error {
	rows, err := store.LockForSettlement(ctx, st.tx, paymentID, interfaceID, st.rep.GatewayPaymentID)
	if err != nil {
		return store.NotFound(err, "payment %s not found", paymentID)
	}
	p := rows.Payment
	if p.Method != methodGateway || p.GatewayInterfaceID == nil {
		return apperr.New(apperr.InvalidArgument, "payment %s was paid from the balance, not through a gateway", paymentID)
	}
	st.rows, st.now = rows, st.s.now()
	st.out.Payment = p
	return nil
}

// verdict is what a report means for a locked payment.
type verdict int

const (
	verdictNothing   verdict = iota // the gateway says pending: nothing to apply
	verdictDuplicate                // already applied, reported again
	verdictReject                   // recorded as an anomaly, answered InvalidArgument
	verdictCapture                  // money arrived that cannot apply: captured, to be returned
	verdictFail                     // the pending payment fails
	verdictPay                      // the pending payment succeeds and pays its invoice or order
)

// decision is decide's answer.
type decision struct {
	verdict verdict
	// kind and msg are the anomaly's (verdictReject, verdictCapture).
	kind, msg string
	// reason is the payment's failure reason (verdictFail, verdictCapture).
	reason string
	// paidAt is when the gateway took the money (verdictCapture,
	// verdictPay): its time, never after now.
	paidAt time.Time
}

// decide is settle's second step: what rep means for the locked rows. It
// reads nothing and writes nothing.
func decide(rows store.SettlementRows, interfaceID uuid.UUID, rep report, now time.Time) (decision, error) {
	p := rows.Payment
	reject := func(kind, msg string) (decision, error) {
		return decision{verdict: verdictReject, kind: kind, msg: msg}, nil
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
	// A time the service could not store and encode (year -1 from
	// "0000-01-01T00:00:00+08:00") is no better than none.
	if paidAt.IsZero() || paidAt.After(now) || !timerange.Contains(paidAt) {
		paidAt = now
	}
	paidAt = store.Timestamp(paidAt)
	// takenID rejects a gateway order id another payment of the interface
	// carries: neither a capture nor a success may take it.
	takenID := func() (decision, bool) {
		if rows.GatewayIDTakenBy == nil {
			return decision{}, false
		}
		return decision{verdict: verdictReject, kind: "order_number_mismatch", msg: fmt.Sprintf("order number mismatch: gateway order %q already settled payment %s",
			text.Clip(rep.GatewayPaymentID, 80), *rows.GatewayIDTakenBy)}, true
	}
	// capture: money that arrived for a payment that cannot take it
	// (failed already, or its order or invoice closed).
	capture := func(kind, msg, reason string) (decision, error) {
		if d, taken := takenID(); taken {
			return d, nil
		}
		return decision{verdict: verdictCapture, kind: kind, msg: msg, reason: reason, paidAt: paidAt}, nil
	}

	switch Status(p.Status) {
	case StatusSuccess, StatusRefunded:
		if rep.Status == gatewaySuccess && sameGatewayIDs(p, rep) {
			return decision{verdict: verdictDuplicate}, nil
		}
		if rep.Status == gatewayFailed {
			return reject("failed_after_success", fmt.Sprintf("the gateway reports payment %s failed, but it is %s here", p.ID, p.Status))
		}
		if rep.Status != gatewaySuccess {
			return decision{verdict: verdictNothing}, nil
		}
		return reject("order_number_mismatch", fmt.Sprintf("order number mismatch: payment %s was settled as gateway order %q, the gateway now reports %q",
			p.ID, p.GatewayPaymentID, text.Clip(rep.GatewayPaymentID, 80)))
	case StatusFailed:
		switch {
		case rep.Status == gatewayFailed:
			return decision{verdict: verdictDuplicate}, nil
		case rep.Status != gatewaySuccess:
			return decision{verdict: verdictNothing}, nil
		case p.CapturedAmount.Sign() > 0 && sameGatewayIDs(p, rep):
			return decision{verdict: verdictDuplicate}, nil // the capture, reported again
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
		return decision{}, apperr.New(apperr.Internal, "payment %s has unknown status %q", p.ID, p.Status)
	}

	if rep.Status == gatewayFailed {
		reason := rep.Reason
		if reason == "" {
			reason = "the gateway reports the payment failed"
		}
		return decision{verdict: verdictFail, reason: reason}, nil
	}
	if rep.Status != gatewaySuccess {
		return decision{verdict: verdictNothing}, nil
	}
	// Can the order or invoice still take this money?
	if problem := notPayable(rows, p); problem != "" {
		return capture("paid_after_close", fmt.Sprintf("payment %s cannot be applied: %s; recorded as captured money to return", p.ID, problem),
			problem+"; paid at the gateway, to be returned")
	}
	if d, taken := takenID(); taken {
		return d, nil
	}
	return decision{verdict: verdictPay, paidAt: paidAt}, nil
}

// apply is settle's third step: it carries out d in the transaction.
func (st *settling) apply(ctx context.Context, d decision) error {
	switch d.verdict {
	case verdictDuplicate:
		st.out.Duplicate = true
		return nil
	case verdictReject:
		return st.reject(ctx, d.kind, d.msg)
	case verdictCapture:
		return st.capture(ctx, d)
	case verdictFail:
		return st.fail(ctx, d.reason)
	case verdictPay:
		return st.pay(ctx, d.paidAt)
	}
	return nil // verdictNothing
}

// note records an anomaly about the report; the transaction commits it
// (and whatever was done before it).
func (st *settling) note(ctx context.Context, kind, msg string) error {
	rep := st.rep
	return st.s.recordAnomaly(ctx, st.tx, st.who, st.now, st.rows.Payment, anomaly{
		Kind: kind, Message: msg, Source: st.src, GatewayPaymentID: rep.GatewayPaymentID,
		GatewayTxID: rep.GatewayTxID, Amount: rep.RawAmount, Currency: text.Clip(rep.Currency, 16),
	})
}

// reject records an anomaly, commits it, and answers InvalidArgument with
// msg.
func (st *settling) reject(ctx context.Context, kind, msg string) error {
	st.rejected = apperr.New(apperr.InvalidArgument, "%s", msg)
	return st.note(ctx, kind, msg)
}

// capture records money that arrived for a payment that cannot take it:
// the payment is (or stays) failed with the money captured, to be returned
// with RefundPayment; an anomaly tells the admins. A callback is answered
// InvalidArgument (the payment did not apply); a status query, the
// reconciler and a confirmation get the captured record.
func (st *settling) capture(ctx context.Context, d decision) error {
	p, rep := st.rows.Payment, st.rep
	captured, err := store.Q(st.tx).CapturePayment(ctx, store.CapturePaymentParams{
		ID: p.ID, FailureReason: text.Clip(d.reason, 200), UpdatedAt: st.now, CapturedAt: &d.paidAt,
		GatewayPaymentID: rep.GatewayPaymentID, GatewayTxID: rep.GatewayTxID,
	})
	if err != nil {
		return store.BugIfNotFound(err, "capture payment") // locked, pending or failed, not captured
	}
	if err := audit.Write(ctx, st.tx, st.who, st.now, ActionPaymentCapture, entityPayment, p.ID.String(), order.PaymentSnapshot(p), settledState{order.PaymentSnapshot(captured), st.src}); err != nil {
		return err
	}
	st.out.Payment, st.out.Captured = captured, true
	st.moved = Status(p.Status) != StatusFailed
	if st.src == fromCallback {
		return st.reject(ctx, d.kind, d.msg)
	}
	return st.note(ctx, d.kind, d.msg)
}

// fail moves the pending payment to failed with reason.
func (st *settling) fail(ctx context.Context, reason string) error {
	p := st.rows.Payment
	failed, err := store.MarkPaymentFailed(ctx, st.tx, p.ID, text.Clip(reason, 200), st.now)
	if err != nil {
		return store.BugIfNotFound(err, "fail payment") // locked and pending
	}
	st.out.Payment, st.out.Applied, st.moved = failed, true, true
	return audit.Write(ctx, st.tx, st.who, st.now, audit.ActionPaymentFail, entityPayment, p.ID.String(), order.PaymentSnapshot(p), order.PaymentSnapshot(failed))
}

// pay moves the pending payment to success, then applies it to its
// invoice and its order.
func (st *settling) pay(ctx context.Context, paidAt time.Time) error {
	p, rep := st.rows.Payment, st.rep
	// The update waits to go with the invoice's or the order's writes,
	// ahead of them, in one round trip: they need nothing of its answer
	// (the order's move, after it, no longer sees this payment pending).
	st.settled = store.MarkPaymentSucceededLater(ctx, st.tx, p.ID, store.PaymentSuccess{
		GatewayPaymentID: rep.GatewayPaymentID, GatewayTxID: rep.GatewayTxID, PaidAt: paidAt, At: st.now,
	})
	invoiceSettled, err := st.applyToInvoice(ctx, paidAt)
	if err != nil {
		return err
	}
	if err := st.applyToOrder(ctx, paidAt, invoiceSettled); err != nil {
		return err
	}

	paid, err := st.settled.Get(ctx)
	if err != nil {
		return store.BugIfNotFound(err, "settle payment") // locked and pending; the gateway id was checked free
	}
	action := ActionPaymentSuccess
	if st.src == fromConfirm {
		action = ActionPaymentConfirm
	}
	if err := audit.Write(ctx, st.tx, st.who, st.now, action, entityPayment, p.ID.String(), order.PaymentSnapshot(p), settledState{order.PaymentSnapshot(paid), st.src}); err != nil {
		return err
	}
	st.out.Payment, st.out.Applied, st.moved = paid, true, true
	return nil
}

// settleFailed is err of a write that went after the payment's update,
// unless the update failed itself: then that failure is the one to report.
func (st *settling) settleFailed(ctx context.Context, err error) error {
	if _, serr := st.settled.Get(ctx); serr != nil {
		return store.BugIfNotFound(serr, "settle payment") // locked and pending; the gateway id was checked free
	}
	return err
}

// applyToInvoice adds the payment to its invoice, if it has one, through
// order.InvoiceTransition: when that pays the invoice in full, the
// invoice's other pending payments fail. It reports whether the invoice is
// now paid.
func (st *settling) applyToInvoice(ctx context.Context, paidAt time.Time) (bool, error) {
	inv, p := st.rows.Invoice, st.rows.Payment
	if inv == nil {
		return false, nil
	}
	moved, err := order.InvoiceTransition(ctx, st.tx, *inv, order.InvoiceMove{
		By: st.who, At: st.now, BillingAt: st.s.billingNow(), Pay: p.Amount, PaidAt: paidAt,
		FailReason: "invoice paid by payment " + p.ID.String(),
	})
	if err != nil {
		return false, st.settleFailed(ctx, err) // checked payable under its lock
	}
	st.voidedWithInvoice = len(moved.FailedPayments)
	return order.InvoiceStatus(moved.Invoice.Status) == order.InvoicePaid, nil
}

// applyToOrder moves the payment's order pending → paid (through
// order.Transition, which fails its other pending payments and queues
// order_paid) when the payment pays it: directly, or by paying its invoice
// in full.
func (st *settling) applyToOrder(ctx context.Context, paidAt time.Time, invoiceSettled bool) error {
	ord, inv, p := st.rows.Order, st.rows.Invoice, st.rows.Payment
	if ord == nil || order.Status(ord.Status) != order.StatusPending || (inv != nil && !invoiceSettled) {
		return nil
	}
	paidMove, err := order.Transition(ctx, st.tx, *ord, order.Move{
		To: order.StatusPaid, By: st.who, At: st.now, PaidAt: paidAt,
		FailReason: "order paid by payment " + p.ID.String(),
		Paid: &order.OrderPaidPayload{
			OrderID: ord.ID, PaymentID: &p.ID, Amount: p.Amount, Currency: p.Currency, Method: order.MethodGateway,
		},
	})
	if err != nil {
		return st.settleFailed(ctx, err)
	}
	st.out.OrderPaid, st.voidedWithOrder = true, len(paidMove.FailedPayments)
	return nil
}

// result is settle's last step, after the commit: metrics, logs, and the
// answer (a recorded rejection is still an error to the caller).
func (st *settling) result(ctx context.Context, paymentID uuid.UUID) (Settlement, error) {
	s, out, src := st.s, st.out, st.src
	if st.moved {
		s.metrics.PaymentTransition(st.rep.Gateway, out.Payment.Status, out.Payment.Amount, out.Payment.Currency)
	}
	if out.Captured {
		s.metrics.MoneyCaptured(st.rep.Gateway, out.Payment.CapturedAmount, out.Payment.Currency)
		s.log.WarnContext(ctx, "money captured for a payment that cannot apply; to be returned", "payment_id", paymentID,
			"source", src, "amount", out.Payment.CapturedAmount.String(), "currency", out.Payment.Currency,
			"gateway_payment_id", out.Payment.GatewayPaymentID, "failure_reason", out.Payment.FailureReason)
	}
	if st.rejected != nil {
		return Settlement{Payment: out.Payment}, st.rejected
	}
	if out.Applied {
		s.log.InfoContext(ctx, "payment settled", "payment_id", paymentID, "status", out.Payment.Status,
			"source", src, "actor", st.who.Kind+":"+st.who.ID, "amount", out.Payment.Amount.String(), "currency", out.Payment.Currency,
			"gateway_payment_id", out.Payment.GatewayPaymentID, "order_paid", out.OrderPaid, "voided_payments", st.voidedWithInvoice+st.voidedWithOrder)
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
	order.PaymentState
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
// room for the amount, and its order (the payment's, or the invoice's) must
// not have ended (terminated, completed, cancelled, refunded: an ending
// cancels its renewal invoice, but a partly paid one stays open for an
// admin, and money arriving for it is captured, not applied); an order
// paid without an invoice must be pending.
func notPayable(rows store.SettlementRows, p store.Payment) string {
	ord, inv := rows.Order, rows.Invoice
	if inv != nil {
		if !order.CanTransitionInvoice(order.InvoiceStatus(inv.Status), order.InvoicePaid) {
			return fmt.Sprintf("invoice %s is %s", inv.ID, inv.Status)
		}
		if ord == nil {
			ord = rows.InvoiceOrder
		}
		if ord != nil && order.Status(ord.Status).IsFinal() {
			return fmt.Sprintf("order %s of invoice %s is %s", ord.ID, inv.ID, ord.Status)
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
