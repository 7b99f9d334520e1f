package payment

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/paging"
	"github.com/rustbill/paymentd/internal/text"

	"github.com/rustbill/paymentd/internal/store"
)

// RefundQuery selects the refunds an admin lists (ListRefunds).
type RefundQuery struct {
	// PaymentID: only this payment's refunds; nil: every payment's.
	PaymentID *uuid.UUID
	// Status: only refunds in this status (store.RefundPending, …); nil:
	// any.
	Status *string
	// Paged: Page and Size apply (0: the defaults). A query without paging
	// gets page 1 of the default size, except with PaymentID, where it gets
	// every refund of the payment: what callers before paging asked for.
	Paged      bool
	Page, Size uint32
}

// ListRefunds returns refunds newest first (created_at DESC, id DESC),
// each with its payment's currency, and the page they make (admin). With a
// payment: NotFound when it does not exist, so an empty list always means
// "no refunds". Without one, a page of every payment's refunds, read
// through an index however many there are.
func (s *Service) ListRefunds(ctx context.Context, q RefundQuery) ([]store.ListedRefund, paging.Page, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return nil, paging.Page{}, err
	}
	if q.Status != nil {
		switch *q.Status {
		case store.RefundPending, store.RefundSucceeded, store.RefundFailed:
		default:
			return nil, paging.Page{}, apperr.New(apperr.InvalidArgument, "status must be pending, succeeded or failed, got %q", text.Clip(*q.Status, 20))
		}
	}
	var pg paging.Page
	if q.Paged || q.PaymentID == nil {
		var err error
		if pg, err = paging.Normalize(q.Page, q.Size); err != nil {
			return nil, paging.Page{}, err
		}
	}
	limit := store.PageOf(pg)
	if q.PaymentID == nil {
		rows, total, err := store.ListRefundsNewestFirst(ctx, s.db, q.Status, limit)
		if err == nil {
			err = store.NameRequesters(ctx, s.db, rows)
		}
		if err != nil {
			return nil, paging.Page{}, err
		}
		return rows, pg.WithTotal(total), nil
	}
	pay, err := s.Get(ctx, *q.PaymentID)
	if err != nil {
		return nil, paging.Page{}, err
	}
	var page *store.Page
	if q.Paged {
		page = &limit
	}
	rows, total, err := store.ListPaymentRefundsNewestFirst(ctx, s.db, pay.ID, q.Status, page)
	if err != nil {
		return nil, paging.Page{}, err
	}
	out := make([]store.ListedRefund, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.ListedRefund{Refund: r, Currency: pay.Currency})
	}
	if err := store.NameRequesters(ctx, s.db, out); err != nil {
		return nil, paging.Page{}, err
	}
	if !q.Paged {
		// One page holding them all.
		pg = paging.Page{Number: 1, Size: uint32(len(out))}
	}
	return out, pg.WithTotal(total), nil
}

// AuditTrail returns one page of the audit log, newest first (admin): the
// entries f selects. An entity without entries is an empty page, not
// NotFound: the log outlives nothing it names, and some entities (plugins)
// have no row.
func (s *Service) AuditTrail(ctx context.Context, f store.AuditFilter, page, size uint32) ([]store.AuditLogRow, paging.Page, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return nil, paging.Page{}, err
	}
	pg, err := paging.Normalize(page, size)
	if err != nil {
		return nil, paging.Page{}, err
	}
	rows, total, err := store.ListAuditEntries(ctx, s.db, f, store.PageOf(pg))
	if err != nil {
		return nil, paging.Page{}, err
	}
	return rows, pg.WithTotal(total), nil
}

// refundInFlight is how long after its reservation a refund without any
// recorded answer may still have its gateway call running (the call's and
// the recording's deadlines): ResolveRefund refuses it until then, so an
// admin's word can never cross the gateway's answer.
const refundInFlight = refundCallTimeout + recordTimeout

