package payment

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/balance"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/text"
)

// refundCallTimeout bounds the gateway refund call, which runs detached
// from the caller: once a refund is reserved its outcome must be recorded
// even when the admin's request is gone. The plugin's own deadline
// (plugin.Limits.CallTimeout) is usually shorter.
const refundCallTimeout = 60 * time.Second

// RefundPayment refunds a payment in full (amount "") or in part (admin).
//
// A successful payment can be refunded, and so can a failed one whose
// money the gateway captured (it could no longer apply: the money is
// returned and the payment stays failed); refunded: "already fully
// refunded"; anything else InvalidArgument. The sum of its succeeded and
// pending refunds never exceeds its amount; an empty amount means all that
// is neither refunded nor being refunded. Each refund is its own row.
//
// destination says where the money goes: RefundToGateway (back through the
// payment's gateway) or RefundToBalance (credited to the customer's
// balance, in one transaction; the balance must be in the payment's
// currency); "" is the payment's own way (its gateway, or the balance for a
// balance payment). A balance payment cannot go back through a gateway.
//
// A gateway payment's refund takes three steps:
//
//  1. reserve: in a short transaction with the payment row locked, the
//     amount is checked against the refunds so far and a pending refund row
//     is inserted — so concurrent refunds are decided one at a time and can
//     never exceed the amount together;
//  2. the plugin's refund is called outside any transaction (and detached
//     from the caller's cancellation);
//  3. the outcome is written in a second transaction: succeeded →
//     refunded_amount grows, the payment becomes refunded when it reaches
//     the amount and the order refunded when it was paid or active; failed
//     → the refund row fails with the message, the payment is unchanged and
//     the answer is Internal ("gateway refund failed: …", the API
//     contract's code: docs/api.md, "Errors by operation");
//     accepted (the plugin answers pending: the gateway completes it later,
//     or an admin sends a bank transfer back by hand) → the refund stays
//     pending, reserving its amount, and the call succeeds with it;
//     unknown (the call broke off after the request may have been sent, or
//     a malformed answer) → the refund stays pending and reserved too, and
//     the answer is Internal ("gateway refund failed: the outcome is
//     unknown …"). A pending refund is never sent again automatically, since
//     a refund sent twice may be paid out twice: an admin records its
//     outcome with ResolveRefund. An open circuit breaker means nothing was
//     sent: the refund fails and the answer is Unavailable.
//
// A gateway payment whose interface does not take its currency (one made
// before currencies were checked) is FailedPrecondition, nothing reserved
// or sent: the gateway would pay the figure back in its own currency.
//
// A balance payment's refund is one transaction: the customer's balance is
// credited with a refund ledger row, no plugin involved.
//
// Every step writes audit_log rows with the admin as the actor.
func (s *Service) RefundPayment(ctx context.Context, paymentID uuid.UUID, amount, reason, destination string) (Refunded, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return Refunded{}, err
	}
	var requested *money.Amount
	if strings.TrimSpace(amount) != "" {
		a, err := money.ParsePositive(amount)
		if err != nil {
			return Refunded{}, apperr.New(apperr.InvalidArgument, "amount must be a positive amount with at most two decimals")
		}
		requested = &a
	}
	reason = text.Clip(strings.TrimSpace(reason), 500)
	pay, err := store.Q(s.db).GetPayment(ctx, paymentID)
	if err != nil {
		return Refunded{}, store.NotFound(err, "payment %s not found", paymentID)
	}
	if destination == store.RefundToBalance && pay.Method != methodBalance {
		// Money that came through a gateway, credited to the balance, is
		// money the customer can spend: for an API key that is admin's
		// (like AdjustBalance), not a refund "back where it came from",
		// which is all operate may do. Otherwise an operate key could
		// confirm a bank transfer that never happened and credit it.
		if err := auth.RequireScope(ctx, auth.ScopeAdmin, "refund a gateway payment to the customer's balance"); err != nil {
			return Refunded{}, err
		}
	}
	return s.refund(ctx, audit.Of(p), &p.ID, pay, requested, reason, destination)
}

// Refunded is what a refund call did: the payment afterwards and the
// refund row it made (succeeded, or pending when the gateway completes it
// later).
type Refunded struct {
	Payment store.Payment
	Refund  store.Refund
}

