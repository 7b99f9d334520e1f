package orderrpc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/order/orderrpc"
	"github.com/rustbill/paymentd/internal/rpctest"
)

func TestPolicyCoversEveryProcedureOfTheService(t *testing.T) {
	t.Parallel()
	methods := orderpb.File_billing_order_order_proto.Services().ByName("OrderService").Methods()
	require.Equal(t, methods.Len(), len(orderrpc.Policy))
	for i := range methods.Len() {
		proc := "/" + orderpbconnect.OrderServiceName + "/" + string(methods.Get(i).Name())
		_, ok := orderrpc.Policy[proc]
		require.True(t, ok, "%s has no access rule", proc)
	}
	require.Equal(t, auth.AdminOnly, orderrpc.Policy[orderpbconnect.OrderServiceCreateProductProcedure])
	require.Equal(t, auth.CustomerOnly, orderrpc.Policy[orderpbconnect.OrderServiceCreateOrderProcedure])
	require.Equal(t, auth.AdminOnly, orderrpc.Policy[orderpbconnect.OrderServiceCreateInvoiceProcedure])
	require.Equal(t, auth.AdminOnly, orderrpc.Policy[orderpbconnect.OrderServiceCancelInvoiceProcedure])

	admin := orderpb.File_billing_order_order_admin_proto.Services().ByName("OrderAdminService").Methods()
	require.Equal(t, admin.Len(), len(orderrpc.AdminPolicy))
	for i := range admin.Len() {
		proc := "/" + orderpbconnect.OrderAdminServiceName + "/" + string(admin.Get(i).Name())
		require.Equal(t, auth.AdminOnly, orderrpc.AdminPolicy[proc], "%s is for admins alone", proc)
	}
}

func TestWireRefusesCallersThePolicyDoesNotAllow(t *testing.T) {
	t.Parallel()
	w := setupWire(t)
	ctx := context.Background()
	product := &orderpb.CreateProductRequest{Name: "x", Price: "1.00", Currency: "CNY"}

	_, err := w.client.CreateProduct(ctx, rpctest.As("", product))
	rpctest.RequireCode(t, connect.CodeUnauthenticated, err)
	_, err = w.client.CreateProduct(ctx, rpctest.As(rpctest.Customer(w.Alice), product))
	rpctest.RequireCode(t, connect.CodePermissionDenied, err)
	_, err = w.client.CreateOrder(ctx, rpctest.As(w.admin(), &orderpb.CreateOrderRequest{ProductId: uuid.NewString()}))
	rpctest.RequireCode(t, connect.CodePermissionDenied, err, "orders are placed by customers")
	_, err = w.client.ListOrders(ctx, rpctest.As("", &orderpb.ListOrdersRequest{Pagination: &paymentpb.PageRequest{}}))
	rpctest.RequireCode(t, connect.CodeUnauthenticated, err)
	_, err = w.client.CancelInvoice(ctx, rpctest.As(rpctest.Customer(w.Alice), &orderpb.CancelInvoiceRequest{InvoiceId: uuid.NewString()}))
	rpctest.RequireCode(t, connect.CodePermissionDenied, err)
	_, err = w.client.CreateInvoice(ctx, rpctest.As(rpctest.Customer(w.Alice), &orderpb.CreateInvoiceRequest{}))
	rpctest.RequireCode(t, connect.CodePermissionDenied, err, "the policy answers before validation")
}

