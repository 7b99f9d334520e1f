package gatewayrpc

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/structpb"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/gateway"
	"github.com/rustbill/paymentd/internal/rpc"
	"github.com/rustbill/paymentd/internal/store"
)

// Policy is who may call each procedure of GatewayAdminService (admins
// only, every one of them) and PaymentMethodService (any authenticated
// caller).
var Policy = auth.Policy{
	gatewaypbconnect.GatewayAdminServiceListPluginsProcedure:             auth.AdminOnly,
	gatewaypbconnect.GatewayAdminServiceGetPluginProcedure:               auth.AdminOnly,
	gatewaypbconnect.GatewayAdminServiceReloadPluginsProcedure:           auth.AdminOnly,
	gatewaypbconnect.GatewayAdminServiceGetPluginAdminPageProcedure:      auth.AdminOnly,
	gatewaypbconnect.GatewayAdminServiceEnablePluginProcedure:            auth.AdminOnly,
	gatewaypbconnect.GatewayAdminServiceDisablePluginProcedure:           auth.AdminOnly,
	gatewaypbconnect.GatewayAdminServiceCreateGatewayInterfaceProcedure:  auth.AdminOnly,
	gatewaypbconnect.GatewayAdminServiceUpdateGatewayInterfaceProcedure:  auth.AdminOnly,
	gatewaypbconnect.GatewayAdminServiceEnableGatewayInterfaceProcedure:  auth.AdminOnly,
	gatewaypbconnect.GatewayAdminServiceDisableGatewayInterfaceProcedure: auth.AdminOnly,
	gatewaypbconnect.GatewayAdminServiceListGatewayInterfacesProcedure:   auth.AdminOnly,
	gatewaypbconnect.GatewayAdminServiceGetGatewayInterfaceProcedure:     auth.AdminOnly,
	gatewaypbconnect.GatewayAdminServiceTestGatewayInterfaceProcedure:    auth.AdminOnly,
	gatewaypbconnect.GatewayAdminServiceConfirmBankTransferProcedure:     auth.AdminOnly,
	gatewaypbconnect.PaymentMethodServiceListPaymentMethodsProcedure:     auth.Authenticated,
}

// BankTransferConfirmer applies an admin's confirmation of a bank transfer:
// the payment domain's success path (row lock, status check, order paid,
// order_paid event, audit) in one transaction. *payment.Service implements
// it.
type BankTransferConfirmer interface {
	ConfirmBankTransfer(ctx context.Context, paymentID uuid.UUID, reference string) (store.Payment, error)
}

// CallbackURLs gives the notify URL payments through a gateway interface
// give the gateway ([server].public_url + /callbacks/ + id).
// *payment.Service implements it.
type CallbackURLs interface {
	CallbackURL(gatewayInterfaceID uuid.UUID) string
}

// Handler serves billing.gateway.GatewayAdminService: decode, call the
// domain, encode.
type Handler struct {
	gatewaypbconnect.UnimplementedGatewayAdminServiceHandler
	svc       *gateway.Service
	confirm   BankTransferConfirmer
	callbacks CallbackURLs
}

// NewHandler returns the GatewayAdminService handler. confirm may be nil
// while the payment domain does not offer it: ConfirmBankTransfer then
// answers Unimplemented.
func NewHandler(svc *gateway.Service, confirm BankTransferConfirmer) *Handler {
	return &Handler{svc: svc, confirm: confirm}
}

// WithCallbackURLs makes the interfaces' answers carry callback_url, the
// payments' own notify URL; without it the field is empty.
func (h *Handler) WithCallbackURLs(urls CallbackURLs) *Handler {
	h.callbacks = urls
	return h
}

var _ gatewaypbconnect.GatewayAdminServiceHandler = (*Handler)(nil)

// ListPlugins implements GatewayAdminService.ListPlugins.
func (h *Handler) ListPlugins(ctx context.Context, req *connect.Request[gatewaypb.ListPluginsRequest]) (*connect.Response[gatewaypb.ListPluginsResponse], error) {
	rows, err := h.svc.ListPlugins(ctx, store.PluginFilter{Type: req.Msg.Type, Status: req.Msg.Status})
	if err != nil {
		return nil, err
	}
	out := &gatewaypb.ListPluginsResponse{Plugins: make([]*gatewaypb.Plugin, 0, len(rows))}
	for _, p := range rows {
		m, err := pluginRecord(p)
		if err != nil {
			return nil, err
		}
		out.Plugins = append(out.Plugins, m)
	}
	return connect.NewResponse(out), nil
}

