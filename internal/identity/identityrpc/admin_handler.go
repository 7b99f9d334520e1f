package identityrpc

import (
	"context"

	"connectrpc.com/connect"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	"github.com/rustbill/paymentd/internal/identity"
	"github.com/rustbill/paymentd/internal/rpc"
)

// AdminHandler serves billing.identity.CustomerAdminService.
type AdminHandler struct {
	svc *identity.Service
}

var _ identitypbconnect.CustomerAdminServiceHandler = (*AdminHandler)(nil)

// NewAdminHandler returns the CustomerAdminService handler.
func NewAdminHandler(svc *identity.Service) *AdminHandler {
	return &AdminHandler{svc: svc}
}

// ListCustomers pages through customers.
func (h *AdminHandler) ListCustomers(ctx context.Context, req *connect.Request[identitypb.ListCustomersRequest]) (*connect.Response[identitypb.ListCustomersResponse], error) {
	cs, page, err := h.svc.ListCustomers(ctx, req.Msg.GetEmailContains(), req.Msg.GetPagination().GetPage(), req.Msg.GetPagination().GetPageSize())
	if err != nil {
		return nil, err
	}
	out := make([]*identitypb.Customer, len(cs))
	for i, c := range cs {
		out[i] = customerToProto(c)
	}
	return connect.NewResponse(&identitypb.ListCustomersResponse{Customers: out, Meta: rpc.IdentityPageMeta(page)}), nil
}

// GetCustomer reads one customer.
func (h *AdminHandler) GetCustomer(ctx context.Context, req *connect.Request[identitypb.GetCustomerRequest]) (*connect.Response[identitypb.GetCustomerResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetId(), "id")
	if err != nil {
		return nil, err
	}
	c, err := h.svc.GetCustomer(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&identitypb.GetCustomerResponse{Customer: customerToProto(c)}), nil
}

// SetCanCreateApiKeys allows or forbids a customer API keys.
func (h *AdminHandler) SetCanCreateApiKeys(ctx context.Context, req *connect.Request[identitypb.SetCanCreateApiKeysRequest]) (*connect.Response[identitypb.SetCanCreateApiKeysResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetCustomerId(), "customer_id")
	if err != nil {
		return nil, err
	}
	c, err := h.svc.SetCanCreateAPIKeys(ctx, id, req.Msg.GetAllowed())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&identitypb.SetCanCreateApiKeysResponse{Customer: customerToProto(c)}), nil
}

// AdjustBalance changes a customer's balance by a signed amount.
func (h *AdminHandler) AdjustBalance(ctx context.Context, req *connect.Request[identitypb.AdjustBalanceRequest]) (*connect.Response[identitypb.AdjustBalanceResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetCustomerId(), "customer_id")
	if err != nil {
		return nil, err
	}
	c, t, err := h.svc.AdjustBalance(ctx, id, req.Msg.GetAmount(), req.Msg.GetNote())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&identitypb.AdjustBalanceResponse{Customer: customerToProto(c), Transaction: balanceTransactionToProto(t)}), nil
}

// SetCreditLimit sets a customer's credit limit.
func (h *AdminHandler) SetCreditLimit(ctx context.Context, req *connect.Request[identitypb.SetCreditLimitRequest]) (*connect.Response[identitypb.SetCreditLimitResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetCustomerId(), "customer_id")
	if err != nil {
		return nil, err
	}
	c, err := h.svc.SetCreditLimit(ctx, id, req.Msg.GetCreditLimit())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&identitypb.SetCreditLimitResponse{Customer: customerToProto(c)}), nil
}

// DisableCustomer disables a customer account.
func (h *AdminHandler) DisableCustomer(ctx context.Context, req *connect.Request[identitypb.DisableCustomerRequest]) (*connect.Response[identitypb.DisableCustomerResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetCustomerId(), "customer_id")
	if err != nil {
		return nil, err
	}
	c, err := h.svc.DisableCustomer(ctx, id, req.Msg.GetReason())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&identitypb.DisableCustomerResponse{Customer: customerToProto(c)}), nil
}

// EnableCustomer enables a disabled customer account.
func (h *AdminHandler) EnableCustomer(ctx context.Context, req *connect.Request[identitypb.EnableCustomerRequest]) (*connect.Response[identitypb.EnableCustomerResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetCustomerId(), "customer_id")
	if err != nil {
		return nil, err
	}
	c, err := h.svc.EnableCustomer(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&identitypb.EnableCustomerResponse{Customer: customerToProto(c)}), nil
}

// SignOutEverywhere ends every access token of a customer, and their API
// keys when asked.
func (h *AdminHandler) SignOutEverywhere(ctx context.Context, req *connect.Request[identitypb.SignOutEverywhereRequest]) (*connect.Response[identitypb.SignOutEverywhereResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetCustomerId(), "customer_id")
	if err != nil {
		return nil, err
	}
	c, revoked, err := h.svc.SignOutEverywhere(ctx, id, req.Msg.GetRevokeApiKeys())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&identitypb.SignOutEverywhereResponse{Customer: customerToProto(c), ApiKeysRevoked: uint32(min(revoked, 1<<31))}), nil
}