// RefundOrder gives back everything paid for an order — every successful
// payment of it, gateway or balance, in full — for the event worker's
// automatic refund of a cancelled order (fulfillment.Refunder). The system
// is the actor and requested_by is NULL. It is idempotent: what is already
// refunded is not refunded again, and a second call after a complete
// refund does nothing and returns nil. A pending refund (the gateway
// completes it later, or its outcome is unknown) is never sent again:
// while one of the order's refunds is pending the call answers
// FailedPrecondition, so the event is retried and, when nobody records the
// refund's outcome (ResolveRefund) in time, ends failed for an admin.
func (s *Service) RefundOrder(ctx context.Context, orderID uuid.UUID, reason string) error {
	success := string(StatusSuccess)
	pays, _, err := store.ListPayments(ctx, s.db, store.PaymentFilter{OrderID: &orderID, Status: &success}, 1000, 0)
	if err != nil {
		return err
	}
	who := audit.System("refund_order")
	reason = text.Clip(strings.TrimSpace(reason), 500)
	var pending []string
	for _, pay := range pays {
		_, err := s.refund(ctx, who, nil, pay, nil, reason, "")
		if err != nil && !errors.Is(err, errNothingLeft) && !errors.Is(err, errOutcomeUnknown) {
			return err
		}
		rs, err := store.Q(s.db).ListPaymentRefunds(ctx, pay.ID)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if r.Status == store.RefundPending {
				pending = append(pending, r.ID.String())
			}
		}
	}
	if len(pending) > 0 {
		return apperr.New(apperr.FailedPrecondition, "order %s: refunds %s are pending (the gateway has not completed them or their outcome is unknown): check the gateway and record each outcome with ResolveRefund",
			orderID, strings.Join(pending, ", "))
	}
	return nil
}

