package payment

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/text"
)

// Audit actions and entity of disputes.
const (
	ActionDisputeRecord = "dispute.record"
	entityDispute       = "dispute"
)

// EventDisputeNotice is the admins' notice of a dispute's change.
const EventDisputeNotice = "dispute"

// The dispute statuses the service acts on; the others (Stripe's
// warning_needs_response, needs_response, under_review, ...) are open.
const (
	disputeWon  = "won"
	disputeLost = "lost"
	// disputeWarningClosed: Stripe's inquiry closed without a chargeback.
	disputeWarningClosed = "warning_closed"
)

// maxDueBy bounds an evidence deadline (year 9999) so it fits timestamptz.
const maxDueBy = 253402300799

func disputeFinal(status string) bool {
	return status == disputeWon || status == disputeLost || status == disputeWarningClosed
}

// disputeState is a dispute's audit snapshot.
type disputeState struct {
	ID               uuid.UUID    `json:"id"`
	PaymentID        uuid.UUID    `json:"payment_id"`
	GatewayDisputeID string       `json:"gateway_dispute_id"`
	Amount           money.Amount `json:"amount"`
	Currency         string       `json:"currency"`
	Reason           string       `json:"reason,omitempty"`
	Status           string       `json:"status"`
	EvidenceDueBy    *time.Time   `json:"evidence_due_by,omitempty"`
	RefundID         *uuid.UUID   `json:"refund_id,omitempty"`
}

func disputeSnapshot(d store.Dispute) disputeState {
	return disputeState{ID: d.ID, PaymentID: d.PaymentID, GatewayDisputeID: d.GatewayDisputeID, Amount: d.Amount, Currency: d.Currency,
		Reason: d.Reason, Status: d.Status, EvidenceDueBy: d.EvidenceDueBy, RefundID: d.RefundID}
}