// GetPlugin implements GatewayAdminService.GetPlugin.
func (h *Handler) GetPlugin(ctx context.Context, req *connect.Request[gatewaypb.GetPluginRequest]) (*connect.Response[gatewaypb.GetPluginResponse], error) {
	p, err := h.svc.GetPlugin(ctx, req.Msg.GetName())
	if err != nil {
		return nil, err
	}
	m, err := pluginRecord(p)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&gatewaypb.GetPluginResponse{Plugin: m}), nil
}

// ReloadPlugins implements GatewayAdminService.ReloadPlugins.
func (h *Handler) ReloadPlugins(ctx context.Context, _ *connect.Request[gatewaypb.ReloadPluginsRequest]) (*connect.Response[gatewaypb.ReloadPluginsResponse], error) {
	rep, err := h.svc.Reload(ctx)
	if err != nil {
		return nil, err
	}
	out := &gatewaypb.ReloadPluginsResponse{Files: uint32(rep.Files), Warnings: rep.Warnings, Changes: make([]*gatewaypb.PluginChange, 0, len(rep.Changes))}
	for _, c := range rep.Changes {
		out.Changes = append(out.Changes, &gatewaypb.PluginChange{
			Name: c.Name, Change: c.Kind, PreviousVersion: c.PreviousVersion, FileVersion: c.FileVersion,
			Error: c.Error, InterfacesUpdated: uint32(c.InterfacesUpdated),
		})
	}
	return connect.NewResponse(out), nil
}

// GetPluginAdminPage implements GatewayAdminService.GetPluginAdminPage.
func (h *Handler) GetPluginAdminPage(ctx context.Context, req *connect.Request[gatewaypb.GetPluginAdminPageRequest]) (*connect.Response[gatewaypb.GetPluginAdminPageResponse], error) {
	id, err := rpc.OptionalID(req.Msg.GatewayInterfaceId, "gateway_interface_id")
	if err != nil {
		return nil, err
	}
	text, err := h.svc.AdminPage(ctx, req.Msg.GetName(), id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&gatewaypb.GetPluginAdminPageResponse{Content: text}), nil
}

// EnablePlugin implements GatewayAdminService.EnablePlugin.
func (h *Handler) EnablePlugin(ctx context.Context, req *connect.Request[gatewaypb.EnablePluginRequest]) (*connect.Response[gatewaypb.EnablePluginResponse], error) {
	p, err := h.setPluginEnabled(ctx, req.Msg.GetName(), true)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&gatewaypb.EnablePluginResponse{Plugin: p}), nil
}

// DisablePlugin implements GatewayAdminService.DisablePlugin.
func (h *Handler) DisablePlugin(ctx context.Context, req *connect.Request[gatewaypb.DisablePluginRequest]) (*connect.Response[gatewaypb.DisablePluginResponse], error) {
	p, err := h.setPluginEnabled(ctx, req.Msg.GetName(), false)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&gatewaypb.DisablePluginResponse{Plugin: p}), nil
}

func (h *Handler) setPluginEnabled(ctx context.Context, name string, enabled bool) (*gatewaypb.Plugin, error) {
	v, err := h.svc.SetPluginEnabled(ctx, name, enabled)
	if err != nil {
		return nil, err
	}
	m, err := pluginRecord(v)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// CreateGatewayInterface implements GatewayAdminService.CreateGatewayInterface.
func (h *Handler) CreateGatewayInterface(ctx context.Context, req *connect.Request[gatewaypb.CreateGatewayInterfaceRequest]) (*connect.Response[gatewaypb.CreateGatewayInterfaceResponse], error) {
	m := req.Msg
	v, err := h.svc.CreateInterface(ctx, gateway.NewInterface{PluginName: m.GetPluginName(), DisplayName: m.GetDisplayName(), Config: structMap(m.GetConfig())})
	if err != nil {
		return nil, err
	}
	gi, err := h.interfaceRecord(v)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&gatewaypb.CreateGatewayInterfaceResponse{GatewayInterface: gi}), nil
}

// UpdateGatewayInterface implements GatewayAdminService.UpdateGatewayInterface.
func (h *Handler) UpdateGatewayInterface(ctx context.Context, req *connect.Request[gatewaypb.UpdateGatewayInterfaceRequest]) (*connect.Response[gatewaypb.UpdateGatewayInterfaceResponse], error) {
	m := req.Msg
	id, err := rpc.ParseID(m.GetId(), "id")
	if err != nil {
		return nil, err
	}
	u := gateway.InterfaceUpdate{DisplayName: m.DisplayName}
	if m.Config != nil {
		u.Config = structMap(m.Config)
	}
	v, err := h.svc.UpdateInterface(ctx, id, u)
	if err != nil {
		return nil, err
	}
	gi, err := h.interfaceRecord(v)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&gatewaypb.UpdateGatewayInterfaceResponse{GatewayInterface: gi}), nil
}

