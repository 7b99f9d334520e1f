package orderrpc

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"connectrpc.com/connect"

	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/rpc"
	"github.com/rustbill/paymentd/internal/store"
)

// Policy is who may call each OrderService procedure. Authenticated
// operations scope customers to their own orders and invoices themselves.
var Policy = auth.Policy{
	orderpbconnect.OrderServiceCreateProductProcedure:       auth.AdminOnly,
	orderpbconnect.OrderServiceListProductsProcedure:        auth.Authenticated,
	orderpbconnect.OrderServiceUpdateProductProcedure:       auth.AdminOnly,
	orderpbconnect.OrderServiceCreateOrderProcedure:         auth.CustomerOnly,
	orderpbconnect.OrderServiceGetOrderProcedure:            auth.Authenticated,
	orderpbconnect.OrderServiceListOrdersProcedure:          auth.Authenticated,
	orderpbconnect.OrderServiceCancelOrderProcedure:         auth.Authenticated,
	orderpbconnect.OrderServicePayWithBalanceProcedure:      auth.Authenticated,
	orderpbconnect.OrderServiceCreateInvoiceProcedure:       auth.AdminOnly,
	orderpbconnect.OrderServiceGetInvoiceProcedure:          auth.Authenticated,
	orderpbconnect.OrderServiceListInvoicesProcedure:        auth.Authenticated,
	orderpbconnect.OrderServiceCancelInvoiceProcedure:       auth.AdminOnly,
	orderpbconnect.OrderServiceSetOrderRenewalProcedure:     auth.Authenticated,
	orderpbconnect.OrderServiceEndServiceProcedure:          auth.Authenticated,
	orderpbconnect.OrderServiceChangeOrderPlanProcedure:     auth.Authenticated,
	orderpbconnect.OrderServiceCancelPlanChangeProcedure:    auth.Authenticated,
	orderpbconnect.OrderServiceExtendServicePeriodProcedure: auth.AdminOnly,
	orderpbconnect.OrderServiceSuspendOrderProcedure:        auth.AdminOnly,
	orderpbconnect.OrderServiceResumeOrderProcedure:         auth.AdminOnly,
	orderpbconnect.OrderServiceAdvanceBillingClockProcedure: auth.AdminOnly,
	orderpbconnect.OrderServiceGetRenewalOverviewProcedure:  auth.AdminOnly,
}

// BillingClock is the test clock of the billing run ([billing].test_clock):
// Advance moves it forward by d and runs the billing run at once as of the
// new time.
type BillingClock interface {
	Advance(ctx context.Context, d time.Duration) (ClockAdvanced, error)
	Now() time.Time
}

// RenewalPolicy is what the overview needs of the billing run's settings:
// how long past due an unpaid renewal suspends, then ends, the service (0:
// never).
type RenewalPolicy struct {
	SuspendAfter, TerminateAfter time.Duration
}

// ClockAdvanced is what a move of the test clock did: the clock's time
// after it and the billing run's counts.
type ClockAdvanced struct {
	Now                                                     time.Time
	Issued, AutoPaid, Overdue, Suspended, Terminated, Ended int
}

// ShareRefunder refunds part of a payment back its own way (its gateway,
// or the balance for a balance payment) through internal/payment's refund
// path, as the admin in ctx: EndService's gateway credit.
type ShareRefunder interface {
	RefundShare(ctx context.Context, paymentID uuid.UUID, amount money.Amount, reason string) (refundID uuid.UUID, err error)
}

// Handler serves billing.order.OrderService: decode, call the domain, encode.
type Handler struct {
	orderpbconnect.UnimplementedOrderServiceHandler
	svc      *order.Service
	clock    BillingClock
	policy   RenewalPolicy
	refunder ShareRefunder
}

// WithRefunder returns h making EndService's gateway refunds through r;
// without it a gateway credit answers FailedPrecondition.
func (h *Handler) WithRefunder(r ShareRefunder) *Handler {
	h.refunder = r
	return h
}

// WithRenewalPolicy returns h answering GetRenewalOverview's next steps by
// p.
func (h *Handler) WithRenewalPolicy(p RenewalPolicy) *Handler {
	h.policy = p
	return h
}

// WithBillingClock returns h serving AdvanceBillingClock over c; without
// it the procedure answers FailedPrecondition (the test clock is off).
func (h *Handler) WithBillingClock(c BillingClock) *Handler {
	h.clock = c
	return h
}