// refund refunds requested (nil: all that is left) of pay to destination
// ("": the payment's own way), as who, for RefundPayment and RefundOrder.
func (s *Service) refund(ctx context.Context, who audit.Actor, requestedBy *uuid.UUID, pay store.Payment, requested *money.Amount, reason, destination string) (Refunded, error) {
	paymentID := pay.ID
	switch destination {
	case "":
	case store.RefundToBalance:
		return s.refundToBalance(ctx, who, requestedBy, pay, requested, reason)
	case store.RefundToGateway:
		if pay.Method == methodBalance {
			return Refunded{}, apperr.New(apperr.InvalidArgument, "payment %s was paid from the balance: its refund goes back to the balance, not through a gateway", pay.ID)
		}
	default:
		return Refunded{}, apperr.New(apperr.InvalidArgument, "refund destination %q is neither %s nor %s", text.Clip(destination, 20), store.RefundToGateway, store.RefundToBalance)
	}
	if pay.Method == methodBalance {
		return s.refundToBalance(ctx, who, requestedBy, pay, requested, reason)
	}
	if err := refundableStatus(pay); err != nil {
		return Refunded{}, err
	}
	gw, err := s.gateway(ctx, *pay.GatewayInterfaceID)
	if err != nil {
		return Refunded{}, err
	}
	if !gw.Takes(pay.Currency) {
		// Only a payment made before currencies were checked (or through an
		// interface whose currencies an admin has since changed) gets here.
		// The gateway would pay the figure back in its own currency: refuse
		// before anything is reserved or sent.
		s.log.ErrorContext(ctx, "refund refused: the payment's gateway interface does not take its currency", "payment_id", pay.ID,
			"currency", pay.Currency, "gateway_interface_id", gw.InterfaceID, "takes", gw.takesText(), "actor", who.Kind+":"+who.ID)
		return Refunded{}, apperr.New(apperr.FailedPrecondition,
			"payment %s is in %s, but gateway interface %s (%s) takes %s: a refund through it would be paid out in another currency; "+
				"return the money outside the gateway (or, if the interface took %s when the payment was made, name it in the interface's currencies again)",
			pay.ID, pay.Currency, gw.InterfaceID, gw.DisplayName, gw.takesText(), pay.Currency)
	}

	var ref store.Refund
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		locked, err := store.Q(tx).GetPaymentForUpdate(ctx, paymentID)
		if err != nil {
			return store.BugIfNotFound(err, "lock payment")
		}
		reserved, err := store.Q(tx).ReservedRefundAmount(ctx, paymentID)
		if err != nil {
			return err
		}
		amt, err := decideRefund(locked, reserved, requested)
		if err != nil {
			return err
		}
		now := s.now()
		ref, err = store.InsertRefund(ctx, tx, store.NewRefund{
			PaymentID: paymentID, Amount: amt, Status: store.RefundPending, Destination: store.RefundToGateway,
			Reason: reason, RequestedBy: requestedBy, CreatedAt: now,
		})
		if err != nil {
			return err
		}
		pay = locked
		return audit.Write(ctx, tx, who, now, ActionRefundRequest, entityRefund, ref.ID.String(), nil, refundSnapshot(ref))
	})
	if err != nil {
		return Refunded{}, err
	}
	s.log.InfoContext(ctx, "refund reserved", "refund_id", ref.ID, "payment_id", paymentID, "amount", ref.Amount.String(), "actor", who.Kind+":"+who.ID)

	detached := context.WithoutCancel(ctx)
	cctx, cancel := context.WithTimeout(detached, refundCallTimeout)
	raw, callErr := rawCall(cctx, gw, "refund", refundInput{
		PaymentID: pay.ID.String(), RefundID: ref.ID.String(), GatewayPaymentID: pay.GatewayPaymentID,
		GatewayTxID: pay.GatewayTxID, Amount: ref.Amount, PaymentAmount: pay.Amount, Currency: pay.Currency, Reason: reason,
	})
	cancel()
	out := classifyRefund(gw, raw, callErr)

	rctx, cancel := context.WithTimeout(detached, recordTimeout)
	defer cancel()
	after, err := s.finishRefund(rctx, who, pay, ref, out)
	s.countRefund(gw.PluginName, pay, ref.Amount, out.status, after.Payment, err)
	if err != nil {
		s.log.ErrorContext(ctx, "refund outcome not recorded; the refund stays pending for an admin", "refund_id", ref.ID,
			"payment_id", paymentID, "outcome", out.status, "gateway_refund_id", out.gatewayRefundID, "message", out.message, "err", err)
		return Refunded{}, apperr.Wrap(apperr.Internal, err, "refund %s: the gateway's answer (%s) could not be recorded; the refund stays pending: check it, then record the outcome with ResolveRefund",
			ref.ID, out.status).Show()
	}
	level := slog.LevelInfo
	if out.status == refundUnknown {
		level = slog.LevelWarn
	}
	s.log.Log(ctx, level, "refund finished", "refund_id", ref.ID, "payment_id", paymentID, "outcome", out.status,
		"amount", ref.Amount.String(), "payment_status", after.Payment.Status, "refunded_amount", after.Payment.RefundedAmount.String(),
		"message", out.message)
	switch out.status {
	case store.RefundSucceeded, refundAccepted:
		return after, nil
	case refundUnknown:
		cause := errOutcomeUnknown
		if out.cause != nil {
			cause = fmt.Errorf("%w: %w", errOutcomeUnknown, out.cause)
		}
		return Refunded{}, apperr.Wrap(apperr.Internal, cause,
			"gateway refund failed: the outcome is unknown (%s); refund %s of %s %s stays pending and keeps its amount reserved: check it at the gateway, then record the outcome with ResolveRefund",
			text.Clip(out.message, 200), ref.ID, ref.Amount, pay.Currency).Show()
	default:
		return Refunded{}, out.answer
	}
}

// refundOutcome is what the gateway's refund call came to.
type refundOutcome struct {
	// status is store.RefundSucceeded, store.RefundFailed, refundAccepted
	// or refundUnknown.
	status          string
	gatewayRefundID string
	message         string
	// answer is the caller's error for a failed refund.
	answer error
	// cause is why the outcome is unknown (for the logs).
	cause error
}

// The outcomes of a refund call besides succeeded and failed; the refund
// row stays pending in both.
const (
	// refundAccepted: the plugin answered pending — the gateway completes
	// the refund later, or an admin sends it back by hand.
	refundAccepted = "accepted"
	// refundUnknown: the request may have reached the gateway, but no
	// answer says what it did.
	refundUnknown = "unknown"
)

