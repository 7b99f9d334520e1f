package paymentrpc

import (
	"context"
	"strconv"

	"connectrpc.com/connect"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/rpc"
	"github.com/rustbill/paymentd/internal/store"
)

// AdminPolicy is who may call each PaymentAdminService procedure: the
// console's reads of refunds and the audit log are for admins alone.
var AdminPolicy = auth.Policy{
	paymentpbconnect.PaymentAdminServiceListRefundsProcedure:         auth.AdminOnly,
	paymentpbconnect.PaymentAdminServiceListDisputesProcedure:        auth.AdminOnly,
	paymentpbconnect.PaymentAdminServiceListAuditEntriesProcedure:    auth.AdminOnly,
	paymentpbconnect.PaymentAdminServiceGetPaymentStatsProcedure:     auth.AdminOnly,
	paymentpbconnect.PaymentAdminServiceGetPaymentTrendsProcedure:    auth.AdminOnly,
	paymentpbconnect.PaymentAdminServiceGetRecurringRevenueProcedure: auth.AdminOnly,
	paymentpbconnect.PaymentAdminServiceResolveRefundProcedure:       auth.AdminOnly,
}

// AdminHandler serves billing.PaymentAdminService: decode, call the
// domain, encode.
type AdminHandler struct {
	paymentpbconnect.UnimplementedPaymentAdminServiceHandler
	svc     *payment.Service
	billing BillingRules
}

// NewAdminHandler returns the PaymentAdminService handler over svc.
func NewAdminHandler(svc *payment.Service) *AdminHandler {
	return &AdminHandler{svc: svc}
}

var _ paymentpbconnect.PaymentAdminServiceHandler = (*AdminHandler)(nil)

// ListRefunds lists one payment's refunds, or a page of every payment's,
// newest first, in one status when asked.
func (h *AdminHandler) ListRefunds(ctx context.Context, req *connect.Request[paymentpb.ListRefundsRequest]) (*connect.Response[paymentpb.ListRefundsResponse], error) {
	m := req.Msg
	q := payment.RefundQuery{Status: m.Status}
	if m.GetPaymentId() != "" {
		id, err := rpc.ParseID(m.GetPaymentId(), "payment_id")
		if err != nil {
			return nil, err
		}
		q.PaymentID = &id
	}
	if pg := m.GetPagination(); pg != nil {
		q.Paged, q.Page, q.Size = true, pg.GetPage(), pg.GetPageSize()
	}
	rows, page, err := h.svc.ListRefunds(ctx, q)
	if err != nil {
		return nil, err
	}
	out := &paymentpb.ListRefundsResponse{
		Refunds: make([]*paymentpb.Refund, 0, len(rows)),
		Meta:    rpc.PageMeta(page),
	}
	for _, r := range rows {
		rec := refundRecord(r.Refund, r.Currency)
		rec.RequestedByName = r.RequestedByName
		out.Refunds = append(out.Refunds, rec)
	}
	return connect.NewResponse(out), nil
}

// ListDisputes lists the disputes, the nearest evidence deadline first.
func (h *AdminHandler) ListDisputes(ctx context.Context, req *connect.Request[paymentpb.ListDisputesRequest]) (*connect.Response[paymentpb.ListDisputesResponse], error) {
	rows, err := h.svc.ListDisputes(ctx, payment.DisputeQuery{Status: req.Msg.Status, Limit: req.Msg.GetLimit()})
	if err != nil {
		return nil, err
	}
	out := &paymentpb.ListDisputesResponse{Disputes: make([]*paymentpb.Dispute, 0, len(rows))}
	for _, d := range rows {
		rec := &paymentpb.Dispute{
			Id: d.ID.String(), PaymentId: d.PaymentID.String(), OrderId: rpc.IDString(d.OrderID), InvoiceId: rpc.IDString(d.InvoiceID),
			CustomerId: d.CustomerID.String(), GatewayInterfaceId: d.GatewayInterfaceID.String(), GatewayDisputeId: d.GatewayDisputeID,
			Amount: d.Amount.String(), Currency: d.Currency, Reason: d.Reason, Status: d.Status, RefundId: rpc.IDString(d.RefundID),
			CreatedAt: rpc.Time(d.CreatedAt), UpdatedAt: rpc.Time(d.UpdatedAt),
		}
		if d.EvidenceDueBy != nil {
			rec.EvidenceDueBy = rpc.Time(*d.EvidenceDueBy)
		}
		out.Disputes = append(out.Disputes, rec)
	}
	return connect.NewResponse(out), nil
}