func TestWireValidatesRequestsNamingTheField(t *testing.T) {
	t.Parallel()
	w := setupWire(t)
	ctx := context.Background()
	admin, alice := w.admin(), rpctest.Customer(w.Alice)
	due := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	page := &paymentpb.PageRequest{}

	cases := []struct {
		name  string
		call  func() error
		field string
	}{
		{"BadUUID", func() error {
			_, err := w.client.GetOrder(ctx, rpctest.As(alice, &orderpb.GetOrderRequest{Id: "nope"}))
			return err
		}, "id"},
		{"ThreeDecimals", func() error {
			_, err := w.client.CreateProduct(ctx, rpctest.As(admin, &orderpb.CreateProductRequest{Name: "x", Price: "1.234", Currency: "CNY"}))
			return err
		}, "price"},
		{"LowercaseCurrency", func() error {
			_, err := w.client.CreateProduct(ctx, rpctest.As(admin, &orderpb.CreateProductRequest{Name: "x", Price: "1.00", Currency: "cny"}))
			return err
		}, "currency"},
		{"MissingName", func() error {
			_, err := w.client.CreateProduct(ctx, rpctest.As(admin, &orderpb.CreateProductRequest{Price: "1.00", Currency: "CNY"}))
			return err
		}, "name"},
		{"LongName", func() error {
			_, err := w.client.CreateProduct(ctx, rpctest.As(admin, &orderpb.CreateProductRequest{Name: strings.Repeat("x", 201), Price: "1.00", Currency: "CNY"}))
			return err
		}, "name"},
		{"PageTooLarge", func() error {
			_, err := w.client.ListOrders(ctx, rpctest.As(alice, &orderpb.ListOrdersRequest{Pagination: &paymentpb.PageRequest{PageSize: 101}}))
			return err
		}, "page_size"},
		{"MissingPagination", func() error {
			_, err := w.client.ListInvoices(ctx, rpctest.As(alice, &orderpb.ListInvoicesRequest{}))
			return err
		}, "pagination"},
		{"UnknownStatus", func() error {
			_, err := w.client.ListOrders(ctx, rpctest.As(alice, &orderpb.ListOrdersRequest{Pagination: page, Status: ptr("lost")}))
			return err
		}, "status"},
		{"InvoiceWithoutTarget", func() error {
			_, err := w.client.CreateInvoice(ctx, rpctest.As(admin, &orderpb.CreateInvoiceRequest{Amount: "1.00", DueAt: due}))
			return err
		}, "target"},
		{"InvoiceNegativeAmount", func() error {
			_, err := w.client.CreateInvoice(ctx, rpctest.As(admin, &orderpb.CreateInvoiceRequest{
				Target: &orderpb.CreateInvoiceRequest_CustomerId{CustomerId: w.Alice.String()}, Amount: "-1.00", DueAt: due}))
			return err
		}, "amount"},
		{"InvoiceDueAtNotATime", func() error {
			_, err := w.client.CreateInvoice(ctx, rpctest.As(admin, &orderpb.CreateInvoiceRequest{
				Target: &orderpb.CreateInvoiceRequest_CustomerId{CustomerId: w.Alice.String()}, Amount: "1.00", DueAt: "tomorrow"}))
			return err
		}, "due_at"},
		{"InvoiceDueAtImpossibleDate", func() error {
			// Passes the pattern; the handler's parse refuses it.
			_, err := w.client.CreateInvoice(ctx, rpctest.As(admin, &orderpb.CreateInvoiceRequest{
				Target: &orderpb.CreateInvoiceRequest_CustomerId{CustomerId: w.Alice.String()}, Amount: "1.00", DueAt: "2031-13-45T00:00:00Z"}))
			return err
		}, "due_at"},
		{"InvoiceZeroAmount", func() error {
			_, err := w.client.CreateInvoice(ctx, rpctest.As(admin, &orderpb.CreateInvoiceRequest{
				Target: &orderpb.CreateInvoiceRequest_CustomerId{CustomerId: w.Alice.String()}, Amount: "0.00", DueAt: due}))
			return err
		}, "amount"},
	}
	for _, tc := range cases {
		err := tc.call()
		rpctest.RequireCode(t, connect.CodeInvalidArgument, err, tc.name)
		require.Contains(t, err.Error(), tc.field, tc.name)
	}
}

