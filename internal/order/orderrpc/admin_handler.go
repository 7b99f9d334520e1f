package orderrpc

import (
	"context"

	"connectrpc.com/connect"

	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	"github.com/rustbill/paymentd/internal/auth"
)

// AdminPolicy is who may call each OrderAdminService procedure: admins
// alone.
var AdminPolicy = auth.Policy{
	orderpbconnect.OrderAdminServiceGetRenewalOverviewProcedure: auth.AdminOnly,
}

// AdminHandler serves billing.order.OrderAdminService, the admin views of
// the order book. GetRenewalOverview was first served by OrderService,
// which customers call too; that procedure stays for the clients of the
// first release, and both answer from one function.
type AdminHandler struct {
	orderpbconnect.UnimplementedOrderAdminServiceHandler
	orders *Handler
}

// NewAdminHandler returns the OrderAdminService handler beside the
// OrderService handler h, with h's billing clock and renewal policy.
func NewAdminHandler(h *Handler) *AdminHandler {
	return &AdminHandler{orders: h}
}

var _ orderpbconnect.OrderAdminServiceHandler = (*AdminHandler)(nil)

// GetRenewalOverview implements OrderAdminService.GetRenewalOverview.
func (a *AdminHandler) GetRenewalOverview(ctx context.Context, req *connect.Request[orderpb.GetRenewalOverviewRequest]) (*connect.Response[orderpb.GetRenewalOverviewResponse], error) {
	out, err := a.orders.renewalOverview(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}
