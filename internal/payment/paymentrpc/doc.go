// Package paymentrpc is the transport of the payment domain: the Connect
// handlers of billing.payment.PaymentService and PaymentAdminService (decode,
// call internal/payment, encode; their permission tables Policy and
// AdminPolicy) and the plain HTTP route /callbacks/{gateway_interface_id}
// that real gateways notify, which answers in the gateway's own terms. The
// rules live in internal/payment; nothing here decides about money.
package paymentrpc
