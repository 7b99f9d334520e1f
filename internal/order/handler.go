package order

import (
	"context"
	"time"

	"connectrpc.com/connect"

	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/paging"
	"github.com/rustbill/paymentd/internal/rpc"
	"github.com/rustbill/paymentd/internal/store"
)

// Policy is who may call each OrderService procedure. Authenticated
// operations scope customers to their own orders and invoices themselves.
var Policy = auth.Policy{
	orderpbconnect.OrderServiceCreateProductProcedure:  auth.AdminOnly,
	orderpbconnect.OrderServiceListProductsProcedure:   auth.Authenticated,
	orderpbconnect.OrderServiceUpdateProductProcedure:  auth.AdminOnly,
	orderpbconnect.OrderServiceCreateOrderProcedure:    auth.CustomerOnly,
	orderpbconnect.OrderServiceGetOrderProcedure:       auth.Authenticated,
	orderpbconnect.OrderServiceListOrdersProcedure:     auth.Authenticated,
	orderpbconnect.OrderServiceCancelOrderProcedure:    auth.Authenticated,
	orderpbconnect.OrderServicePayWithBalanceProcedure: auth.Authenticated,
	orderpbconnect.OrderServiceCreateInvoiceProcedure:  auth.AdminOnly,
	orderpbconnect.OrderServiceGetInvoiceProcedure:     auth.Authenticated,
	orderpbconnect.OrderServiceListInvoicesProcedure:   auth.Authenticated,
	orderpbconnect.OrderServiceCancelInvoiceProcedure:  auth.AdminOnly,
}

// Handler serves billing.order.OrderService: decode, call the domain, encode.
type Handler struct {
	orderpbconnect.UnimplementedOrderServiceHandler
	svc *Service
}

// NewHandler returns the OrderService handler over svc.
func NewHandler(svc *Service) *Handler {
	return &Handler{svc: svc}
}

var _ orderpbconnect.OrderServiceHandler = (*Handler)(nil)

// CreateProduct implements OrderService.CreateProduct.
func (h *Handler) CreateProduct(ctx context.Context, req *connect.Request[orderpb.CreateProductRequest]) (*connect.Response[orderpb.CreateProductResponse], error) {
	m := req.Msg
	price, err := money.ParseNonNegative(m.GetPrice())
	if err != nil {
		return nil, apperr.New(apperr.InvalidArgument, "price must be a non-negative amount with at most two decimals")
	}
	p, err := h.svc.CreateProduct(ctx, NewProduct{
		Name: m.GetName(), Description: m.GetDescription(), Price: price,
		Currency: m.GetCurrency(), ProviderPlugin: m.ProviderPlugin,
		ProviderConfig: m.GetProviderConfig().AsMap(),
	})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&orderpb.CreateProductResponse{Product: ProductRecord(p)}), nil
}

// UpdateProduct implements OrderService.UpdateProduct.
func (h *Handler) UpdateProduct(ctx context.Context, req *connect.Request[orderpb.UpdateProductRequest]) (*connect.Response[orderpb.UpdateProductResponse], error) {
	m := req.Msg
	id, err := rpc.ParseID(m.GetId(), "id")
	if err != nil {
		return nil, err
	}
	u := ProductUpdate{Name: m.Name, Description: m.Description, Enabled: m.Enabled}
	if m.Price != nil {
		price, err := money.ParseNonNegative(m.GetPrice())
		if err != nil {
			return nil, apperr.New(apperr.InvalidArgument, "price must be a non-negative amount with at most two decimals")
		}
		u.Price = &price
	}
	if m.ProviderConfig != nil {
		u.ProviderConfig = m.GetProviderConfig().AsMap()
	}
	p, err := h.svc.UpdateProduct(ctx, id, u)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&orderpb.UpdateProductResponse{Product: ProductRecord(p)}), nil
}

// ListProducts implements OrderService.ListProducts.
func (h *Handler) ListProducts(ctx context.Context, req *connect.Request[orderpb.ListProductsRequest]) (*connect.Response[orderpb.ListProductsResponse], error) {
	m := req.Msg
	rows, page, err := h.svc.ListProducts(ctx, m.Enabled, m.GetPagination().GetPage(), m.GetPagination().GetPageSize())
	if err != nil {
		return nil, err
	}
	out := &orderpb.ListProductsResponse{Products: make([]*orderpb.Product, 0, len(rows)), Meta: pageMeta(page)}
	for _, p := range rows {
		out.Products = append(out.Products, ProductRecord(p))
	}
	return connect.NewResponse(out), nil
}