func TestWireOrderLifeCycleWithBalancePayment(t *testing.T) {
	t.Parallel()
	w := setupWire(t)
	ctx := context.Background()
	admin, alice, bob := w.admin(), rpctest.Customer(w.Alice), rpctest.Customer(w.Bob)

	prod, err := w.client.CreateProduct(ctx, rpctest.As(admin, &orderpb.CreateProductRequest{
		Name: "VPS", Description: "2 vCPU", Price: "12.3", Currency: "CNY",
	}))
	require.NoError(t, err)
	require.Equal(t, "12.30", prod.Msg.GetProduct().GetPrice(), "always two decimals")
	require.True(t, prod.Msg.GetProduct().GetEnabled())

	list, err := w.client.ListProducts(ctx, rpctest.As(alice, &orderpb.ListProductsRequest{Pagination: &paymentpb.PageRequest{}}))
	require.NoError(t, err)
	require.Len(t, list.Msg.GetProducts(), 1)
	require.Equal(t, &paymentpb.PageMeta{Total: 1, Page: 1, PageSize: 20, TotalPages: 1}, list.Msg.GetMeta())

	created, err := w.client.CreateOrder(ctx, rpctest.As(alice, &orderpb.CreateOrderRequest{ProductId: prod.Msg.GetProduct().GetId()}))
	require.NoError(t, err)
	o := created.Msg.GetOrder()
	require.Equal(t, "pending", o.GetStatus())
	require.Equal(t, "12.30", o.GetTotalAmount())
	require.Equal(t, "CNY", o.GetCurrency())
	require.Equal(t, w.Alice.String(), o.GetCustomerId())
	require.Empty(t, o.GetPaidAt())
	_, err = time.Parse(time.RFC3339, o.GetCreatedAt())
	require.NoError(t, err)

	_, err = w.client.GetOrder(ctx, rpctest.As(bob, &orderpb.GetOrderRequest{Id: o.GetId()}))
	rpctest.RequireCode(t, connect.CodeNotFound, err)
	_, err = w.client.GetOrder(ctx, rpctest.As(alice, &orderpb.GetOrderRequest{Id: uuid.NewString()}))
	rpctest.RequireCode(t, connect.CodeNotFound, err)
	_, err = w.client.ListOrders(ctx, rpctest.As(alice, &orderpb.ListOrdersRequest{
		Pagination: &paymentpb.PageRequest{}, CustomerId: ptr(w.Bob.String()),
	}))
	rpctest.RequireCode(t, connect.CodePermissionDenied, err)

	_, err = w.client.PayWithBalance(ctx, rpctest.As(alice, &orderpb.PayWithBalanceRequest{OrderId: o.GetId()}))
	rpctest.RequireCode(t, connect.CodeInvalidArgument, err)
	require.Contains(t, err.Error(), "insufficient balance")

	w.SetAccount(t, w.Alice, "20.00", "0.00")
	_, err = w.client.PayWithBalance(ctx, rpctest.As(bob, &orderpb.PayWithBalanceRequest{OrderId: o.GetId()}))
	rpctest.RequireCode(t, connect.CodeNotFound, err)
	paid, err := w.grpc.PayWithBalance(ctx, rpctest.As(alice, &orderpb.PayWithBalanceRequest{OrderId: o.GetId()}))
	require.NoError(t, err, "over gRPC as well")
	require.Equal(t, "provisioning", paid.Msg.GetOrder().GetStatus())
	require.NotEmpty(t, paid.Msg.GetOrder().GetPaidAt())
	require.Equal(t, "7.70", paid.Msg.GetBalance())
	pay := paid.Msg.GetPayment()
	require.Equal(t, "success", pay.GetStatus())
	require.Equal(t, "12.30", pay.GetAmount())
	require.Equal(t, o.GetId(), pay.GetOrderId())
	require.Empty(t, pay.GetGatewayInterfaceId(), "a balance payment has no gateway interface")
	require.NotEmpty(t, pay.GetPaidAt())

	_, err = w.client.PayWithBalance(ctx, rpctest.As(alice, &orderpb.PayWithBalanceRequest{OrderId: o.GetId()}))
	rpctest.RequireCode(t, connect.CodeInvalidArgument, err)
	require.Contains(t, err.Error(), "already paid")
	_, err = w.client.CancelOrder(ctx, rpctest.As(alice, &orderpb.CancelOrderRequest{OrderId: o.GetId()}))
	rpctest.RequireCode(t, connect.CodeInvalidArgument, err)

	got, err := w.client.GetOrder(ctx, rpctest.As(admin, &orderpb.GetOrderRequest{Id: o.GetId()}))
	require.NoError(t, err)
	require.Equal(t, "provisioning", got.Msg.GetOrder().GetStatus())

	second, err := w.client.CreateOrder(ctx, rpctest.As(alice, &orderpb.CreateOrderRequest{ProductId: prod.Msg.GetProduct().GetId()}))
	require.NoError(t, err)
	cancelled, err := w.client.CancelOrder(ctx, rpctest.As(alice, &orderpb.CancelOrderRequest{OrderId: second.Msg.GetOrder().GetId()}))
	require.NoError(t, err)
	require.Equal(t, "cancelled", cancelled.Msg.GetOrder().GetStatus())
	require.Equal(t, "customer", cancelled.Msg.GetOrder().GetCancelReason())
	require.NotEmpty(t, cancelled.Msg.GetOrder().GetCancelledAt())

	orders, err := w.client.ListOrders(ctx, rpctest.As(alice, &orderpb.ListOrdersRequest{
		Pagination: &paymentpb.PageRequest{Page: 1, PageSize: 1}, Status: ptr("cancelled"),
	}))
	require.NoError(t, err)
	require.Len(t, orders.Msg.GetOrders(), 1)
	require.Equal(t, second.Msg.GetOrder().GetId(), orders.Msg.GetOrders()[0].GetId())
	require.Equal(t, uint64(1), orders.Msg.GetMeta().GetTotal())
}

