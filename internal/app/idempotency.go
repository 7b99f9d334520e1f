package app

import (
	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/idempotency"
)

// IdempotentProcedures are the procedures that take an Idempotency-Key
// (internal/idempotency): the ones that move money or record that it
// moved. A retry of any other is harmless or refused by its own state.
var IdempotentProcedures = []idempotency.Procedure{
	idempotency.For[paymentpb.CreatePaymentResponse](paymentpbconnect.PaymentServiceCreatePaymentProcedure),
	idempotency.For[paymentpb.RefundPaymentResponse](paymentpbconnect.PaymentServiceRefundPaymentProcedure),
	idempotency.For[paymentpb.ResolveRefundResponse](paymentpbconnect.PaymentAdminServiceResolveRefundProcedure),
	idempotency.For[gatewaypb.ConfirmBankTransferResponse](gatewaypbconnect.GatewayAdminServiceConfirmBankTransferProcedure),
	idempotency.For[identitypb.AdjustBalanceResponse](identitypbconnect.CustomerAdminServiceAdjustBalanceProcedure),
	idempotency.For[orderpb.PayWithBalanceResponse](orderpbconnect.OrderServicePayWithBalanceProcedure),
}
