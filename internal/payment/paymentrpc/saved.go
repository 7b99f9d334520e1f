package paymentrpc

import (
	"context"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/rpc"
)

// savedMethod is the API's view of a saved method: brand, last four digits
// and expiry, never the gateway's references.
func savedMethod(m payment.SavedMethod) *paymentpb.SavedPaymentMethod {
	return &paymentpb.SavedPaymentMethod{
		Id:                 m.ID.String(),
		CustomerId:         m.CustomerID.String(),
		GatewayInterfaceId: m.GatewayInterfaceID.String(),
		Brand:              m.Brand,
		Last4:              m.Last4,
		ExpMonth:           m.ExpMonth,
		ExpYear:            m.ExpYear,
		CreatedAt:          rpc.Time(m.CreatedAt),
		RemovedAt:          rpc.TimePtr(m.RemovedAt),
	}
}

// ListSavedPaymentMethods lists a customer's saved methods (issue 39, 1).
func (h *Handler) ListSavedPaymentMethods(ctx context.Context, req *connect.Request[paymentpb.ListSavedPaymentMethodsRequest]) (*connect.Response[paymentpb.ListSavedPaymentMethodsResponse], error) {
	customer, err := rpc.IDOrNil(req.Msg.GetCustomerId(), "customer_id")
	if err != nil {
		return nil, err
	}
	id := uuid.Nil
	if customer != nil {
		id = *customer
	}
	rows, err := h.svc.ListSavedMethods(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &paymentpb.ListSavedPaymentMethodsResponse{SavedMethods: make([]*paymentpb.SavedPaymentMethod, 0, len(rows))}
	for _, m := range rows {
		out.SavedMethods = append(out.SavedMethods, savedMethod(m))
	}
	return connect.NewResponse(out), nil
}

// RemoveSavedPaymentMethod detaches a saved method at its gateway and
// removes it.
func (h *Handler) RemoveSavedPaymentMethod(ctx context.Context, req *connect.Request[paymentpb.RemoveSavedPaymentMethodRequest]) (*connect.Response[paymentpb.RemoveSavedPaymentMethodResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetId(), "id")
	if err != nil {
		return nil, err
	}
	m, err := h.svc.RemoveSavedMethod(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&paymentpb.RemoveSavedPaymentMethodResponse{SavedMethod: savedMethod(m)}), nil
}

// SetAutoCharge turns the charging of an order's renewals on or off.
func (h *Handler) SetAutoCharge(ctx context.Context, req *connect.Request[paymentpb.SetAutoChargeRequest]) (*connect.Response[paymentpb.SetAutoChargeResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetOrderId(), "order_id")
	if err != nil {
		return nil, err
	}
	on := req.Msg.GetAutoCharge()
	if err := h.svc.SetAutoCharge(ctx, id, on); err != nil {
		return nil, err
	}
	return connect.NewResponse(&paymentpb.SetAutoChargeResponse{OrderId: id.String(), AutoCharge: on}), nil
}

// GetAutoCharge reads whether an order's renewals charge the saved method.
func (h *Handler) GetAutoCharge(ctx context.Context, req *connect.Request[paymentpb.GetAutoChargeRequest]) (*connect.Response[paymentpb.GetAutoChargeResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetOrderId(), "order_id")
	if err != nil {
		return nil, err
	}
	on, err := h.svc.OrderAutoCharge(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&paymentpb.GetAutoChargeResponse{OrderId: id.String(), AutoCharge: on}), nil
}
