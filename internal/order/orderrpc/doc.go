// Package orderrpc is the transport of the order domain: the Connect
// handlers of billing.order.OrderService and OrderAdminService (decode,
// call internal/order, encode) and their permission tables Policy and
// AdminPolicy, with the wire forms of products, orders, periods and
// invoices. The renewal overview's next steps and the billing test clock
// are handed in by internal/app (WithRenewalPolicy, WithBillingClock). The
// rules live in internal/order; nothing here decides about an order.
package orderrpc