func TestWireInvoices(t *testing.T) {
	t.Parallel()
	w := setupWire(t)
	ctx := context.Background()
	admin, alice, bob := w.admin(), rpctest.Customer(w.Alice), rpctest.Customer(w.Bob)
	o := w.OrderIn(t, w.AsAlice, "10.00", "USD")
	due := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)

	created, err := w.client.CreateInvoice(ctx, rpctest.As(admin, &orderpb.CreateInvoiceRequest{
		Target: &orderpb.CreateInvoiceRequest_OrderId{OrderId: o.ID.String()},
		Amount: "4.5", Description: "domain", DueAt: due.Format(time.RFC3339),
	}))
	require.NoError(t, err)
	inv := created.Msg.GetInvoice()
	require.Equal(t, "issued", inv.GetStatus())
	require.Equal(t, "4.50", inv.GetAmount())
	require.Equal(t, "0.00", inv.GetPaidAmount())
	require.Equal(t, "USD", inv.GetCurrency())
	require.Equal(t, w.Alice.String(), inv.GetCustomerId())
	require.Equal(t, o.ID.String(), inv.GetOrderId())
	require.Equal(t, due.Format(time.RFC3339), inv.GetDueAt())
	require.Empty(t, inv.GetPaidAt())
	require.NotEmpty(t, inv.GetNumber())
	wantLines := func(lines []*orderpb.InvoiceLine, msg string) {
		t.Helper()
		require.Len(t, lines, 1, msg)
		l := lines[0]
		require.Equal(t, []any{int32(1), "domain", int32(1), "4.50", "4.50", "", ""},
			[]any{l.GetPosition(), l.GetDescription(), l.GetQuantity(), l.GetUnitAmount(), l.GetAmount(), l.GetPeriodStart(), l.GetPeriodEnd()}, msg)
	}
	wantLines(inv.GetLines(), "CreateInvoice returns the line")

	_, err = w.client.CreateInvoice(ctx, rpctest.As(admin, &orderpb.CreateInvoiceRequest{
		Target: &orderpb.CreateInvoiceRequest_OrderId{OrderId: o.ID.String()},
		Amount: "4.50", Currency: "CNY", DueAt: due.Format(time.RFC3339),
	}))
	rpctest.RequireCode(t, connect.CodeInvalidArgument, err, "an order's invoice is in the order's currency")
	_, err = w.client.CreateInvoice(ctx, rpctest.As(admin, &orderpb.CreateInvoiceRequest{
		Target: &orderpb.CreateInvoiceRequest_CustomerId{CustomerId: uuid.NewString()},
		Amount: "4.50", DueAt: due.Format(time.RFC3339),
	}))
	rpctest.RequireCode(t, connect.CodeNotFound, err)

	got, err := w.client.GetInvoice(ctx, rpctest.As(alice, &orderpb.GetInvoiceRequest{Id: inv.GetId()}))
	require.NoError(t, err)
	require.Equal(t, inv.GetNumber(), got.Msg.GetInvoice().GetNumber())
	wantLines(got.Msg.GetInvoice().GetLines(), "GetInvoice returns the lines")
	_, err = w.client.GetInvoice(ctx, rpctest.As(bob, &orderpb.GetInvoiceRequest{Id: inv.GetId()}))
	rpctest.RequireCode(t, connect.CodeNotFound, err)

	list, err := w.client.ListInvoices(ctx, rpctest.As(bob, &orderpb.ListInvoicesRequest{Pagination: &paymentpb.PageRequest{}}))
	require.NoError(t, err)
	require.Empty(t, list.Msg.GetInvoices())
	list, err = w.client.ListInvoices(ctx, rpctest.As(alice, &orderpb.ListInvoicesRequest{
		Pagination: &paymentpb.PageRequest{}, OrderId: ptr(o.ID.String()), Status: ptr("issued"),
	}))
	require.NoError(t, err)
	require.Len(t, list.Msg.GetInvoices(), 1)
	wantLines(list.Msg.GetInvoices()[0].GetLines(), "ListInvoices returns the lines")

	cancelled, err := w.client.CancelInvoice(ctx, rpctest.As(admin, &orderpb.CancelInvoiceRequest{InvoiceId: inv.GetId()}))
	require.NoError(t, err)
	require.Equal(t, "cancelled", cancelled.Msg.GetInvoice().GetStatus())
	_, err = w.client.CancelInvoice(ctx, rpctest.As(admin, &orderpb.CancelInvoiceRequest{InvoiceId: inv.GetId()}))
	rpctest.RequireCode(t, connect.CodeInvalidArgument, err)
}

func TestWireInternalErrorsDoNotLeakDetails(t *testing.T) {
	t.Parallel()
	w := setupWire(t)
	w.SetAccount(t, w.Alice, "50.00", "0.00")
	o := w.Order(t, w.AsAlice, "10.00")
	w.FailEventInserts(t)
	_, err := w.client.PayWithBalance(context.Background(), rpctest.As(rpctest.Customer(w.Alice), &orderpb.PayWithBalanceRequest{OrderId: o.ID.String()}))
	rpctest.RequireCode(t, connect.CodeInternal, err)
	var ce *connect.Error
	require.True(t, errors.As(err, &ce))
	require.Equal(t, "internal error", ce.Message(), "no SQL or trigger text reaches the client")
}