// classifyRefund reads the plugin's answer. An error the plugin raised
// itself (script_error: the contract's "error() means failed") before any
// request could have reached the gateway, an open circuit (nothing sent)
// or an answer "failed" is a failure; "pending" means the gateway accepted
// the refund and completes it later; a call cut off by its deadline or a
// limit, an error() after a host HTTP error other than "could not
// connect", a malformed answer, "unknown" or any other status leaves the
// outcome unknown, because the request may have reached the gateway.
func classifyRefund(gw Gateway, raw string, err error) refundOutcome {
	unknown := func(msg string) refundOutcome {
		return refundOutcome{status: refundUnknown, message: text.Clip("outcome unknown: "+msg, 500), cause: err}
	}
	failed := func(msg string, answer error) refundOutcome {
		return refundOutcome{status: store.RefundFailed, message: text.Clip(msg, 500), answer: answer}
	}
	if err != nil {
		if host, ok := circuitOpen(err); ok {
			return failed("not sent: circuit open for "+host, apperr.Wrap(apperr.Unavailable, err, "gateway %s unavailable", host))
		}
		msg := pluginMessage(err)
		if pluginKind(err) == plugin.KindScriptError && !maybeSent(err) {
			return failed(msg, apperr.Wrap(apperr.Internal, err, "gateway refund failed: %s", msg).Show())
		}
		return unknown(fmt.Sprintf("%s: %s", pluginKind(err), msg))
	}
	var out refundOutput
	if derr := decodeAnswer(gw, "refund", raw, &out); derr != nil {
		return unknown("malformed answer from the plugin")
	}
	msg := text.Clip(out.Message, 300)
	switch out.Status {
	case refundSucceeded:
		return refundOutcome{status: store.RefundSucceeded, gatewayRefundID: text.Clip(out.GatewayRefundID, 200), message: msg}
	case refundFailed:
		if msg == "" {
			msg = "refused by the gateway"
		}
		return failed(msg, apperr.New(apperr.Internal, "gateway refund failed: %s", msg).Show())
	case refundPending:
		if msg == "" {
			msg = "accepted by the gateway, not completed yet"
		}
		return refundOutcome{status: refundAccepted, gatewayRefundID: text.Clip(out.GatewayRefundID, 200), message: msg}
	case refundUnknownAt:
		o := unknown(msg)
		o.gatewayRefundID = text.Clip(out.GatewayRefundID, 200)
		return o
	default:
		return unknown(fmt.Sprintf("status %q: %s", text.Clip(out.Status, 20), msg))
	}
}

// maybeSent reports whether a failed plugin call may have delivered an
// HTTP request: it carries a host HTTP error other than "could not
// connect" (a reset, a timeout, a cut-off answer). A script that raised
// error() after such an error cannot know whether the gateway acted.
func maybeSent(err error) bool {
	var ce *plugin.CallError
	if !errors.As(err, &ce) || ce.Err == nil {
		return false
	}
	var op *net.OpError
	if errors.As(ce.Err, &op) && op.Op == "dial" {
		return false
	}
	return true
}

// finishRefund records a refund's outcome (the second transaction), with
// the order (if any) and then the payment locked. ErrNotFound (wrapped as
// a bug) when the refund is no longer pending.
func (s *Service) finishRefund(ctx context.Context, who audit.Actor, pay store.Payment, ref store.Refund, out refundOutcome) (Refunded, error) {
	var result Refunded
	err := store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		var err error
		result, err = s.recordRefundOutcome(ctx, tx, who, pay, ref, out)
		return err
	})
	return result, err
}

// recordRefundOutcome writes a pending refund's outcome in tx: the order
// (if any) and the payment are locked first, then the refund moves (only
// while it is still pending: errRefundNotPending otherwise).
func (s *Service) recordRefundOutcome(ctx context.Context, tx pgx.Tx, who audit.Actor, pay store.Payment, ref store.Refund, out refundOutcome) (Refunded, error) {
	ord, locked, err := lockRefundRows(ctx, tx, pay)
	if err != nil {
		return Refunded{}, err
	}
	return s.recordLockedRefundOutcome(ctx, tx, who, ord, locked, ref, out)
}