// EnableGatewayInterface implements GatewayAdminService.EnableGatewayInterface.
func (h *Handler) EnableGatewayInterface(ctx context.Context, req *connect.Request[gatewaypb.EnableGatewayInterfaceRequest]) (*connect.Response[gatewaypb.EnableGatewayInterfaceResponse], error) {
	gi, err := h.setEnabled(ctx, req.Msg.GetId(), true)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&gatewaypb.EnableGatewayInterfaceResponse{GatewayInterface: gi}), nil
}

// DisableGatewayInterface implements GatewayAdminService.DisableGatewayInterface.
func (h *Handler) DisableGatewayInterface(ctx context.Context, req *connect.Request[gatewaypb.DisableGatewayInterfaceRequest]) (*connect.Response[gatewaypb.DisableGatewayInterfaceResponse], error) {
	gi, err := h.setEnabled(ctx, req.Msg.GetId(), false)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&gatewaypb.DisableGatewayInterfaceResponse{GatewayInterface: gi}), nil
}

func (h *Handler) setEnabled(ctx context.Context, rawID string, enabled bool) (*gatewaypb.GatewayInterface, error) {
	id, err := rpc.ParseID(rawID, "id")
	if err != nil {
		return nil, err
	}
	v, err := h.svc.SetInterfaceEnabled(ctx, id, enabled)
	if err != nil {
		return nil, err
	}
	gi, err := h.interfaceRecord(v)
	if err != nil {
		return nil, err
	}
	return gi, nil
}

// ListGatewayInterfaces implements GatewayAdminService.ListGatewayInterfaces.
func (h *Handler) ListGatewayInterfaces(ctx context.Context, req *connect.Request[gatewaypb.ListGatewayInterfacesRequest]) (*connect.Response[gatewaypb.ListGatewayInterfacesResponse], error) {
	m := req.Msg
	rows, page, err := h.svc.ListInterfaces(ctx, store.GatewayInterfaceFilter{PluginName: m.PluginName, Enabled: m.Enabled},
		m.GetPagination().GetPage(), m.GetPagination().GetPageSize())
	if err != nil {
		return nil, err
	}
	out := &gatewaypb.ListGatewayInterfacesResponse{
		GatewayInterfaces: make([]*gatewaypb.GatewayInterface, 0, len(rows)),
		Meta:              rpc.PageMeta(page),
	}
	for _, v := range rows {
		gi, err := h.interfaceRecord(v)
		if err != nil {
			return nil, err
		}
		out.GatewayInterfaces = append(out.GatewayInterfaces, gi)
	}
	return connect.NewResponse(out), nil
}

// GetGatewayInterface implements GatewayAdminService.GetGatewayInterface.
func (h *Handler) GetGatewayInterface(ctx context.Context, req *connect.Request[gatewaypb.GetGatewayInterfaceRequest]) (*connect.Response[gatewaypb.GetGatewayInterfaceResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetId(), "id")
	if err != nil {
		return nil, err
	}
	v, err := h.svc.GetInterface(ctx, id)
	if err != nil {
		return nil, err
	}
	gi, err := h.interfaceRecord(v)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&gatewaypb.GetGatewayInterfaceResponse{GatewayInterface: gi}), nil
}

// TestGatewayInterface implements GatewayAdminService.TestGatewayInterface.
func (h *Handler) TestGatewayInterface(ctx context.Context, req *connect.Request[gatewaypb.TestGatewayInterfaceRequest]) (*connect.Response[gatewaypb.TestGatewayInterfaceResponse], error) {
	id, err := rpc.ParseID(req.Msg.GetId(), "id")
	if err != nil {
		return nil, err
	}
	res, err := h.svc.TestInterface(ctx, id)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&gatewaypb.TestGatewayInterfaceResponse{Ok: res.OK, Message: res.Message}), nil
}

// ConfirmBankTransfer implements GatewayAdminService.ConfirmBankTransfer by
// handing the confirmation to the payment domain.
func (h *Handler) ConfirmBankTransfer(ctx context.Context, req *connect.Request[gatewaypb.ConfirmBankTransferRequest]) (*connect.Response[gatewaypb.ConfirmBankTransferResponse], error) {
	if h.confirm == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("bank transfer confirmation is not available yet"))
	}
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	id, err := rpc.ParseID(req.Msg.GetPaymentId(), "payment_id")
	if err != nil {
		return nil, err
	}
	p, err := h.confirm.ConfirmBankTransfer(ctx, id, req.Msg.GetReference())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&gatewaypb.ConfirmBankTransferResponse{Payment: rpc.PaymentRecord(p)}), nil
}