// NewHandler returns the OrderService handler over svc.
func NewHandler(svc *order.Service) *Handler {
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
	p, err := h.svc.CreateProduct(ctx, order.NewProduct{
		Name: m.GetName(), Description: m.GetDescription(), Price: price,
		Currency: m.GetCurrency(), BillingCycle: m.GetBillingCycle(), ProviderPlugin: m.ProviderPlugin,
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
	u := order.ProductUpdate{Name: m.Name, Description: m.Description, Enabled: m.Enabled, ApplyToExistingOrders: m.GetApplyToExistingOrders()}
	if c := m.GetBillingCycle(); c != "" {
		u.BillingCycle = &c
	}
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
	out := &orderpb.ListProductsResponse{Products: make([]*orderpb.Product, 0, len(rows)), Meta: rpc.PageMeta(page)}
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
	o, periods, err := h.svc.GetOrderPeriods(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &orderpb.GetOrderResponse{Order: OrderRecord(o), Periods: make([]*orderpb.ServicePeriod, 0, len(periods))}
	if err := h.withPendingChanges(ctx, out.Order); err != nil {
		return nil, err
	}
	for _, p := range periods {
		out.Periods = append(out.Periods, PeriodRecord(p))
	}
	return connect.NewResponse(out), nil
}

// SetOrderRenewal implements OrderService.SetOrderRenewal.
func (h *Handler) SetOrderRenewal(ctx context.Context, req *connect.Request[orderpb.SetOrderRenewalRequest]) (*connect.Response[orderpb.SetOrderRenewalResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetOrderId(), "order_id")
	if err != nil {
		return nil, err
	}
	o, err := h.svc.SetOrderRenewal(ctx, id, req.Msg.GetRenews())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&orderpb.SetOrderRenewalResponse{Order: OrderRecord(o)}), nil
}

// EndService implements OrderService.EndService. The gateway credit's
// refunds are made after the ending committed (a gateway call never runs
// inside a transaction): a refund that fails then leaves the service ended
// and the answer names the refund still owed, to make with RefundPayment.
func (h *Handler) EndService(ctx context.Context, req *connect.Request[orderpb.EndServiceRequest]) (*connect.Response[orderpb.EndServiceResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetOrderId(), "order_id")
	if err != nil {
		return nil, err
	}
	if order.EndCredit(req.Msg.GetCredit()) == order.CreditGateway && h.refunder == nil {
		return nil, apperr.New(apperr.FailedPrecondition, "gateway refunds are not available here")
	}
	if req.Msg.GetDryRun() {
		// A quote: nothing changes, nothing is refunded.
		q, err := h.svc.QuoteEndService(ctx, id, req.Msg.GetCredit())
		if err != nil {
			return nil, err
		}
		return connect.NewResponse(&orderpb.EndServiceResponse{
			Order: OrderRecord(q.Order), Credit: string(q.Credit),
			Unused: q.Unused.String(), Credited: q.Credited.String(), DryRun: true,
		}), nil
	}
	ended, err := h.svc.EndService(ctx, id, req.Msg.GetCredit())
	if err != nil {
		return nil, err
	}
	out := &orderpb.EndServiceResponse{
		Order: OrderRecord(ended.Order), Credit: string(ended.Credit),
		Unused: ended.Unused.String(), Credited: ended.Credited.String(),
	}
	for i, r := range ended.Refunds {
		rid, err := h.refunder.RefundShare(ctx, r.PaymentID, r.Amount, fmt.Sprintf("order %s ended now: unused share", id))
		if err != nil {
			owed := ended.Refunds[i:]
			return nil, apperr.Wrap(apperr.Internal, err,
				"order %s has ended, but the refund of %s from payment %s failed (%d of %d refunds still owed): refund them with RefundPayment",
				id, r.Amount, r.PaymentID, len(owed), len(ended.Refunds)).Show()
		}
		out.RefundIds = append(out.RefundIds, rid.String())
	}
	return connect.NewResponse(out), nil
}

// ChangeOrderPlan implements OrderService.ChangeOrderPlan.
func (h *Handler) ChangeOrderPlan(ctx context.Context, req *connect.Request[orderpb.ChangeOrderPlanRequest]) (*connect.Response[orderpb.ChangeOrderPlanResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetOrderId(), "order_id")
	if err != nil {
		return nil, err
	}
	pid, err := rpc.ParseID(req.Msg.GetProductId(), "product_id")
	if err != nil {
		return nil, err
	}
	if req.Msg.GetDryRun() {
		// A quote: nothing changes.
		q, err := h.svc.QuoteOrderPlan(ctx, id, pid, req.Msg.GetWhen())
		if err != nil {
			return nil, err
		}
		out := &orderpb.ChangeOrderPlanResponse{Order: OrderRecord(q.Order), Change: PlanChangeRecord(q.Change), DryRun: true}
		out.Change.Id = "" // not recorded
		return connect.NewResponse(out), nil
	}
	ch, err := h.svc.ChangeOrderPlan(ctx, id, pid, req.Msg.GetWhen())
	if err != nil {
		return nil, err
	}
	out := &orderpb.ChangeOrderPlanResponse{Order: OrderRecord(ch.Order), Change: PlanChangeRecord(ch.Change)}
	if ch.Change.Status == store.PlanChangePending {
		out.Order.PendingPlanChange = out.Change
	}
	return connect.NewResponse(out), nil
}

// CancelPlanChange implements OrderService.CancelPlanChange.
func (h *Handler) CancelPlanChange(ctx context.Context, req *connect.Request[orderpb.CancelPlanChangeRequest]) (*connect.Response[orderpb.CancelPlanChangeResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetOrderId(), "order_id")
	if err != nil {
		return nil, err
	}
	ch, err := h.svc.CancelPlanChange(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&orderpb.CancelPlanChangeResponse{Order: OrderRecord(ch.Order), Change: PlanChangeRecord(ch.Change)}), nil
}

// withPendingChanges sets the orders' pending_plan_change.
func (h *Handler) withPendingChanges(ctx context.Context, orders ...*orderpb.Order) error {
	if len(orders) == 0 {
		return nil
	}
	rows := make([]store.Order, 0, len(orders))
	for _, o := range orders {
		id, err := uuid.Parse(o.GetId())
		if err != nil {
			return err
		}
		rows = append(rows, store.Order{ID: id})
	}
	pending, err := h.svc.PendingPlanChanges(ctx, rows...)
	if err != nil {
		return err
	}
	for i, o := range orders {
		if ch, ok := pending[rows[i].ID]; ok {
			o.PendingPlanChange = PlanChangeRecord(ch)
		}
	}
	return nil
}

// PlanChangeRecord is the wire form of a plan change.
func PlanChangeRecord(c store.PlanChange) *orderpb.PlanChange {
	return &orderpb.PlanChange{
		Id:            c.ID.String(),
		FromProductId: rpc.IDString(c.FromProduct),
		ToProductId:   c.ToProduct.String(),
		FromPrice:     c.FromPrice.String(),
		ToPrice:       c.ToPrice.String(),
		FromCycle:     c.FromCycle,
		ToCycle:       c.ToCycle,
		When:          c.Timing,
		Status:        c.Status,
		Amount:        c.Amount.String(),
		Credited:      c.Credited.String(),
		InvoiceId:     rpc.IDString(c.InvoiceID),
		LapseAt:       rpc.TimePtr(c.LapseAt),
		EffectiveAt:   rpc.TimePtr(c.EffectiveAt),
		Currency:      c.Currency,
	}
}

// ExtendServicePeriod implements OrderService.ExtendServicePeriod.
func (h *Handler) ExtendServicePeriod(ctx context.Context, req *connect.Request[orderpb.ExtendServicePeriodRequest]) (*connect.Response[orderpb.ExtendServicePeriodResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetOrderId(), "order_id")
	if err != nil {
		return nil, err
	}
	end, err := rpc.ParseTime("ends_at", req.Msg.GetEndsAt())
	if err != nil {
		return nil, err
	}
	o, p, err := h.svc.ExtendServicePeriod(ctx, id, end, req.Msg.GetReason())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&orderpb.ExtendServicePeriodResponse{Order: OrderRecord(o), Period: PeriodRecord(p)}), nil
}

// SuspendOrder implements OrderService.SuspendOrder.
func (h *Handler) SuspendOrder(ctx context.Context, req *connect.Request[orderpb.SuspendOrderRequest]) (*connect.Response[orderpb.SuspendOrderResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetOrderId(), "order_id")
	if err != nil {
		return nil, err
	}
	o, err := h.svc.SuspendOrder(ctx, id, req.Msg.GetReason())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&orderpb.SuspendOrderResponse{Order: OrderRecord(o)}), nil
}