// ListAuditEntries pages through the audit log, newest first, filtered
// by entity, actor and action.
func (h *AdminHandler) ListAuditEntries(ctx context.Context, req *connect.Request[paymentpb.ListAuditEntriesRequest]) (*connect.Response[paymentpb.ListAuditEntriesResponse], error) {
	m := req.Msg
	f := store.AuditFilter{
		EntityType: optional(m.GetEntityType()), EntityID: optional(m.GetEntityId()),
		ActorKind: optional(m.GetActorKind()), ActorID: optional(m.GetActorId()), Action: optional(m.GetAction()),
		ExcludedActions: m.GetExcludeActions(),
	}
	rows, page, err := h.svc.AuditTrail(ctx, f, m.GetPagination().GetPage(), m.GetPagination().GetPageSize())
	if err != nil {
		return nil, err
	}
	out := &paymentpb.ListAuditEntriesResponse{
		Entries: make([]*paymentpb.AuditEntry, 0, len(rows)),
		Meta:    rpc.PageMeta(page),
	}
	for _, e := range rows {
		out.Entries = append(out.Entries, auditRecord(e))
	}
	return connect.NewResponse(out), nil
}

// optional is a filter of a request: nil when the field is empty.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// ResolveRefund records an admin's finding for a pending refund.
func (h *AdminHandler) ResolveRefund(ctx context.Context, req *connect.Request[paymentpb.ResolveRefundRequest]) (*connect.Response[paymentpb.ResolveRefundResponse], error) {
	m := req.Msg
	id, err := rpc.ParseID(m.GetRefundId(), "refund_id")
	if err != nil {
		return nil, err
	}
	r, err := h.svc.ResolveRefund(ctx, id, m.GetOutcome(), m.GetGatewayRefundId(), m.GetNote())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&paymentpb.ResolveRefundResponse{Refund: refundRecord(r.Refund, r.Payment.Currency), Payment: rpc.PaymentRecord(r.Payment)}), nil
}

// refundRecord is the wire form of a refund of a payment in currency.
func refundRecord(r store.Refund, currency string) *paymentpb.Refund {
	return &paymentpb.Refund{
		Id:              r.ID.String(),
		PaymentId:       r.PaymentID.String(),
		Amount:          r.Amount.String(),
		Status:          r.Status,
		GatewayRefundId: r.GatewayRefundID,
		Reason:          r.Reason,
		Error:           store.RefundError(r.Status, r.Error),
		Message:         r.Error,
		RequestedBy:     rpc.IDString(r.RequestedBy),
		CreatedAt:       rpc.Time(r.CreatedAt),
		UpdatedAt:       rpc.Time(r.UpdatedAt),
		Currency:        currency,
		Destination:     r.Destination,
	}
}

// auditRecord is the wire form of an audit row. Before and After are the
// JSON the writers stored, already without secrets; request_id stays in the
// database (it leads to log lines, not to the console).
func auditRecord(e store.AuditLogRow) *paymentpb.AuditEntry {
	return &paymentpb.AuditEntry{
		Id:         strconv.FormatInt(e.ID, 10),
		ActorKind:  e.ActorKind,
		ActorId:    e.ActorID,
		Action:     e.Action,
		EntityType: e.EntityType,
		EntityId:   e.EntityID,
		Before:     string(e.Before),
		After:      string(e.After),
		CreatedAt:  rpc.Time(e.CreatedAt),
		ActorName:  e.ActorName,
	}
}