// lockRefundRows locks a payment's order (if any), then the payment, as
// a refund's outcome is recorded: a refund moves only under its payment's
// lock.
func lockRefundRows(ctx context.Context, tx pgx.Tx, pay store.Payment) (*store.Order, store.Payment, error) {
	var ord *store.Order
	if pay.OrderID != nil {
		o, err := store.Q(tx).GetOrderForUpdate(ctx, *pay.OrderID)
		if err != nil {
			return nil, store.Payment{}, store.BugIfNotFound(err, "lock order of payment")
		}
		ord = &o
	}
	locked, err := store.Q(tx).GetPaymentForUpdate(ctx, pay.ID)
	if err != nil {
		return nil, store.Payment{}, store.BugIfNotFound(err, "lock payment")
	}
	return ord, locked, nil
}

// recordLockedRefundOutcome is recordRefundOutcome once the order (ord)
// and the payment (locked) are locked.
func (s *Service) recordLockedRefundOutcome(ctx context.Context, tx pgx.Tx, who audit.Actor, ord *store.Order, locked store.Payment, ref store.Refund, out refundOutcome) (Refunded, error) {
	var result Refunded
	err := func() error {
		now := s.now()
		result.Payment = locked
		switch out.status {
		case store.RefundSucceeded:
			done, err := store.Q(tx).FinishRefund(ctx, store.FinishRefundParams{
				ID:              ref.ID,
				Status:          store.RefundSucceeded,
				GatewayRefundID: out.gatewayRefundID,
				Error:           out.message,
				UpdatedAt:       now,
			})
			if err != nil {
				return notPending(err, ref.ID)
			}
			result.Refund = done
			if err := audit.Write(ctx, tx, who, now, ActionRefundSucceed, entityRefund, ref.ID.String(), refundSnapshot(ref), refundSnapshot(done)); err != nil {
				return err
			}
			result.Payment, err = s.addRefund(ctx, tx, who, now, ord, locked, ref)
			return err
		case store.RefundFailed:
			done, err := store.Q(tx).FinishRefund(ctx, store.FinishRefundParams{
				ID:              ref.ID,
				Status:          store.RefundFailed,
				GatewayRefundID: out.gatewayRefundID,
				Error:           out.message,
				UpdatedAt:       now,
			})
			if err != nil {
				return notPending(err, ref.ID)
			}
			result.Refund = done
			return audit.Write(ctx, tx, who, now, ActionRefundFail, entityRefund, ref.ID.String(), refundSnapshot(ref), refundSnapshot(done))
		default:
			noted, err := store.Q(tx).NoteRefund(ctx, store.NoteRefundParams{
				ID: ref.ID, GatewayRefundID: out.gatewayRefundID, Error: out.message, UpdatedAt: now,
			})
			if err != nil {
				return notPending(err, ref.ID)
			}
			result.Refund = noted
			action := ActionRefundUnknown
			if out.status == refundAccepted {
				action = ActionRefundAccepted
			}
			return audit.Write(ctx, tx, who, now, action, entityRefund, ref.ID.String(), refundSnapshot(ref), refundSnapshot(noted))
		}
	}()
	return result, err
}

// errOutcomeUnknown: a refund's request may have reached the gateway, but
// nothing says what the gateway did; the refund stays pending.
var errOutcomeUnknown = errors.New("refund outcome unknown")

// errRefundNotPending: the refund's outcome is already recorded.
var errRefundNotPending = errors.New("refund is not pending")

func notPending(err error, id uuid.UUID) error {
	if errors.Is(err, store.ErrNotFound) {
		return apperr.Wrap(apperr.FailedPrecondition, errRefundNotPending, "refund %s is no longer pending: its outcome is already recorded", id)
	}
	return err
}

