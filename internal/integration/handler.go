package integration

import (
	"context"

	"connectrpc.com/connect"

	integrationpb "github.com/rustbill/paymentd/gen/billing/integration"
	"github.com/rustbill/paymentd/gen/billing/integration/integrationpbconnect"
	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/outbound"
	"github.com/rustbill/paymentd/internal/rpc"
)

// Policy is who may call each IntegrationService procedure.
var Policy = auth.Policy{
	integrationpbconnect.IntegrationServiceListCircuitBreakersProcedure: auth.AdminOnly,
}

// Breakers reports the outbound client's breakers; *outbound.Client
// implements it.
type Breakers interface {
	Breakers() []outbound.BreakerStatus
}

// Handler serves billing.integration.IntegrationService.
type Handler struct {
	integrationpbconnect.UnimplementedIntegrationServiceHandler
	breakers Breakers
}

// NewHandler returns the IntegrationService handler over the process's
// outbound client.
func NewHandler(b Breakers) *Handler {
	return &Handler{breakers: b}
}

var _ integrationpbconnect.IntegrationServiceHandler = (*Handler)(nil)

// ListCircuitBreakers implements IntegrationService.ListCircuitBreakers.
func (h *Handler) ListCircuitBreakers(ctx context.Context, _ *connect.Request[integrationpb.ListCircuitBreakersRequest]) (*connect.Response[integrationpb.ListCircuitBreakersResponse], error) {
	p, err := auth.Require(ctx)
	if err != nil {
		return nil, err
	}
	if !p.IsAdmin() {
		return nil, apperr.New(apperr.PermissionDenied, "admin only")
	}
	list := h.breakers.Breakers()
	out := &integrationpb.ListCircuitBreakersResponse{CircuitBreakers: make([]*integrationpb.CircuitBreaker, 0, len(list))}
	for _, b := range list {
		out.CircuitBreakers = append(out.CircuitBreakers, &integrationpb.CircuitBreaker{
			Host:           b.Host,
			State:          b.State,
			RecentFailures: uint32(max(b.RecentFailures, 0)),
			OpenedAt:       rpc.Time(b.OpenedAt),
			NextProbe:      rpc.Time(b.NextProbe),
		})
	}
	return connect.NewResponse(out), nil
}