// ResumeOrder implements OrderService.ResumeOrder.
func (h *Handler) ResumeOrder(ctx context.Context, req *connect.Request[orderpb.ResumeOrderRequest]) (*connect.Response[orderpb.ResumeOrderResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetOrderId(), "order_id")
	if err != nil {
		return nil, err
	}
	o, err := h.svc.ResumeOrder(ctx, id, req.Msg.GetReason())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&orderpb.ResumeOrderResponse{Order: OrderRecord(o)}), nil
}

// AdvanceBillingClock implements OrderService.AdvanceBillingClock.
func (h *Handler) AdvanceBillingClock(ctx context.Context, req *connect.Request[orderpb.AdvanceBillingClockRequest]) (*connect.Response[orderpb.AdvanceBillingClockResponse], error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	if h.clock == nil {
		return nil, apperr.New(apperr.FailedPrecondition, "the billing test clock is off: it needs [billing].test_clock = true (paymentd dev turns it on)")
	}
	a, err := h.clock.Advance(ctx, time.Duration(req.Msg.GetSeconds())*time.Second)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&orderpb.AdvanceBillingClockResponse{
		Now: a.Now.UTC().Format(time.RFC3339), Issued: int32(a.Issued), AutoPaid: int32(a.AutoPaid), Overdue: int32(a.Overdue),
		Suspended: int32(a.Suspended), Terminated: int32(a.Terminated), Ended: int32(a.Ended),
	}), nil
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
	out := &orderpb.ListOrdersResponse{Orders: make([]*orderpb.Order, 0, len(rows)), Meta: rpc.PageMeta(page)}
	for _, o := range rows {
		out.Orders = append(out.Orders, OrderRecord(o))
	}
	if err := h.withPendingChanges(ctx, out.Orders...); err != nil {
		return nil, err
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
	in := order.NewInvoice{Currency: m.GetCurrency(), Description: m.GetDescription()}
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
	if in.DueAt, err = rpc.ParseTime("due_at", m.GetDueAt()); err != nil {
		return nil, err
	}
	inv, err := h.svc.CreateInvoice(ctx, in)
	if err != nil {
		return nil, err
	}
	rec, err := h.invoiceWithLines(ctx, inv)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&orderpb.CreateInvoiceResponse{Invoice: rec}), nil
}