// addRefund adds a succeeded refund to the locked payment and, once the
// payment is refunded in full, applies the one rule of what a refund does
// to its locked order, whichever way the money was paid (balance or
// gateway) and came back: a running recurring service ends now
// (terminated, reason refunded) when the payment bought its current period
// (order.RefundEndsService) and is left alone otherwise; an order paid for
// and not yet running, or a one-time order, is refunded (order_refunded
// ends the service). A partial refund leaves the order as it is.
func (s *Service) addRefund(ctx context.Context, tx pgx.Tx, who audit.Actor, now time.Time, ord *store.Order, pay store.Payment, ref store.Refund) (store.Payment, error) {
	after, err := store.Q(tx).AddRefundedAmount(ctx, store.AddRefundedAmountParams{
		ID: pay.ID, Amount: ref.Amount, UpdatedAt: now,
	})
	if err != nil {
		// Impossible while refunds are reserved under the payment lock.
		return store.Payment{}, store.BugIfNotFound(err, "add refund to payment")
	}
	if err := audit.Write(ctx, tx, who, now, ActionPaymentRefund, entityPayment, pay.ID.String(), order.PaymentSnapshot(pay), order.PaymentSnapshot(after)); err != nil {
		return store.Payment{}, err
	}
	if Status(after.Status) != StatusRefunded || ord == nil {
		return after, nil // a partial refund, or no order: the order stays
	}
	if order.BillingCycle(ord.BillingCycle).Recurring() && order.Status(ord.Status).Live() {
		// A running service: only the payment of its current period (or
		// one paid ahead), refunded in full, ends it, now, as EndService
		// with no credit does; an earlier period's payment leaves it alone
		// (docs/operations.md, "Refunds and periods").
		billingNow := s.billingNow()
		if billingNow.IsZero() {
			billingNow = now // no test clock: the billing clock is the real one
		}
		ends, err := order.RefundEndsService(ctx, tx, *ord, pay.ID, billingNow)
		if err != nil || !ends {
			return after, err
		}
		if _, err := order.EndNowInTx(ctx, tx, *ord, order.EndNowMove{
			By: who, At: now, Now: billingNow, Reason: order.EndReasonRefunded,
			Note: fmt.Sprintf("payment %s of the current period refunded in full (refund %s)", pay.ID, ref.ID),
		}); err != nil {
			return store.Payment{}, err
		}
		return after, nil
	}
	if order.CanTransition(order.Status(ord.Status), order.StatusRefunded) {
		// Paid for and not yet running (paid, provisioning), or a one-time
		// order: the money went back in full and the order is refunded
		// (order_refunded ends whatever was provisioned).
		if _, err := order.Transition(ctx, tx, *ord, order.Move{
			To: order.StatusRefunded, By: who, At: now,
			Refunded: &order.OrderRefundedPayload{PaymentID: pay.ID, RefundID: ref.ID},
		}); err != nil {
			return store.Payment{}, err
		}
	}
	return after, nil
}

// refundToBalance refunds a payment (a balance payment, or a gateway one
// whose money the admin credits to the balance instead) to the customer's
// balance in one transaction: customer, order, payment locked in that
// order; a succeeded refund row; the balance credited with a refund ledger
// row.
func (s *Service) refundToBalance(ctx context.Context, who audit.Actor, requestedBy *uuid.UUID, pay store.Payment, requested *money.Amount, reason string) (Refunded, error) {
	var out store.Payment
	var ref store.Refund
	var balanceAfter store.BalanceAccount
	err := store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		acct, err := store.LockBalanceAccount(ctx, tx, pay.CustomerID)
		if err != nil {
			return store.BugIfNotFound(err, "lock customer of payment")
		}
		var ord *store.Order
		if pay.OrderID != nil {
			o, err := store.Q(tx).GetOrderForUpdate(ctx, *pay.OrderID)
			if err != nil {
				return store.BugIfNotFound(err, "lock order of payment")
			}
			ord = &o
		}
		locked, err := store.Q(tx).GetPaymentForUpdate(ctx, pay.ID)
		if err != nil {
			return store.BugIfNotFound(err, "lock payment")
		}
		ref, out, balanceAfter, err = s.refundLockedToBalance(ctx, tx, who, requestedBy, acct, ord, locked, requested, reason,
			"refund of payment "+locked.ID.String())
		return err
	})
	if err != nil {
		return Refunded{}, err
	}
	s.countRefund(gatewayBalance, pay, ref.Amount, store.RefundSucceeded, out, nil)
	s.log.InfoContext(ctx, "payment refunded to the balance", "refund_id", ref.ID, "payment_id", pay.ID,
		"amount", ref.Amount.String(), "balance_after", balanceAfter.Balance.String(), "payment_status", out.Status, "actor", who.Kind+":"+who.ID)
	return Refunded{Payment: out, Refund: ref}, nil
}