// CreateOrder implements OrderService.CreateOrder.
func (h *Handler) CreateOrder(ctx context.Context, req *connect.Request[orderpb.CreateOrderRequest]) (*connect.Response[orderpb.CreateOrderResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetProductId(), "product_id")
	if err != nil {
		return nil, err
	}
	o, err := h.svc.CreateOrder(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&orderpb.CreateOrderResponse{Order: OrderRecord(o)}), nil
}

// GetOrder implements OrderService.GetOrder.
func (h *Handler) GetOrder(ctx context.Context, req *connect.Request[orderpb.GetOrderRequest]) (*connect.Response[orderpb.GetOrderResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetId(), "id")
	if err != nil {
		return nil, err
	}
	o, err := h.svc.GetOrder(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&orderpb.GetOrderResponse{Order: OrderRecord(o)}), nil
}

// ListOrders implements OrderService.ListOrders.
func (h *Handler) ListOrders(ctx context.Context, req *connect.Request[orderpb.ListOrdersRequest]) (*connect.Response[orderpb.ListOrdersResponse], error) {
	m := req.Msg
	var f store.OrderFilter
	var err error
	if f.CustomerID, err = rpc.OptionalID(m.CustomerId, "customer_id"); err != nil {
		return nil, err
	}
	f.Status = m.Status
	rows, page, err := h.svc.ListOrders(ctx, f, m.GetPagination().GetPage(), m.GetPagination().GetPageSize())
	if err != nil {
		return nil, err
	}
	out := &orderpb.ListOrdersResponse{Orders: make([]*orderpb.Order, 0, len(rows)), Meta: pageMeta(page)}
	for _, o := range rows {
		out.Orders = append(out.Orders, OrderRecord(o))
	}
	return connect.NewResponse(out), nil
}

// CancelOrder implements OrderService.CancelOrder.
func (h *Handler) CancelOrder(ctx context.Context, req *connect.Request[orderpb.CancelOrderRequest]) (*connect.Response[orderpb.CancelOrderResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetOrderId(), "order_id")
	if err != nil {
		return nil, err
	}
	o, err := h.svc.CancelOrder(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&orderpb.CancelOrderResponse{Order: OrderRecord(o)}), nil
}

// PayWithBalance implements OrderService.PayWithBalance.
func (h *Handler) PayWithBalance(ctx context.Context, req *connect.Request[orderpb.PayWithBalanceRequest]) (*connect.Response[orderpb.PayWithBalanceResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetOrderId(), "order_id")
	if err != nil {
		return nil, err
	}
	res, err := h.svc.PayWithBalance(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &orderpb.PayWithBalanceResponse{Order: OrderRecord(res.Order), Balance: res.Balance.String()}
	if res.Payment != nil {
		out.Payment = rpc.PaymentRecord(*res.Payment)
	}
	return connect.NewResponse(out), nil
}

// CreateInvoice implements OrderService.CreateInvoice.
func (h *Handler) CreateInvoice(ctx context.Context, req *connect.Request[orderpb.CreateInvoiceRequest]) (*connect.Response[orderpb.CreateInvoiceResponse], error) {
	m := req.Msg
	in := NewInvoice{Currency: m.GetCurrency(), Description: m.GetDescription()}
	var err error
	switch t := m.GetTarget().(type) {
	case *orderpb.CreateInvoiceRequest_OrderId:
		id, perr := rpc.ParseID(t.OrderId, "order_id")
		in.OrderID, err = &id, perr
	case *orderpb.CreateInvoiceRequest_CustomerId:
		id, perr := rpc.ParseID(t.CustomerId, "customer_id")
		in.CustomerID, err = &id, perr
	default:
		err = apperr.New(apperr.InvalidArgument, "order_id or customer_id is required")
	}
	if err != nil {
		return nil, err
	}
	if in.Amount, err = money.ParsePositive(m.GetAmount()); err != nil {
		return nil, apperr.New(apperr.InvalidArgument, "amount must be greater than 0 with at most two decimals")
	}
	if in.DueAt, err = time.Parse(time.RFC3339Nano, m.GetDueAt()); err != nil {
		return nil, apperr.New(apperr.InvalidArgument, "due_at must be an RFC 3339 time")
	}
	inv, err := h.svc.CreateInvoice(ctx, in)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&orderpb.CreateInvoiceResponse{Invoice: InvoiceRecord(inv)}), nil
}