// GetInvoice implements OrderService.GetInvoice.
func (h *Handler) GetInvoice(ctx context.Context, req *connect.Request[orderpb.GetInvoiceRequest]) (*connect.Response[orderpb.GetInvoiceResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetId(), "id")
	if err != nil {
		return nil, err
	}
	inv, lines, err := h.svc.GetInvoice(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&orderpb.GetInvoiceResponse{Invoice: InvoiceRecord(inv, lines...)}), nil
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
	lines, err := h.svc.Lines(ctx, rows)
	if err != nil {
		return nil, err
	}
	out := &orderpb.ListInvoicesResponse{Invoices: make([]*orderpb.Invoice, 0, len(rows)), Meta: rpc.PageMeta(page)}
	for _, inv := range rows {
		out.Invoices = append(out.Invoices, InvoiceRecord(inv, lines[inv.ID]...))
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
	rec, err := h.invoiceWithLines(ctx, inv)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&orderpb.CancelInvoiceResponse{Invoice: rec}), nil
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
		BillingCycle:   p.BillingCycle,
	}
}

// OrderRecord is the wire form of an order: money with two decimals, RFC
// 3339 UTC timestamps, empty strings for what is not set.
func OrderRecord(o store.Order) *orderpb.Order {
	return &orderpb.Order{
		Id:            o.ID.String(),
		CustomerId:    o.CustomerID.String(),
		ProductId:     rpc.IDString(o.ProductID),
		Status:        o.Status,
		TotalAmount:   o.TotalAmount.String(),
		Currency:      o.Currency,
		Description:   o.Description,
		PaidAt:        rpc.TimePtr(o.PaidAt),
		CancelledAt:   rpc.TimePtr(o.CancelledAt),
		CancelReason:  o.CancelReason,
		CreatedAt:     rpc.TimePtr(&o.CreatedAt),
		UpdatedAt:     rpc.TimePtr(&o.UpdatedAt),
		BillingCycle:  o.BillingCycle,
		RenewalPrice:  rpc.NullMoney(o.RenewalPrice),
		PaidUntil:     rpc.TimePtr(o.PaidUntil),
		Renews:        o.Renews && order.BillingCycle(o.BillingCycle).Recurring(),
		SuspendReason: o.SuspendReason,
	}
}