// disputeCallback applies a gateway's notification about a dispute
// (chargeback) of a payment (parse_callback's status "dispute": Stripe's
// charge.dispute.created/updated/closed), with the gateway interface as
// the actor, exactly once per (dispute, status): the dispute row is read
// and moved under its payment's lock, and a report of the status already
// recorded is a Duplicate (acked again, nothing changed). A won or lost
// dispute never moves again.
//
//   - a new or still open dispute is recorded; the first one suspends the
//     order's running service with reason dispute when [disputes].suspend
//     is on (an order suspended for another reason stays as it is);
//   - won (or Stripe's warning_closed) resumes an order suspended for the
//     dispute once no other dispute of its payments is open; an admin's or
//     an overdue suspension stays;
//   - lost: the amount went back to the customer through the gateway, so
//     it is recorded as a succeeded gateway refund of the payment (the
//     refund rules, ledger.Verify and the trends count it): a payment lost
//     in full is refunded and its order ends as a full refund ends it
//     (order_refunded); in part, the order suspended for the dispute
//     resumes;
//   - every applied change queues a notice to the admins.
//
// A dispute of a payment the interface does not know, in another currency
// than the payment's, for more than the payment (or, when lost, more than
// is left to refund), or moved to another payment is recorded as an
// anomaly and changes nothing: NotFound for an unknown payment,
// InvalidArgument otherwise.
func (s *Service) disputeCallback(ctx context.Context, interfaceID uuid.UUID, gw Gateway, res parseCallbackOutput) (CallbackResult, error) {
	d := res.Dispute
	if d == nil || strings.TrimSpace(d.DisputeID) == "" || strings.TrimSpace(d.Status) == "" {
		return CallbackResult{}, apperr.New(apperr.Internal, "gateway plugin %s: parse_callback answered status dispute without the dispute", gw.PluginName)
	}
	disputeID := text.Clip(strings.TrimSpace(d.DisputeID), 200)
	status := text.Clip(strings.TrimSpace(d.Status), 40)
	amount, err := money.Parse(d.Amount)
	if err != nil || amount.Sign() <= 0 {
		return CallbackResult{}, apperr.New(apperr.InvalidArgument, "the gateway reports dispute %s of an unreadable amount %q", disputeID, text.Clip(d.Amount, 40))
	}
	currency := strings.ToUpper(strings.TrimSpace(d.Currency))
	var due *time.Time
	if d.EvidenceDueBy != "" {
		sec, err := strconv.ParseInt(d.EvidenceDueBy, 10, 64)
		if err != nil || sec <= 0 || sec > maxDueBy {
			return CallbackResult{}, apperr.New(apperr.InvalidArgument, "the gateway reports dispute %s with an unreadable evidence deadline %q", disputeID, text.Clip(d.EvidenceDueBy, 20))
		}
		t := time.Unix(sec, 0).UTC()
		due = &t
	}
	who := audit.Gateway(interfaceID)
	an := anomaly{Source: fromCallback, GatewayPaymentID: text.Clip(res.GatewayPaymentID, 200), GatewayTxID: text.Clip(res.GatewayTxID, 200),
		Amount: text.Clip(d.Amount, 40), Currency: text.Clip(d.Currency, 16), DisputeID: disputeID, DisputeStatus: status}

	pay, found, err := s.disputedPayment(ctx, interfaceID, res)
	if err != nil {
		return CallbackResult{}, err
	}
	if !found {
		an.Kind = "dispute_unknown_payment"
		an.Message = fmt.Sprintf("the gateway reports dispute %s (%s) of payment %q / %q, which gateway interface %s does not know",
			disputeID, status, text.Clip(res.PaymentID, 64), text.Clip(res.GatewayTxID, 80), interfaceID)
		if err := s.recordDisputeAnomaly(ctx, who, an); err != nil {
			return CallbackResult{}, err
		}
		return CallbackResult{}, apperr.New(apperr.NotFound, "%s", an.Message)
	}

	var (
		out      CallbackResult
		rejected error
		changed  *store.Dispute
		before   string
		orderTo  string
	)
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		out, rejected, changed, before, orderTo = CallbackResult{Ack: res.Ack}, nil, nil, "", "" // afresh on a retry
		ord, locked, err := lockRefundRows(ctx, tx, pay)
		if err != nil {
			return err
		}
		out.Payment = locked
		now := s.now()
		reject := func(kind, msg string) error {
			rejected = apperr.New(apperr.InvalidArgument, "%s", msg)
			an.Kind, an.Message = kind, msg
			return s.recordAnomaly(ctx, tx, who, now, locked, an)
		}
		if currency != locked.Currency {
			return reject("dispute_currency_mismatch", fmt.Sprintf("currency mismatch: the gateway reports dispute %s of payment %s as %s %s, but the payment is %s %s",
				disputeID, locked.ID, text.Clip(d.Amount, 40), text.Clip(d.Currency, 16), locked.Amount, locked.Currency))
		}
		if amount.Cmp(locked.Amount) > 0 {
			return reject("dispute_amount_exceeds_payment", fmt.Sprintf("the gateway reports dispute %s of %s %s, more than payment %s's %s",
				disputeID, amount, currency, locked.ID, locked.Amount))
		}
		cur, err := store.Q(tx).GetDisputeByGatewayID(ctx, store.GetDisputeByGatewayIDParams{GatewayInterfaceID: interfaceID, GatewayDisputeID: disputeID})
		exists := err == nil
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if exists {
			if cur.PaymentID != locked.ID {
				return reject("dispute_payment_mismatch", fmt.Sprintf("the gateway reports dispute %s for payment %s, but it was recorded for payment %s",
					disputeID, locked.ID, cur.PaymentID))
			}
			if cur.Status == status || disputeFinal(cur.Status) {
				// A replay, or a late report after the dispute closed.
				out.Duplicate = true
				return nil
			}
			before = cur.Status
		}
		var refundID *uuid.UUID
		if status == disputeLost {
			if err := refundableStatus(locked); err != nil {
				return reject("dispute_lost_not_refundable", fmt.Sprintf("the gateway reports dispute %s lost, but payment %s is %s: nothing is left to give back",
					disputeID, locked.ID, locked.Status))
			}
			reserved, err := store.Q(tx).ReservedRefundAmount(ctx, locked.ID)
			if err != nil {
				return err
			}
			if amount.Cmp(mustSub(locked.Amount, reserved)) > 0 {
				return reject("dispute_amount_exceeds_payment", fmt.Sprintf("the gateway reports dispute %s lost for %s %s, more than the %s %s of payment %s not yet refunded",
					disputeID, amount, currency, mustSub(locked.Amount, reserved), locked.Currency, locked.ID))
			}
			ref, err := store.InsertRefund(ctx, tx, store.NewRefund{
				PaymentID: locked.ID, Amount: amount, Status: store.RefundPending, Destination: store.RefundToGateway,
				Reason: text.Clip("dispute "+disputeID+" lost", 300), CreatedAt: now,
			})
			if err != nil {
				return err
			}
			if err := audit.Write(ctx, tx, who, now, ActionRefundRequest, entityRefund, ref.ID.String(), nil, refundSnapshot(ref)); err != nil {
				return err
			}
			done, err := s.recordLockedRefundOutcome(ctx, tx, who, ord, locked, ref, refundOutcome{
				status: store.RefundSucceeded, gatewayRefundID: disputeID, message: "the customer's bank took the money back: dispute lost",
			})
			if err != nil {
				return err
			}
			out.Payment, refundID = done.Payment, &ref.ID
			if ord != nil {
				// The order may have been refunded by the refund.
				if *ord, err = store.Q(tx).GetOrder(ctx, ord.ID); err != nil {
					return err
				}
			}
		}
		var row store.Dispute
		if exists {
			row, err = store.Q(tx).UpdateDispute(ctx, store.UpdateDisputeParams{
				ID: cur.ID, Status: status, Amount: amount, Reason: text.Clip(d.Reason, 100), EvidenceDueBy: due, RefundID: refundID, UpdatedAt: now,
			})
			if err != nil {
				return err
			}
			if err := audit.Write(ctx, tx, who, now, ActionDisputeRecord, entityDispute, row.ID.String(), disputeSnapshot(cur), disputeSnapshot(row)); err != nil {
				return err
			}
		} else {
			row, err = store.Q(tx).InsertDispute(ctx, store.InsertDisputeParams{
				PaymentID: locked.ID, GatewayInterfaceID: interfaceID, GatewayDisputeID: disputeID, Amount: amount, Currency: locked.Currency,
				Reason: text.Clip(d.Reason, 100), Status: status, EvidenceDueBy: due, CreatedAt: now,
			})
			if err != nil {
				return err
			}
			if refundID != nil {
				if row, err = store.Q(tx).UpdateDispute(ctx, store.UpdateDisputeParams{
					ID: row.ID, Status: status, Amount: amount, Reason: row.Reason, EvidenceDueBy: due, RefundID: refundID, UpdatedAt: now,
				}); err != nil {
					return err
				}
			}
			if err := audit.Write(ctx, tx, who, now, ActionDisputeRecord, entityDispute, row.ID.String(), nil, disputeSnapshot(row)); err != nil {
				return err
			}
		}
		changed, out.Applied = &row, true
		if ord != nil {
			if orderTo, err = s.disputeMovesOrder(ctx, tx, who, now, *ord, row, exists); err != nil {
				return err
			}
		}
		if s.admins != nil {
			data := map[string]string{
				"dispute_id": row.ID.String(), "gateway_dispute_id": row.GatewayDisputeID, "status": row.Status, "previous_status": before,
				"payment_id": locked.ID.String(), "customer_id": locked.CustomerID.String(),
				"amount": row.Amount.String(), "currency": row.Currency, "reason": row.Reason,
			}
			if locked.OrderID != nil {
				data["order_id"] = locked.OrderID.String()
			}
			if row.EvidenceDueBy != nil {
				data["evidence_due_by"] = row.EvidenceDueBy.UTC().Format(time.RFC3339)
			}
			if orderTo != "" {
				data["order_status"] = orderTo
			}
			return s.admins.NotifyAdmins(ctx, tx, EventDisputeNotice, data)
		}
		return nil
	})
	if err != nil {
		return CallbackResult{}, err
	}
	if rejected != nil {
		return CallbackResult{}, rejected
	}
	if changed != nil {
		s.log.WarnContext(ctx, "payment dispute recorded", "dispute_id", changed.ID, "gateway_dispute_id", changed.GatewayDisputeID,
			"payment_id", pay.ID, "status", changed.Status, "previous_status", before, "amount", changed.Amount.String(),
			"currency", changed.Currency, "order_status", orderTo)
		if changed.Status == disputeLost {
			s.countRefund(gw.PluginName, pay, changed.Amount, store.RefundSucceeded, out.Payment, nil)
		}
	}
	return out, nil
}