// MethodsHandler serves billing.gateway.PaymentMethodService.
type MethodsHandler struct {
	gatewaypbconnect.UnimplementedPaymentMethodServiceHandler
	svc *gateway.Service
	due CurrencyDue
}

// CurrencyDue tells the currency a payment of an order or invoice would be
// in, after the same checks CreatePayment makes (the caller's own, still
// payable). The payment domain implements it.
type CurrencyDue interface {
	CurrencyDue(ctx context.Context, orderID, invoiceID *uuid.UUID) (string, error)
}

// NewMethodsHandler returns the PaymentMethodService handler; due (nil:
// order_id and invoice_id are Unimplemented) resolves an order's currency.
func NewMethodsHandler(svc *gateway.Service, due CurrencyDue) *MethodsHandler {
	return &MethodsHandler{svc: svc, due: due}
}

var _ gatewaypbconnect.PaymentMethodServiceHandler = (*MethodsHandler)(nil)

// ListPaymentMethods implements PaymentMethodService.ListPaymentMethods.
func (h *MethodsHandler) ListPaymentMethods(ctx context.Context, req *connect.Request[gatewaypb.ListPaymentMethodsRequest]) (*connect.Response[gatewaypb.ListPaymentMethodsResponse], error) {
	currency := req.Msg.GetCurrency()
	if req.Msg.GetOrderId() != "" || req.Msg.GetInvoiceId() != "" {
		if h.due == nil {
			return nil, connect.NewError(connect.CodeUnimplemented, errors.New("payment methods of an order are not available"))
		}
		orderID, err := rpc.IDOrNil(req.Msg.GetOrderId(), "order_id")
		if err != nil {
			return nil, err
		}
		invoiceID, err := rpc.IDOrNil(req.Msg.GetInvoiceId(), "invoice_id")
		if err != nil {
			return nil, err
		}
		if currency, err = h.due.CurrencyDue(ctx, orderID, invoiceID); err != nil {
			return nil, err
		}
	}
	rows, err := h.svc.PaymentMethods(ctx, currency)
	if err != nil {
		return nil, err
	}
	out := &gatewaypb.ListPaymentMethodsResponse{PaymentMethods: make([]*gatewaypb.PaymentMethod, 0, len(rows))}
	for _, m := range rows {
		out.PaymentMethods = append(out.PaymentMethods, &gatewaypb.PaymentMethod{
			Id: m.ID.String(), DisplayName: m.DisplayName, PluginName: m.PluginName, Currencies: m.Currencies,
		})
	}
	return connect.NewResponse(out), nil
}

// ---- encoding ----

func pluginRecord(p gateway.PluginView) (*gatewaypb.Plugin, error) {
	info, err := toStruct(p.Info)
	if err != nil {
		return nil, err
	}
	schema, err := toStruct(p.ConfigSchema)
	if err != nil {
		return nil, err
	}
	m := &gatewaypb.Plugin{
		Name: p.Name, Type: p.Type, Version: p.Version, Status: p.Status, LastError: p.LastError,
		Sha256: p.Sha256, Path: p.Path, Enabled: p.Enabled, Info: info, ConfigSchema: schema,
		CreatedAt: rpc.Time(p.CreatedAt), UpdatedAt: rpc.Time(p.UpdatedAt),
	}
	if l := p.Loaded; l != nil {
		m.HasAdminPage, m.LoadedVersion, m.LoadedSha256 = l.HasAdminPage, l.Version, l.SHA256
	}
	return m, nil
}

func (h *Handler) interfaceRecord(v gateway.InterfaceView) (*gatewaypb.GatewayInterface, error) {
	cfg, err := toStruct(v.Config)
	if err != nil {
		return nil, err
	}
	schema, err := toStruct(v.ConfigSchema)
	if err != nil {
		return nil, err
	}
	gi := &gatewaypb.GatewayInterface{
		Id: v.ID.String(), PluginName: v.PluginName, DisplayName: v.DisplayName,
		Config: cfg, ConfigSchema: schema, Enabled: v.Enabled, PluginStatus: v.PluginStatus, PluginEnabled: v.PluginEnabled,
		CreatedAt: rpc.Time(v.CreatedAt), UpdatedAt: rpc.Time(v.UpdatedAt),
	}
	if h.callbacks != nil {
		gi.CallbackUrl = h.callbacks.CallbackURL(v.ID)
	}
	return gi, nil
}

func toStruct(m map[string]any) (*structpb.Struct, error) {
	if m == nil {
		m = map[string]any{}
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		return nil, apperr.Wrap(apperr.Internal, err, "cannot encode a stored JSON document")
	}
	return s, nil
}

// structMap is the JSON object a Struct carries; nil for nil.
func structMap(s *structpb.Struct) map[string]any {
	if s == nil {
		return nil
	}
	return s.AsMap()
}