// GetRenewalOverview implements OrderService.GetRenewalOverview, which the
// proto deprecates for OrderAdminService.GetRenewalOverview: both answer
// renewalOverview's answer.
func (h *Handler) GetRenewalOverview(ctx context.Context, req *connect.Request[orderpb.GetRenewalOverviewRequest]) (*connect.Response[orderpb.GetRenewalOverviewResponse], error) {
	out, err := h.renewalOverview(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(out), nil
}

// renewalOverview is the renewal cycle as of the billing run's time, in
// the wire form both GetRenewalOverview procedures answer.
func (h *Handler) renewalOverview(ctx context.Context, m *orderpb.GetRenewalOverviewRequest) (*orderpb.GetRenewalOverviewResponse, error) {
	days := m.GetDays()
	if days == 0 {
		days = 30
	}
	now := h.svc.Now()
	if h.clock != nil {
		now = store.Timestamp(h.clock.Now()) // the billing run's time
	}
	ov, err := h.svc.RenewalOverview(ctx, now, time.Duration(days)*24*time.Hour, h.policy.TerminateAfter)
	if err != nil {
		return nil, err
	}
	out := &orderpb.GetRenewalOverviewResponse{Days: days, OverdueCount: ov.OverdueCount, SuspendedCount: ov.SuspendedCount,
		PartlyPaidPastTerminationCount: ov.PartlyPaidPastTerminationCount}
	for _, d := range ov.Due {
		out.Due = append(out.Due, &orderpb.RenewalsDue{Currency: d.Currency, Count: d.Count, Amount: d.Amount.String()})
	}
	record := func(r store.UnpaidRenewal, step time.Duration) *orderpb.RenewalInvoice {
		rec := &orderpb.RenewalInvoice{
			Order: OrderRecord(r.Order), InvoiceId: r.InvoiceID.String(), AmountDue: r.AmountDue.String(),
			DueAt: rpc.TimePtr(&r.DueAt), DaysOverdue: int32(now.Sub(r.DueAt) / (24 * time.Hour)),
		}
		if step > 0 {
			at := r.DueAt.Add(step)
			rec.NextStepAt = rpc.TimePtr(&at)
		}
		for _, a := range ov.CardCharges[r.InvoiceID] {
			rec.CardCharges = append(rec.CardCharges, &orderpb.CardChargeAttempt{
				Attempt: a.Attempt, PaymentId: a.PaymentID.String(), SavedMethodId: a.SavedMethodID.String(),
				Outcome: a.Outcome, Code: a.Code, Message: a.Message, CreatedAt: rpc.Time(a.CreatedAt),
			})
		}
		return rec
	}
	for _, r := range ov.Overdue {
		out.Overdue = append(out.Overdue, record(r, h.policy.SuspendAfter))
	}
	for _, r := range ov.Suspended {
		out.Suspended = append(out.Suspended, record(r, h.policy.TerminateAfter))
	}
	for _, r := range ov.PartlyPaidPastTermination {
		out.PartlyPaidPastTermination = append(out.PartlyPaidPastTermination, record(r, 0))
	}
	return out, nil
}

// PeriodRecord is the wire form of a service period.
func PeriodRecord(p store.ServicePeriod) *orderpb.ServicePeriod {
	outcome := ""
	if p.Outcome != nil {
		outcome = *p.Outcome
	}
	return &orderpb.ServicePeriod{
		Period: p.Seq, StartsAt: rpc.TimePtr(&p.StartsAt), EndsAt: rpc.TimePtr(&p.EndsAt),
		InvoiceId: rpc.IDString(p.InvoiceID), Status: p.Status, PaidAt: rpc.TimePtr(p.PaidAt), Outcome: outcome,
	}
}

// invoiceWithLines is the wire form of inv with its lines, read after the
// call that wrote it.
func (h *Handler) invoiceWithLines(ctx context.Context, inv store.Invoice) (*orderpb.Invoice, error) {
	lines, err := h.svc.Lines(ctx, []store.Invoice{inv})
	if err != nil {
		return nil, err
	}
	return InvoiceRecord(inv, lines[inv.ID]...), nil
}

// InvoiceLineRecord is the wire form of an invoice's line.
func InvoiceLineRecord(l store.InvoiceLine) *orderpb.InvoiceLine {
	return &orderpb.InvoiceLine{
		Position: l.Position, Description: l.Description,
		PeriodStart: rpc.TimePtr(l.PeriodStart), PeriodEnd: rpc.TimePtr(l.PeriodEnd),
		Quantity: l.Quantity, UnitAmount: l.UnitAmount.String(), Amount: l.Amount.String(),
	}
}

// InvoiceRecord is the wire form of an invoice and its lines.
func InvoiceRecord(i store.Invoice, lines ...store.InvoiceLine) *orderpb.Invoice {
	recs := make([]*orderpb.InvoiceLine, len(lines))
	for k, l := range lines {
		recs[k] = InvoiceLineRecord(l)
	}
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
		Lines:       recs,
	}
}