// refundLockedToBalance is refundToBalance's work in tx, the customer
// (acct), the order (ord, nil when the payment has none or the caller
// ends the order itself) and the payment (locked) locked in that order: the
// amount decided against what is refunded or reserved, a succeeded refund
// row, the balance credited with a refund ledger row (description), the
// refunded amount added (addRefund).
func (s *Service) refundLockedToBalance(ctx context.Context, tx pgx.Tx, who audit.Actor, requestedBy *uuid.UUID, acct store.BalanceAccount,
	ord *store.Order, locked store.Payment, requested *money.Amount, reason, description string) (store.Refund, store.Payment, store.BalanceAccount, error) {
	reserved, err := store.Q(tx).ReservedRefundAmount(ctx, locked.ID)
	if err != nil {
		return store.Refund{}, store.Payment{}, store.BalanceAccount{}, err
	}
	amt, err := decideRefund(locked, reserved, requested)
	if err != nil {
		return store.Refund{}, store.Payment{}, store.BalanceAccount{}, err
	}
	if acct.Currency != locked.Currency {
		return store.Refund{}, store.Payment{}, store.BalanceAccount{}, apperr.New(apperr.InvalidArgument, "the customer's balance is in %s but payment %s is in %s", acct.Currency, locked.ID, locked.Currency)
	}
	now := s.now()
	ref, err := store.InsertRefund(ctx, tx, store.NewRefund{
		PaymentID: locked.ID, Amount: amt, Status: store.RefundSucceeded, Destination: store.RefundToBalance,
		Reason: reason, RequestedBy: requestedBy, CreatedAt: now,
	})
	if err != nil {
		return store.Refund{}, store.Payment{}, store.BalanceAccount{}, err
	}
	posting, err := balance.PostLocked(ctx, tx, acct, balance.Entry{
		CustomerID: acct.CustomerID, Kind: balance.Refund, Amount: amt, Currency: locked.Currency,
		PaymentID: &locked.ID, RefundID: &ref.ID, CreatedBy: requestedBy,
		Description: description, By: who, At: now,
	})
	if err != nil {
		return store.Refund{}, store.Payment{}, store.BalanceAccount{}, err
	}
	posted, err := posting.Done(ctx)
	if err != nil {
		return store.Refund{}, store.Payment{}, store.BalanceAccount{}, err
	}
	if err := audit.Write(ctx, tx, who, now, ActionRefundSucceed, entityRefund, ref.ID.String(), nil, refundSnapshot(ref)); err != nil {
		return store.Refund{}, store.Payment{}, store.BalanceAccount{}, err
	}
	out, err := s.addRefund(ctx, tx, who, now, ord, locked, ref)
	if err != nil {
		return store.Refund{}, store.Payment{}, store.BalanceAccount{}, err
	}
	return ref, out, posted.Account, nil
}

// RefundToBalanceInTx refunds amount of payment paymentID to the
// customer's balance inside the caller's transaction tx, through
// refundToBalance's steps: EndService's balance credit, the unused share
// of the period the payment paid, recorded against that payment so a later
// RefundPayment can only return the rest. The caller holds the customer's
// lock (acct, taken before the order, the lock order of every balance
// change) and the order's, and ends the order itself: a refund that
// empties the payment does not move the order to refunded. The payment is
// locked here; the amount is checked against what is left of it, as every
// refund is. who is the actor, requestedBy the admin (nil for a customer).
// It answers the refund and the customer afterwards, the acct of the next
// refund in the same transaction.
func (s *Service) RefundToBalanceInTx(ctx context.Context, tx pgx.Tx, acct store.BalanceAccount, who audit.Actor, requestedBy *uuid.UUID,
	paymentID uuid.UUID, amount money.Amount, reason, description string) (uuid.UUID, store.BalanceAccount, error) {
	locked, err := store.Q(tx).GetPaymentForUpdate(ctx, paymentID)
	if err != nil {
		return uuid.Nil, acct, store.NotFound(err, "payment %s not found", paymentID)
	}
	if locked.CustomerID != acct.CustomerID {
		return uuid.Nil, acct, apperr.New(apperr.Internal, "payment %s is not customer %s's", paymentID, acct.CustomerID)
	}
	ref, _, after, err := s.refundLockedToBalance(ctx, tx, who, requestedBy, acct, nil, locked, &amount, text.Clip(reason, 500), description)
	if err != nil {
		return uuid.Nil, acct, err
	}
	s.log.InfoContext(ctx, "payment refunded to the balance", "refund_id", ref.ID, "payment_id", paymentID,
		"amount", ref.Amount.String(), "actor", who.Kind+":"+who.ID)
	return ref.ID, after, nil
}

