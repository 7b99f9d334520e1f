package app

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	"github.com/rustbill/paymentd/gen/billing/integration/integrationpbconnect"
	"github.com/rustbill/paymentd/internal/gateway"
	"github.com/rustbill/paymentd/internal/gateway/gatewayrpc"
	"github.com/rustbill/paymentd/internal/integration"
	"github.com/rustbill/paymentd/internal/outbound"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/server"
)

// startPlugins builds the process's one outbound client, the plugin runtime
// whose HTTP goes through it, and the plugin registry, and starts the
// scanner (a first scan now, then every [plugins].scan_interval).
func (a *App) startPlugins(ctx context.Context) error {
	oo := a.cfg.Outbound.Options()
	oo.Logger = a.log
	if a.tel.tracing.Enabled() {
		oo.Tracer, oo.Propagator = a.tel.tracing.Tracer(), a.tel.tracing.Propagator()
	}
	a.outbound = outbound.New(oo)
	rt := plugin.NewRuntime(plugin.Options{
		HTTP:   plugin.Outbound(a.outbound),
		Logger: a.log.With("component", "plugin"),
		Now:    a.opts.clock,
		Limits: a.opts.pluginLimits,
	})
	a.registry = gateway.NewRegistry(gateway.RegistryOptions{
		DB:           a.pool,
		Dir:          a.cfg.Plugins.Dir,
		ScanInterval: a.cfg.Plugins.ScanInterval,
		Runtime:      rt,
		Clock:        a.opts.clock,
		Logger:       a.log,
		Observer:     a.tel.observer,
		Tracer:       a.backgroundTracer(),
		Secrets:      a.secrets,
	})
	return a.registry.Start(ctx)
}

// stopPlugins stops the scanner and drops the client's idle connections.
func (a *App) stopPlugins() {
	if a.registry != nil {
		a.registry.Stop()
	}
	if a.outbound != nil {
		a.outbound.CloseIdleConnections()
	}
}

// gatewayServices mounts GatewayAdminService, PaymentMethodService and
// IntegrationService. ConfirmBankTransfer goes to the payment domain when
// it offers it (pay implements gatewayrpc.BankTransferConfirmer), and so does
// the currency of an order whose payment methods are asked for
// (gatewayrpc.CurrencyDue).
func (a *App) gatewayServices(opts []connect.HandlerOption, pay any) []server.Service {
	svc := gateway.NewService(a.db, a.registry, a.opts.clock, a.log)
	confirm, _ := pay.(gatewayrpc.BankTransferConfirmer)
	due, _ := pay.(gatewayrpc.CurrencyDue)
	admin := gatewayrpc.NewHandler(svc, confirm)
	if urls, ok := pay.(gatewayrpc.CallbackURLs); ok {
		admin = admin.WithCallbackURLs(urls)
	}
	adminPath, adminHandler := gatewaypbconnect.NewGatewayAdminServiceHandler(admin, opts...)
	methodsPath, methodsHandler := gatewaypbconnect.NewPaymentMethodServiceHandler(gatewayrpc.NewMethodsHandler(svc, due), opts...)
	integrationPath, integrationHandler := integrationpbconnect.NewIntegrationServiceHandler(integration.NewHandler(a.outbound), opts...)
	return []server.Service{
		{Name: gatewaypbconnect.GatewayAdminServiceName, Path: adminPath, Handler: adminHandler},
		{Name: gatewaypbconnect.PaymentMethodServiceName, Path: methodsPath, Handler: methodsHandler},
		{Name: integrationpbconnect.IntegrationServiceName, Path: integrationPath, Handler: integrationHandler},
	}
}

// Gateways looks gateway interfaces up for the payment domain: the plugin
// registry (one read of the interface row, the plugin from memory).
func (a *App) Gateways() payment.Gateways { return a.registry }

// Outbound is the process's one HTTP client (gateways, providers,
// notifiers), with a circuit breaker per downstream host.
func (a *App) Outbound() *outbound.Client { return a.outbound }
