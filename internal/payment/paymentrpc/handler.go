package paymentrpc

import (
	"context"
	"net"
	"net/http"

	"connectrpc.com/connect"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/rpc"
	"github.com/rustbill/paymentd/internal/store"
)

// Policy is who may call each PaymentService procedure (the API contract's
// permissions: docs/api.md, "Credential layers"). Customers are scoped to their
// own payments by the operations themselves.
var Policy = auth.Policy{
	paymentpbconnect.PaymentServiceCreatePaymentProcedure:            auth.Authenticated,
	paymentpbconnect.PaymentServiceListPaymentsProcedure:             auth.Authenticated,
	paymentpbconnect.PaymentServiceGetPaymentProcedure:               auth.Authenticated,
	paymentpbconnect.PaymentServiceQueryPaymentStatusProcedure:       auth.AdminOnly,
	paymentpbconnect.PaymentServiceHandleCallbackProcedure:           auth.Public,
	paymentpbconnect.PaymentServiceRefundPaymentProcedure:            auth.AdminOnly,
	paymentpbconnect.PaymentServiceListSavedPaymentMethodsProcedure:  auth.Authenticated,
	paymentpbconnect.PaymentServiceRemoveSavedPaymentMethodProcedure: auth.Authenticated,
	paymentpbconnect.PaymentServiceSetAutoChargeProcedure:            auth.Authenticated,
	paymentpbconnect.PaymentServiceGetAutoChargeProcedure:            auth.Authenticated,
}

// Handler serves billing.PaymentService: decode, call the domain,
// encode.
type Handler struct {
	paymentpbconnect.UnimplementedPaymentServiceHandler
	svc *payment.Service
}

// NewHandler returns the PaymentService handler over svc.
func NewHandler(svc *payment.Service) *Handler {
	return &Handler{svc: svc}
}

var _ paymentpbconnect.PaymentServiceHandler = (*Handler)(nil)

// GetPayment implements the contract's GetPayment (docs/api.md).
func (h *Handler) GetPayment(ctx context.Context, req *connect.Request[paymentpb.GetPaymentRequest]) (*connect.Response[paymentpb.GetPaymentResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetId(), "id")
	if err != nil {
		return nil, err
	}
	p, err := h.svc.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&paymentpb.GetPaymentResponse{Payment: rpc.PaymentRecord(p)}), nil
}

// ListPayments implements the contract's ListPayments (docs/api.md).
func (h *Handler) ListPayments(ctx context.Context, req *connect.Request[paymentpb.ListPaymentsRequest]) (*connect.Response[paymentpb.ListPaymentsResponse], error) {
	m := req.Msg
	var f store.PaymentFilter
	var err error
	if f.OrderID, err = rpc.OptionalID(m.OrderId, "order_id"); err != nil {
		return nil, err
	}
	if f.InvoiceID, err = rpc.OptionalID(m.InvoiceId, "invoice_id"); err != nil {
		return nil, err
	}
	if f.GatewayInterfaceID, err = rpc.OptionalID(m.GatewayInterfaceId, "gateway_interface_id"); err != nil {
		return nil, err
	}
	f.Status = m.Status
	f.ToReturn = m.GetToReturn()
	if m.Reference != nil {
		r, err := payment.ReferenceRange(m.GetReference())
		if err != nil {
			return nil, err
		}
		f.IDRange = &r
	}
	rows, page, err := h.svc.List(ctx, f, m.GetPagination().GetPage(), m.GetPagination().GetPageSize())
	if err != nil {
		return nil, err
	}
	out := &paymentpb.ListPaymentsResponse{
		Payments: make([]*paymentpb.PaymentRecord, 0, len(rows)),
		Meta:     rpc.PageMeta(page),
	}
	for _, p := range rows {
		out.Payments = append(out.Payments, rpc.PaymentRecord(p))
	}
	return connect.NewResponse(out), nil
}