// ResolveRefund records what an admin found at the gateway for a pending
// refund (admin): succeeded adds it to the payment — refunded in full, the
// payment becomes refunded and its order refunded when paid or active —
// and failed releases its reserved amount, so it can be refunded again.
// NotFound when the refund does not exist; FailedPrecondition when its
// outcome is already recorded, or when its gateway call may still be
// running. The note (what was checked) is required and goes into the
// audit log.
func (s *Service) ResolveRefund(ctx context.Context, refundID uuid.UUID, outcome, gatewayRefundID, note string) (Refunded, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return Refunded{}, err
	}
	if outcome != store.RefundSucceeded && outcome != store.RefundFailed {
		return Refunded{}, apperr.New(apperr.InvalidArgument, "outcome must be succeeded or failed, got %q", text.Clip(outcome, 20))
	}
	note = text.Clip(strings.TrimSpace(note), 500)
	if note == "" {
		return Refunded{}, apperr.New(apperr.InvalidArgument, "note is required: say what was checked at the gateway")
	}
	ref, err := store.Q(s.db).GetRefund(ctx, refundID)
	if err != nil {
		return Refunded{}, store.NotFound(err, "refund %s not found", refundID)
	}
	if ref.Status != store.RefundPending {
		return Refunded{}, apperr.Wrap(apperr.FailedPrecondition, errRefundNotPending, "refund %s is already %s", ref.ID, ref.Status)
	}
	// Every recorded answer (accepted, unknown) leaves a message on the row;
	// a row without one was reserved and its call has not come back.
	answered := ref.Error != "" || ref.GatewayRefundID != ""
	if until := ref.CreatedAt.Add(refundInFlight); !answered && s.now().Before(until) {
		return Refunded{}, apperr.New(apperr.FailedPrecondition, "refund %s has no answer from the gateway yet and its call may still be running: resolve it after %s",
			ref.ID, until.UTC().Format(time.RFC3339))
	}
	pay, err := store.Q(s.db).GetPayment(ctx, ref.PaymentID)
	if err != nil {
		return Refunded{}, store.BugIfNotFound(err, "payment of refund")
	}
	out := refundOutcome{status: outcome, gatewayRefundID: ref.GatewayRefundID}
	if id := text.Clip(strings.TrimSpace(gatewayRefundID), 200); id != "" {
		out.gatewayRefundID = id
	}
	if outcome == store.RefundFailed {
		out.message = "failed at the gateway (checked by an admin)"
	}
	who := audit.Of(p)
	var res Refunded
	err = store.WithTx(ctx, s.db, func(tx pgx.Tx) error {
		var err error
		if res, err = s.recordRefundOutcome(ctx, tx, who, pay, ref, out); err != nil {
			return err
		}
		return audit.Write(ctx, tx, who, s.now(), ActionRefundResolve, entityRefund, ref.ID.String(), refundSnapshot(ref),
			resolvedState{refundSnapshot(res.Refund), note})
	})
	gateway := "unknown"
	if pay.GatewayInterfaceID != nil && s.gateways != nil {
		if gw, gerr := s.gateways.Get(ctx, *pay.GatewayInterfaceID); gerr == nil {
			gateway = gw.PluginName
		}
	}
	s.countRefund(gateway, pay, ref.Amount, outcome, res.Payment, err)
	if err != nil {
		return Refunded{}, err
	}
	s.log.InfoContext(ctx, "refund resolved by an admin", "refund_id", ref.ID, "payment_id", pay.ID, "outcome", outcome,
		"amount", ref.Amount.String(), "payment_status", res.Payment.Status, "refunded_amount", res.Payment.RefundedAmount.String(),
		"actor", who.Kind+":"+who.ID)
	return res, nil
}

// resolvedState is the audit "after" of ResolveRefund: the refund and what
// the admin checked.
type resolvedState struct {
	refundState
	Note string `json:"note"`
}