// disputeMovesOrder suspends, resumes or leaves the locked order o for
// dispute d's new status, and answers the status it moved to ("" if none).
// A lost dispute's refund has already ended an order paid back in full;
// a closed dispute resumes the order only when no other dispute of its
// payments is open.
func (s *Service) disputeMovesOrder(ctx context.Context, tx pgx.Tx, who audit.Actor, now time.Time, o store.Order, d store.Dispute, existed bool) (string, error) {
	st := order.Status(o.Status)
	switch {
	case !disputeFinal(d.Status):
		if !s.disputeSuspend || st != order.StatusActive || existed {
			return "", nil
		}
		_, err := order.Transition(ctx, tx, o, order.Move{To: order.StatusSuspended, By: who, At: now, SuspendReason: order.SuspendReasonDispute,
			Note: "dispute " + d.GatewayDisputeID + " opened"})
		return string(order.StatusSuspended), err
	default: // won, lost in part, closed without a chargeback
		if st != order.StatusSuspended || o.SuspendReason != order.SuspendReasonDispute {
			return "", nil
		}
		// Another dispute of the order's payments still open holds the
		// suspension until it closes too.
		open, err := store.Q(tx).OpenDisputesOfOrder(ctx, store.OpenDisputesOfOrderParams{OrderID: &o.ID, ExceptID: d.ID})
		if err != nil || open > 0 {
			return "", err
		}
		_, err = order.Transition(ctx, tx, o, order.Move{To: order.StatusActive, By: who, At: now,
			Note: "dispute " + d.GatewayDisputeID + " " + d.Status})
		return string(order.StatusActive), err
	}
}

