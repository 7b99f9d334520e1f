// Package gatewayrpc is the transport of the gateway domain: the Connect
// handlers of billing.gateway.GatewayAdminService and PaymentMethodService
// (decode, call internal/gateway, encode) and their permission table
// Policy. What the handlers take from the payment domain
// (BankTransferConfirmer, CallbackURLs, CurrencyDue) is named here, as
// they need it, and handed in by internal/app. The rules live in
// internal/gateway.
package gatewayrpc