// GetInvoice implements OrderService.GetInvoice.
func (h *Handler) GetInvoice(ctx context.Context, req *connect.Request[orderpb.GetInvoiceRequest]) (*connect.Response[orderpb.GetInvoiceResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetId(), "id")
	if err != nil {
		return nil, err
	}
	inv, err := h.svc.GetInvoice(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&orderpb.GetInvoiceResponse{Invoice: InvoiceRecord(inv)}), nil
}

// ListInvoices implements OrderService.ListInvoices.
func (h *Handler) ListInvoices(ctx context.Context, req *connect.Request[orderpb.ListInvoicesRequest]) (*connect.Response[orderpb.ListInvoicesResponse], error) {
	m := req.Msg
	var f store.InvoiceFilter
	var err error
	if f.CustomerID, err = rpc.OptionalID(m.CustomerId, "customer_id"); err != nil {
		return nil, err
	}
	if f.OrderID, err = rpc.OptionalID(m.OrderId, "order_id"); err != nil {
		return nil, err
	}
	f.Status = m.Status
	rows, page, err := h.svc.ListInvoices(ctx, f, m.GetPagination().GetPage(), m.GetPagination().GetPageSize())
	if err != nil {
		return nil, err
	}
	out := &orderpb.ListInvoicesResponse{Invoices: make([]*orderpb.Invoice, 0, len(rows)), Meta: pageMeta(page)}
	for _, inv := range rows {
		out.Invoices = append(out.Invoices, InvoiceRecord(inv))
	}
	return connect.NewResponse(out), nil
}

// CancelInvoice implements OrderService.CancelInvoice.
func (h *Handler) CancelInvoice(ctx context.Context, req *connect.Request[orderpb.CancelInvoiceRequest]) (*connect.Response[orderpb.CancelInvoiceResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetInvoiceId(), "invoice_id")
	if err != nil {
		return nil, err
	}
	inv, err := h.svc.CancelInvoice(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&orderpb.CancelInvoiceResponse{Invoice: InvoiceRecord(inv)}), nil
}

// ProductRecord is the wire form of a product.
func ProductRecord(p store.Product) *orderpb.Product {
	plugin := ""
	if p.ProviderPlugin != nil {
		plugin = *p.ProviderPlugin
	}
	return &orderpb.Product{
		Id:             p.ID.String(),
		Name:           p.Name,
		Description:    p.Description,
		Price:          p.Price.String(),
		Currency:       p.Currency,
		ProviderPlugin: plugin,
		Enabled:        p.Enabled,
		CreatedAt:      rpc.TimePtr(&p.CreatedAt),
		UpdatedAt:      rpc.TimePtr(&p.UpdatedAt),
	}
}

// OrderRecord is the wire form of an order: money with two decimals, RFC
// 3339 UTC timestamps, empty strings for what is not set.
func OrderRecord(o store.Order) *orderpb.Order {
	return &orderpb.Order{
		Id:           o.ID.String(),
		CustomerId:   o.CustomerID.String(),
		ProductId:    rpc.IDString(o.ProductID),
		Status:       o.Status,
		TotalAmount:  o.TotalAmount.String(),
		Currency:     o.Currency,
		Description:  o.Description,
		PaidAt:       rpc.TimePtr(o.PaidAt),
		CancelledAt:  rpc.TimePtr(o.CancelledAt),
		CancelReason: o.CancelReason,
		CreatedAt:    rpc.TimePtr(&o.CreatedAt),
		UpdatedAt:    rpc.TimePtr(&o.UpdatedAt),
	}
}

// InvoiceRecord is the wire form of an invoice.
func InvoiceRecord(i store.Invoice) *orderpb.Invoice {
	number := ""
	if i.Number != nil {
		number = *i.Number
	}
	return &orderpb.Invoice{
		Id:          i.ID.String(),
		CustomerId:  i.CustomerID.String(),
		OrderId:     rpc.IDString(i.OrderID),
		Number:      number,
		Status:      i.Status,
		Amount:      i.Amount.String(),
		PaidAmount:  i.PaidAmount.String(),
		Currency:    i.Currency,
		Description: i.Description,
		IssuedAt:    rpc.TimePtr(i.IssuedAt),
		DueAt:       rpc.TimePtr(i.DueAt),
		PaidAt:      rpc.TimePtr(i.PaidAt),
		CreatedAt:   rpc.TimePtr(&i.CreatedAt),
		UpdatedAt:   rpc.TimePtr(&i.UpdatedAt),
	}
}

func pageMeta(p paging.Page) *paymentpb.PageMeta {
	return &paymentpb.PageMeta{Total: p.Total, Page: p.Number, PageSize: p.Size, TotalPages: p.TotalPages()}
}
