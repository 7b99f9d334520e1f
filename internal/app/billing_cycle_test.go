package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
)

// Billing cycles over the wire (issue 28, §1.1): a product's cycle, the
// cycle and renewal price an order is bought at, and the rule of
// docs/decisions.md ("billing cycles") that a product's new price reaches
// existing orders only with apply_to_existing_orders.
func TestProductBillingCycleOverTheWire(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	createProduct := func(req *orderpb.CreateProductRequest) (*orderpb.Product, error) {
		res, err := e.orders.CreateProduct(ctx, with(req, e.c.admin))
		if err != nil {
			return nil, err
		}
		return res.Msg.GetProduct(), nil
	}

	t.Run("ExistingProductsAreOneTime", func(t *testing.T) {
		o, err := e.orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: e.order(t)}, e.c.customer))
		require.NoError(t, err)
		require.Equal(t, "one_time", o.Msg.GetOrder().GetBillingCycle())
		require.Empty(t, o.Msg.GetOrder().GetRenewalPrice())
	})

	t.Run("UnknownCycleIsInvalidArgumentNamingTheField", func(t *testing.T) {
		_, err := createProduct(&orderpb.CreateProductRequest{Name: "VPS", Price: "9.00", Currency: "CNY", BillingCycle: "weekly"})
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
		require.ErrorContains(t, err, "billing_cycle")
		_, err = e.orders.UpdateProduct(ctx, with(&orderpb.UpdateProductRequest{Id: e.product, BillingCycle: "biennial"}, e.c.admin))
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
		require.ErrorContains(t, err, "billing_cycle")
	})

	t.Run("OrdersKeepTheirPriceUnlessTheAdminSaysSo", func(t *testing.T) {
		prod, err := createProduct(&orderpb.CreateProductRequest{Name: "VPS monthly", Price: "20.00", Currency: "CNY", BillingCycle: "monthly"})
		require.NoError(t, err)
		require.Equal(t, "monthly", prod.GetBillingCycle())
		listed, err := e.orders.ListProducts(ctx, with(&orderpb.ListProductsRequest{Pagination: &paymentpb.PageRequest{Page: 1, PageSize: 10}}, e.c.customer))
		require.NoError(t, err)
		require.Equal(t, "monthly", listed.Msg.GetProducts()[0].GetBillingCycle(), "newest first")

		placed, err := e.orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: prod.GetId()}, e.c.customer))
		require.NoError(t, err)
		id := placed.Msg.GetOrder().GetId()
		require.Equal(t, "monthly", placed.Msg.GetOrder().GetBillingCycle())
		require.Equal(t, "20.00", placed.Msg.GetOrder().GetRenewalPrice())
		renewal := func() *orderpb.Order {
			o, err := e.orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: id}, e.c.admin))
			require.NoError(t, err)
			return o.Msg.GetOrder()
		}

		price := "25.00"
		_, err = e.orders.UpdateProduct(ctx, with(&orderpb.UpdateProductRequest{Id: prod.GetId(), Price: &price}, e.c.admin))
		require.NoError(t, err)
		require.Equal(t, "20.00", renewal().GetRenewalPrice(), "without apply_to_existing_orders")

		res, err := e.orders.UpdateProduct(ctx, with(&orderpb.UpdateProductRequest{
			Id: prod.GetId(), BillingCycle: "quarterly", ApplyToExistingOrders: true,
		}, e.c.admin))
		require.NoError(t, err)
		require.Equal(t, "quarterly", res.Msg.GetProduct().GetBillingCycle())
		require.Equal(t, "25.00", res.Msg.GetProduct().GetPrice())
		got := renewal()
		require.Equal(t, "quarterly", got.GetBillingCycle())
		require.Equal(t, "25.00", got.GetRenewalPrice())
		require.Equal(t, "20.00", got.GetTotalAmount(), "what was bought stays")

		audit, err := paymentpbconnect.NewPaymentAdminServiceClient(http.DefaultClient, e.r.baseURL).ListAuditEntries(ctx, with(&paymentpb.ListAuditEntriesRequest{
			EntityType: "order", EntityId: id, Pagination: &paymentpb.PageRequest{Page: 1, PageSize: 10},
		}, e.c.admin))
		require.NoError(t, err)
		var changes []*paymentpb.AuditEntry
		for _, a := range audit.Msg.GetEntries() {
			if a.GetAction() == "order.billing_change" {
				changes = append(changes, a)
			}
		}
		require.Len(t, changes, 1)
		var before, after map[string]any
		require.NoError(t, json.Unmarshal([]byte(changes[0].GetBefore()), &before))
		require.NoError(t, json.Unmarshal([]byte(changes[0].GetAfter()), &after))
		require.Equal(t, []any{"monthly", "20.00"}, []any{before["billing_cycle"], before["renewal_price"]})
		require.Equal(t, []any{"quarterly", "25.00"}, []any{after["billing_cycle"], after["renewal_price"]})
	})
}
