package payment

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/text"
)

// refundCallback applies a gateway's notification about a refund the
// service asked for (parse_callback's status "refund": Stripe's
// refund.updated and refund.failed), as ResolveRefund applies an admin's
// word, with the gateway interface as the actor:
//
//   - succeeded, refund pending → succeeded: refunded_amount grows, the
//     payment becomes refunded at its full amount and its order refunded
//     (order_refunded ends the service), as a refund call's success does;
//   - failed, refund pending → failed with the gateway's message: its
//     reservation is released, so the amount is refundable again
//     (refund.fail audit row, counted as a failed refund, a warning);
//   - pending → nothing;
//   - the refund already in the reported status → Duplicate (acked again),
//     nothing changed; in the other final status → a contradiction,
//     recorded as a refund_status_mismatch anomaly, nothing changed,
//     InvalidArgument;
//   - a refund of another interface's payment, of a balance refund, of
//     another payment, amount, currency or gateway refund id than the one
//     recorded → recorded as an anomaly, InvalidArgument;
//   - an unknown refund is NotFound;
//   - a refund whose gateway call may still be running (reserved less
//     than refundInFlight ago, no answer recorded) is Unavailable: the
//     call records its own answer, and the gateway sends the notification
//     again later.
//
// Exactly once: the refund is read and moved under its payment's lock
// (FinishRefund moves only a pending refund), so two deliveries at once
// queue and the second is a duplicate.
func (s *Service) refundCallback(ctx context.Context, interfaceID uuid.UUID, gw Gateway, res parseCallbackOutput) (CallbackResult, error) {
	r := res.Refund
	if r == nil {
		return CallbackResult{}, apperr.New(apperr.Internal, "gateway plugin %s: parse_callback answered status refund without the refund", gw.PluginName)
	}
	switch r.Status {
	case refundSucceeded, refundFailed, refundPending:
	default:
		return CallbackResult{}, apperr.New(apperr.Internal, "gateway plugin %s: parse_callback answered unknown refund status %q", gw.PluginName, text.Clip(r.Status, 20))
	}
	refundID, err := uuid.Parse(r.RefundID)
	if err != nil {
		return CallbackResult{}, apperr.New(apperr.NotFound, "refund %q not found", text.Clip(r.RefundID, 64))
	}
	ref, err := store.Q(s.db).GetRefund(ctx, refundID)
	if err != nil {
		return CallbackResult{}, store.NotFound(err, "refund %s not found", refundID)
	}
	pay, err := store.Q(s.db).GetPayment(ctx, ref.PaymentID)
	if err != nil {
		return CallbackResult{}, store.BugIfNotFound(err, "payment of refund")
	}
	answered := ref.Error != "" || ref.GatewayRefundID != ""
	if until := ref.CreatedAt.Add(refundInFlight); ref.Status == store.RefundPending && !answered && s.now().Before(until) && r.Status != refundPending {
		return CallbackResult{}, apperr.New(apperr.Unavailable, "refund %s is still being sent to the gateway: its notification is taken after %s",
			ref.ID, until.UTC().Format(time.RFC3339))
	}

	who := audit.Gateway(interfaceID)
	var (
		out      CallbackResult
		rejected error
		moved    bool
	)
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		out, rejected, moved = CallbackResult{Ack: res.Ack}, nil, false // afresh on a retry
		ord, locked, err := lockRefundRows(ctx, tx, pay)
		if err != nil {
			return err
		}
		out.Payment = locked
		cur, err := store.Q(tx).GetRefund(ctx, refundID) // moves only under the payment's lock
		if err != nil {
			return store.BugIfNotFound(err, "refund")
		}
		now := s.now()
		reject := func(kind, msg string) error {
			rejected = apperr.New(apperr.InvalidArgument, "%s", msg)
			return s.recordAnomaly(ctx, tx, who, now, locked, anomaly{
				Kind: kind, Message: msg, Source: fromCallback, RefundID: cur.ID.String(), GatewayRefundID: text.Clip(r.GatewayRefundID, 200),
				RefundStatus: text.Clip(r.Status, 20), Amount: text.Clip(r.Amount, 40), Currency: text.Clip(r.Currency, 16),
			})
		}
		if kind, msg := refundReportMismatch(interfaceID, res.PaymentID, locked, cur, r); kind != "" {
			return reject(kind, msg)
		}
		switch {
		case r.Status == refundPending:
			return nil
		case cur.Status == store.RefundPending:
		case cur.Status == r.Status:
			out.Duplicate = true
			return nil
		default:
			return reject("refund_status_mismatch", fmt.Sprintf("the gateway reports refund %s of payment %s %s, but it is %s here",
				cur.ID, locked.ID, r.Status, cur.Status))
		}
		o := refundOutcome{status: r.Status, gatewayRefundID: cur.GatewayRefundID, message: text.Clip(strings.TrimSpace(r.Message), 300)}
		if id := text.Clip(r.GatewayRefundID, 200); id != "" {
			o.gatewayRefundID = id
		}
		if o.status == store.RefundFailed && o.message == "" {
			o.message = "the gateway reports the refund failed"
		}
		done, err := s.recordLockedRefundOutcome(ctx, tx, who, ord, locked, cur, o)
		if err != nil {
			return err
		}
		out.Payment, out.Applied, moved = done.Payment, true, true
		ref = done.Refund
		return nil
	})
	if err != nil {
		return CallbackResult{}, err
	}
	if rejected != nil {
		return CallbackResult{}, rejected
	}
	if moved {
		s.countRefund(gw.PluginName, pay, ref.Amount, r.Status, out.Payment, nil)
		if r.Status == store.RefundFailed {
			s.log.WarnContext(ctx, "refund failed at the gateway; its amount is refundable again", "refund_id", ref.ID, "payment_id", pay.ID,
				"amount", ref.Amount.String(), "currency", pay.Currency, "gateway_refund_id", ref.GatewayRefundID, "message", ref.Error)
		} else {
			s.log.InfoContext(ctx, "refund completed by the gateway's notification", "refund_id", ref.ID, "payment_id", pay.ID,
				"amount", ref.Amount.String(), "payment_status", out.Payment.Status, "refunded_amount", out.Payment.RefundedAmount.String())
		}
	}
	return out, nil
}