// CreatePayment implements the contract's CreatePayment (docs/api.md). An empty
// order_id or invoice_id means "not given".
func (h *Handler) CreatePayment(ctx context.Context, req *connect.Request[paymentpb.CreatePaymentRequest]) (*connect.Response[paymentpb.CreatePaymentResponse], error) {
	m := req.Msg
	var in payment.NewPayment
	var err error
	if in.OrderID, err = rpc.IDOrNil(m.GetOrderId(), "order_id"); err != nil {
		return nil, err
	}
	if in.InvoiceID, err = rpc.IDOrNil(m.GetInvoiceId(), "invoice_id"); err != nil {
		return nil, err
	}
	if in.GatewayInterfaceID, err = rpc.ParseID(m.GetGatewayInterfaceId(), "gateway_interface_id"); err != nil {
		return nil, err
	}
	in.ReturnURL = m.GetReturnUrl()
	in.ClientIP = peerHost(req.Peer().Addr)
	p, err := h.svc.CreatePayment(ctx, in)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&paymentpb.CreatePaymentResponse{
		Payment: rpc.PaymentRecord(p), PaymentUrl: p.PaymentUrl, QrCode: p.QrCode, Instructions: p.Instructions,
	}), nil
}

// QueryPaymentStatus implements the contract's QueryPaymentStatus (docs/api.md).
func (h *Handler) QueryPaymentStatus(ctx context.Context, req *connect.Request[paymentpb.QueryPaymentStatusRequest]) (*connect.Response[paymentpb.QueryPaymentStatusResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetPaymentId(), "payment_id")
	if err != nil {
		return nil, err
	}
	p, err := h.svc.QueryPaymentStatus(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&paymentpb.QueryPaymentStatusResponse{Payment: rpc.PaymentRecord(p)}), nil
}

// HandleCallback implements the contract's HandleCallback (docs/api.md,
// "Callbacks"): the payload is the raw notification, handed to the plugin as a
// POST without a content type. A repeat of an applied callback is AlreadyExists.
func (h *Handler) HandleCallback(ctx context.Context, req *connect.Request[paymentpb.PaymentCallbackRequest]) (*connect.Response[paymentpb.PaymentCallbackResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetGatewayInterfaceId(), "gateway_interface_id")
	if err != nil {
		return nil, err
	}
	res, err := h.svc.HandleCallback(ctx, payment.Callback{GatewayInterfaceID: id, Method: http.MethodPost, Payload: req.Msg.GetPayload()})
	if err != nil {
		return nil, err
	}
	if res.Duplicate {
		return nil, errDuplicateCallback(res.Payment)
	}
	if res.Ignored {
		// A verified notification about no payment: nothing to show.
		return connect.NewResponse(&paymentpb.PaymentCallbackResponse{}), nil
	}
	return connect.NewResponse(&paymentpb.PaymentCallbackResponse{Payment: rpc.PaymentRecord(res.Payment)}), nil
}

// RefundPayment implements the contract's RefundPayment (docs/api.md); an empty
// amount refunds everything not yet refunded, an unset destination sends the
// money back the payment's own way.
func (h *Handler) RefundPayment(ctx context.Context, req *connect.Request[paymentpb.RefundPaymentRequest]) (*connect.Response[paymentpb.RefundPaymentResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetPaymentId(), "payment_id")
	if err != nil {
		return nil, err
	}
	r, err := h.svc.RefundPayment(ctx, id, req.Msg.GetAmount(), req.Msg.GetReason(), req.Msg.GetDestination())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&paymentpb.RefundPaymentResponse{Payment: rpc.PaymentRecord(r.Payment), Refund: refundRecord(r.Refund, r.Payment.Currency)}), nil
}

// peerHost is the host part of a peer address ("192.0.2.7:5123").
func peerHost(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// errDuplicateCallback is the gRPC answer to a repeated callback.
func errDuplicateCallback(p store.Payment) error {
	return apperr.New(apperr.AlreadyExists, "duplicate callback: payment %s is already %s", p.ID, p.Status)
}