// countRefund feeds the metrics with a refund's outcome (succeeded, failed,
// accepted or unknown; an outcome that could not be recorded stays
// pending: unknown) and the payment's move to refunded.
func (s *Service) countRefund(gateway string, pay store.Payment, amount money.Amount, outcome string, after store.Payment, recordErr error) {
	if recordErr != nil {
		outcome = refundUnknown
	}
	s.metrics.RefundOutcome(gateway, outcome, amount, pay.Currency)
	if recordErr == nil && Status(after.Status) == StatusRefunded {
		s.metrics.PaymentTransition(gateway, after.Status, after.Amount, after.Currency)
	}
}

// errNothingLeft: every cent of the payment is refunded or reserved by a
// pending refund.
var errNothingLeft = errors.New("nothing left to refund")

// refundableStatus refuses a payment that is neither success nor failed
// with captured money.
func refundableStatus(p store.Payment) error {
	switch Status(p.Status) {
	case StatusSuccess:
		return nil
	case StatusRefunded:
		return apperr.New(apperr.InvalidArgument, "payment %s is already fully refunded", p.ID)
	case StatusFailed:
		if p.CapturedAmount.Sign() > 0 {
			return nil
		}
	}
	return apperr.New(apperr.InvalidArgument, "payment %s is %s; only a successful payment, or a failed one whose money the gateway captured, can be refunded",
		p.ID, p.Status)
}

// decideRefund is how much to refund of p now, given what is already
// refunded or reserved: requested, or all that is left when nil.
func decideRefund(p store.Payment, reserved money.Amount, requested *money.Amount) (money.Amount, error) {
	if err := refundableStatus(p); err != nil {
		return money.Amount{}, err
	}
	took := p.Amount
	if Status(p.Status) == StatusFailed {
		took = p.CapturedAmount
	}
	left, err := took.Sub(reserved)
	if err != nil {
		return money.Amount{}, err
	}
	if left.Sign() <= 0 {
		return money.Amount{}, apperr.Wrap(apperr.InvalidArgument, errNothingLeft, "nothing left to refund: %s of %s %s is refunded or being refunded",
			reserved, took, p.Currency)
	}
	if requested == nil {
		return left, nil
	}
	if requested.Cmp(left) > 0 {
		return money.Amount{}, apperr.New(apperr.InvalidArgument, "refund amount %s exceeds what is left to refund (%s of %s %s)",
			requested, left, took, p.Currency)
	}
	return *requested, nil
}

// RefundShare refunds amount of payment paymentID back the payment's own
// way (its gateway; the balance for a balance payment), as the admin in
// ctx, through the same steps as RefundPayment: EndService's gateway
// credit of the unused share of the period the payment paid. The amount
// is checked against what is left of the payment, under its lock, as
// every refund is.
func (s *Service) RefundShare(ctx context.Context, paymentID uuid.UUID, amount money.Amount, reason string) (uuid.UUID, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return uuid.Nil, err
	}
	pay, err := store.Q(s.db).GetPayment(ctx, paymentID)
	if err != nil {
		return uuid.Nil, store.NotFound(err, "payment %s not found", paymentID)
	}
	out, err := s.refund(ctx, audit.Of(p), &p.ID, pay, &amount, text.Clip(reason, 500), "")
	if err != nil {
		return uuid.Nil, err
	}
	return out.Refund.ID, nil
}