// refundReportMismatch says why a gateway's report cannot be about refund
// cur of payment pay ("" when it can): another interface's payment, a
// refund to the balance, another payment, amount, currency or gateway
// refund id. It returns the anomaly's kind and message.
func refundReportMismatch(interfaceID uuid.UUID, paymentID string, pay store.Payment, cur store.Refund, r *callbackRefund) (string, string) {
	if pay.GatewayInterfaceID == nil || *pay.GatewayInterfaceID != interfaceID || cur.Destination != store.RefundToGateway {
		return "interface_mismatch", fmt.Sprintf("refund %s of payment %s was not sent through gateway interface %s", cur.ID, pay.ID, interfaceID)
	}
	if paymentID != "" && paymentID != pay.ID.String() {
		return "refund_payment_mismatch", fmt.Sprintf("the gateway reports refund %s for payment %q, but it refunds payment %s",
			cur.ID, text.Clip(paymentID, 64), pay.ID)
	}
	if got := strings.ToUpper(strings.TrimSpace(r.Currency)); got != "" && got != pay.Currency {
		return "currency_mismatch", fmt.Sprintf("currency mismatch: the gateway reports refund %s as %s %s, but it is %s %s",
			cur.ID, text.Clip(r.Amount, 40), text.Clip(r.Currency, 16), cur.Amount, pay.Currency)
	}
	if r.Amount != "" {
		a, err := money.Parse(r.Amount)
		if err != nil || !a.Equal(cur.Amount) {
			return "amount_mismatch", fmt.Sprintf("amount mismatch: the gateway reports refund %s of %s, but it is %s %s",
				cur.ID, text.Clip(r.Amount, 40), cur.Amount, pay.Currency)
		}
	}
	if cur.GatewayRefundID != "" && r.GatewayRefundID != "" && cur.GatewayRefundID != r.GatewayRefundID {
		return "refund_id_mismatch", fmt.Sprintf("the gateway reports refund %s as %q, but it was recorded as %q",
			cur.ID, text.Clip(r.GatewayRefundID, 80), cur.GatewayRefundID)
	}
	return "", ""
}