// disputedPayment finds the payment a dispute report is about: the
// payment id it names, else the payment of the interface carrying its
// gateway transaction id (Stripe: the PaymentIntent). found is false when
// there is none (or the named one is another interface's).
func (s *Service) disputedPayment(ctx context.Context, interfaceID uuid.UUID, res parseCallbackOutput) (store.Payment, bool, error) {
	if id, err := uuid.Parse(res.PaymentID); err == nil {
		p, err := store.Q(s.db).GetPayment(ctx, id)
		if err == nil {
			return p, p.GatewayInterfaceID != nil && *p.GatewayInterfaceID == interfaceID, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return store.Payment{}, false, err
		}
	}
	tx := strings.TrimSpace(res.GatewayTxID)
	if tx == "" {
		return store.Payment{}, false, nil
	}
	ps, err := store.Q(s.db).FindGatewayPaymentByTxID(ctx, store.FindGatewayPaymentByTxIDParams{GatewayInterfaceID: &interfaceID, GatewayTxID: tx})
	if err != nil {
		return store.Payment{}, false, err
	}
	if len(ps) != 1 {
		return store.Payment{}, false, nil
	}
	return ps[0], true, nil
}

// recordDisputeAnomaly records an anomaly about a dispute whose payment is
// unknown, once per distinct report, on the dispute (entity dispute, the
// gateway's id), and logs it.
func (s *Service) recordDisputeAnomaly(ctx context.Context, who audit.Actor, an anomaly) error {
	sum := sha256.Sum256([]byte(an.Kind + "\x00" + an.GatewayPaymentID + "\x00" + an.GatewayTxID + "\x00" + an.Amount + "\x00" + an.Currency +
		"\x00dispute\x00" + an.DisputeID + "\x00" + an.DisputeStatus))
	an.Fingerprint = hex.EncodeToString(sum[:16])
	s.log.ErrorContext(ctx, "payment anomaly: recorded for an admin", "kind", an.Kind, "source", an.Source, "message", an.Message,
		"gateway_dispute_id", an.DisputeID, "amount", an.Amount)
	return store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		// One report at a time: two deliveries at once write one row.
		if err := store.Q(tx).LockDisputeReport(ctx, an.DisputeID); err != nil {
			return err
		}
		seen, err := store.Q(tx).DisputeAuditExists(ctx, store.DisputeAuditExistsParams{EntityID: an.DisputeID, Action: ActionPaymentAnomaly, Fingerprint: an.Fingerprint})
		if err != nil || seen {
			return err
		}
		return audit.Note(ctx, tx, who, s.now(), ActionPaymentAnomaly, entityDispute, an.DisputeID, nil, an)
	})
}

// DisputeQuery selects the disputes an admin lists (ListDisputes).
type DisputeQuery struct {
	// Status, when set, keeps the disputes in that gateway status.
	Status *string
	// Limit caps the answer (1 to 500; 0: 100).
	Limit uint32
}

// ListDisputes returns the disputes, the nearest evidence deadline first
// (those without one last), each with its payment's order, invoice and
// customer (admin): the console's disputes queue.
func (s *Service) ListDisputes(ctx context.Context, q DisputeQuery) ([]store.ListDisputesRow, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	limit := q.Limit
	if limit == 0 {
		limit = 100
	}
	if limit > 500 {
		return nil, apperr.New(apperr.InvalidArgument, "limit must be at most 500, got %d", limit)
	}
	if q.Status != nil && (strings.TrimSpace(*q.Status) == "" || len(*q.Status) > 40) {
		return nil, apperr.New(apperr.InvalidArgument, "status must be a gateway's dispute status, got %q", text.Clip(*q.Status, 40))
	}
	return store.Q(s.db).ListDisputes(ctx, store.ListDisputesParams{Status: q.Status, RowLimit: int32(limit)})
}
