package app

import (
	"github.com/rustbill/paymentd/gen/billing/event/eventpbconnect"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	"github.com/rustbill/paymentd/gen/billing/integration/integrationpbconnect"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/event/eventrpc"
	"github.com/rustbill/paymentd/internal/gateway/gatewayrpc"
	"github.com/rustbill/paymentd/internal/identity/identityrpc"
	"github.com/rustbill/paymentd/internal/integration"
	"github.com/rustbill/paymentd/internal/order/orderrpc"
	"github.com/rustbill/paymentd/internal/payment/paymentrpc"
)

// AdminKeyScopes is the one table of what an admin API key needs, per
// procedure an admin may call (AdminOnly and Authenticated in Policy): read
// (lists, reads, figures), operate (read, and refunds, bank-transfer
// confirmations, event retries, resolving refunds), admin (everything but
// managing admins and keys), session (no key at all). The scopes nest. A
// procedure missing here is refused to every key, and
// TestEveryAdminProcedureHasAnAPIKeyScope fails for it: a new operation
// needs a decision here.
var AdminKeyScopes = auth.Scopes{
	// PaymentService (the API contract's). Creating a payment link and asking
	// the gateway about a payment move money's state: operate.
	paymentpbconnect.PaymentServiceCreatePaymentProcedure:      auth.ScopeOperate,
	paymentpbconnect.PaymentServiceListPaymentsProcedure:       auth.ScopeRead,
	paymentpbconnect.PaymentServiceGetPaymentProcedure:         auth.ScopeRead,
	paymentpbconnect.PaymentServiceQueryPaymentStatusProcedure: auth.ScopeOperate,
	paymentpbconnect.PaymentServiceRefundPaymentProcedure:      auth.ScopeOperate,
	// Saved cards (issue 39, 1): removing one or turning an order's
	// charging off changes who gets charged: admin.
	paymentpbconnect.PaymentServiceListSavedPaymentMethodsProcedure:  auth.ScopeRead,
	paymentpbconnect.PaymentServiceRemoveSavedPaymentMethodProcedure: auth.ScopeAdmin,
	paymentpbconnect.PaymentServiceSetAutoChargeProcedure:            auth.ScopeAdmin,
	paymentpbconnect.PaymentServiceGetAutoChargeProcedure:            auth.ScopeRead,

	paymentpbconnect.PaymentAdminServiceListRefundsProcedure:         auth.ScopeRead,
	paymentpbconnect.PaymentAdminServiceListDisputesProcedure:        auth.ScopeRead,
	paymentpbconnect.PaymentAdminServiceListAuditEntriesProcedure:    auth.ScopeRead,
	paymentpbconnect.PaymentAdminServiceGetPaymentStatsProcedure:     auth.ScopeRead,
	paymentpbconnect.PaymentAdminServiceGetPaymentTrendsProcedure:    auth.ScopeRead,
	paymentpbconnect.PaymentAdminServiceGetRecurringRevenueProcedure: auth.ScopeRead,
	paymentpbconnect.PaymentAdminServiceResolveRefundProcedure:       auth.ScopeOperate,

	// IdentityService: a key may ask who it is; credentials are managed
	// with a session only.
	identitypbconnect.IdentityServiceGetMeProcedure:                auth.ScopeRead,
	identitypbconnect.IdentityServiceLogoutProcedure:               auth.ScopeSession,
	identitypbconnect.IdentityServiceChangePasswordProcedure:       auth.ScopeSession,
	identitypbconnect.IdentityServiceCreateAdminApiKeyProcedure:    auth.ScopeSession,
	identitypbconnect.IdentityServiceListAdminApiKeysProcedure:     auth.ScopeSession,
	identitypbconnect.IdentityServiceRevokeAdminApiKeyProcedure:    auth.ScopeSession,
	identitypbconnect.IdentityServiceStartTotpEnrolmentProcedure:   auth.ScopeSession,
	identitypbconnect.IdentityServiceConfirmTotpEnrolmentProcedure: auth.ScopeSession,
	identitypbconnect.IdentityServiceDisableTotpProcedure:          auth.ScopeSession,

	identitypbconnect.CustomerAdminServiceListCustomersProcedure:       auth.ScopeRead,
	identitypbconnect.CustomerAdminServiceGetCustomerProcedure:         auth.ScopeRead,
	identitypbconnect.CustomerAdminServiceSetCanCreateApiKeysProcedure: auth.ScopeAdmin,
	identitypbconnect.CustomerAdminServiceAdjustBalanceProcedure:       auth.ScopeAdmin,
	identitypbconnect.CustomerAdminServiceSetCreditLimitProcedure:      auth.ScopeAdmin,
	identitypbconnect.CustomerAdminServiceDisableCustomerProcedure:     auth.ScopeAdmin,
	identitypbconnect.CustomerAdminServiceEnableCustomerProcedure:      auth.ScopeAdmin,
	identitypbconnect.CustomerAdminServiceSignOutEverywhereProcedure:   auth.ScopeAdmin,

	// OrderService: an admin cancelling an order or paying it from the
	// customer's balance is not among operate's chores.
	orderpbconnect.OrderServiceCreateProductProcedure:  auth.ScopeAdmin,
	orderpbconnect.OrderServiceListProductsProcedure:   auth.ScopeRead,
	orderpbconnect.OrderServiceUpdateProductProcedure:  auth.ScopeAdmin,
	orderpbconnect.OrderServiceGetOrderProcedure:       auth.ScopeRead,
	orderpbconnect.OrderServiceListOrdersProcedure:     auth.ScopeRead,
	orderpbconnect.OrderServiceCancelOrderProcedure:    auth.ScopeAdmin,
	orderpbconnect.OrderServicePayWithBalanceProcedure: auth.ScopeAdmin,
	orderpbconnect.OrderServiceCreateInvoiceProcedure:  auth.ScopeAdmin,
	orderpbconnect.OrderServiceGetInvoiceProcedure:     auth.ScopeRead,
	orderpbconnect.OrderServiceListInvoicesProcedure:   auth.ScopeRead,
	orderpbconnect.OrderServiceCancelInvoiceProcedure:  auth.ScopeAdmin,
	// The renewal cycle's manual actions change what a customer is billed
	// and served; the test clock drives the billing run.
	orderpbconnect.OrderServiceSetOrderRenewalProcedure:     auth.ScopeAdmin,
	orderpbconnect.OrderServiceEndServiceProcedure:          auth.ScopeAdmin,
	orderpbconnect.OrderServiceChangeOrderPlanProcedure:     auth.ScopeAdmin,
	orderpbconnect.OrderServiceCancelPlanChangeProcedure:    auth.ScopeAdmin,
	orderpbconnect.OrderServiceExtendServicePeriodProcedure: auth.ScopeAdmin,
	orderpbconnect.OrderServiceSuspendOrderProcedure:        auth.ScopeAdmin,
	orderpbconnect.OrderServiceResumeOrderProcedure:         auth.ScopeAdmin,
	orderpbconnect.OrderServiceAdvanceBillingClockProcedure: auth.ScopeAdmin,
	orderpbconnect.OrderServiceGetRenewalOverviewProcedure:  auth.ScopeRead,
	// OrderAdminService: the renewal overview's own place (the procedure
	// above is its deprecated first home), a read like it.
	orderpbconnect.OrderAdminServiceGetRenewalOverviewProcedure: auth.ScopeRead,

	// GatewayAdminService: configuration is admin's; a plugin's admin page
	// is a read (its script only renders); testing an interface's config
	// calls the gateway with it: configuration work, admin.
	gatewaypbconnect.GatewayAdminServiceListPluginsProcedure:             auth.ScopeRead,
	gatewaypbconnect.GatewayAdminServiceGetPluginProcedure:               auth.ScopeRead,
	gatewaypbconnect.GatewayAdminServiceReloadPluginsProcedure:           auth.ScopeAdmin,
	gatewaypbconnect.GatewayAdminServiceGetPluginAdminPageProcedure:      auth.ScopeRead,
	gatewaypbconnect.GatewayAdminServiceEnablePluginProcedure:            auth.ScopeAdmin,
	gatewaypbconnect.GatewayAdminServiceDisablePluginProcedure:           auth.ScopeAdmin,
	gatewaypbconnect.GatewayAdminServiceCreateGatewayInterfaceProcedure:  auth.ScopeAdmin,
	gatewaypbconnect.GatewayAdminServiceUpdateGatewayInterfaceProcedure:  auth.ScopeAdmin,
	gatewaypbconnect.GatewayAdminServiceEnableGatewayInterfaceProcedure:  auth.ScopeAdmin,
	gatewaypbconnect.GatewayAdminServiceDisableGatewayInterfaceProcedure: auth.ScopeAdmin,
	gatewaypbconnect.GatewayAdminServiceListGatewayInterfacesProcedure:   auth.ScopeRead,
	gatewaypbconnect.GatewayAdminServiceGetGatewayInterfaceProcedure:     auth.ScopeRead,
	gatewaypbconnect.GatewayAdminServiceTestGatewayInterfaceProcedure:    auth.ScopeAdmin,
	gatewaypbconnect.GatewayAdminServiceConfirmBankTransferProcedure:     auth.ScopeOperate,
	gatewaypbconnect.PaymentMethodServiceListPaymentMethodsProcedure:     auth.ScopeRead,

	integrationpbconnect.IntegrationServiceListCircuitBreakersProcedure: auth.ScopeRead,

	eventpbconnect.EventAdminServiceListEventsProcedure:        auth.ScopeRead,
	eventpbconnect.EventAdminServiceGetEventProcedure:          auth.ScopeRead,
	eventpbconnect.EventAdminServiceRetryEventProcedure:        auth.ScopeOperate,
	eventpbconnect.EventAdminServiceListNodesProcedure:         auth.ScopeRead,
	eventpbconnect.EventAdminServiceListLeadersProcedure:       auth.ScopeRead,
	eventpbconnect.EventAdminServiceListNotificationsProcedure: auth.ScopeRead,
}

// Policy is the permission table of every mounted service, merged: who may
// call each procedure (the per-package tables), before AdminKeyScopes says
// what an admin API key needs.
func Policy() (auth.Policy, error) {
	return MergePolicies(paymentrpc.Policy, paymentrpc.AdminPolicy, identityrpc.Policy, identityrpc.CustomerAdminPolicy, orderrpc.Policy,
		orderrpc.AdminPolicy, gatewayrpc.Policy, integration.Policy, eventrpc.Policy)
}
