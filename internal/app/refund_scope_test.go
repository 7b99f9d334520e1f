package app_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
)

// An operate key may confirm a bank transfer and refund it the way it
// came, but not credit it to the customer's balance: that turns a transfer
// nobody saw into money the customer can spend (the outside probe's second
// round, M2). An admin key may; a balance payment's refund goes back to
// the balance with operate, as before.
func TestAnOperateKeyCannotRefundAGatewayPaymentToTheBalance(t *testing.T) {
	t.Parallel()
	e := startCapturedEnv(t)
	ctx := context.Background()
	operate := newAdminKey(t, e.r.baseURL, e.c.admin, "operate")
	admin := newAdminKey(t, e.r.baseURL, e.c.admin, "admin")
	orderID := e.order(t)
	p := e.createPaymentVia(t, orderID, e.bankGW).GetPayment()
	confirmed, err := e.admin.ConfirmBankTransfer(ctx, with(&gatewaypb.ConfirmBankTransferRequest{PaymentId: p.GetId(), Reference: "never arrived"}, operate.cred))
	require.NoError(t, err)
	require.Equal(t, "success", confirmed.Msg.GetPayment().GetStatus())
	e.waitOrderStatus(t, orderID, "active") // the events it set off are done

	balance := "balance"
	before := moneyState(t, e.payBundle)
	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId(), Destination: &balance}, operate.cred))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "needs admin")
	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId(), Amount: "1.00", Destination: &balance}, operate.cred))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "a part refund too: %v", err)
	require.Equal(t, before, moneyState(t, e.payBundle), "nothing moved")
	require.Equal(t, "0.00", e.balance(t))

	res, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId(), Amount: "2.30", Destination: &balance}, admin.cred))
	require.NoError(t, err)
	require.Equal(t, "balance", res.Msg.GetRefund().GetDestination())
	require.Equal(t, "2.30", e.balance(t))

	// The balance's own payments go back to it with operate.
	customers := identitypbconnect.NewCustomerAdminServiceClient(http.DefaultClient, e.r.baseURL)
	_, err = customers.AdjustBalance(ctx, with(&identitypb.AdjustBalanceRequest{CustomerId: e.c.customerID.String(), Amount: "10.00", Note: "top up"}, admin.cred))
	require.NoError(t, err)
	paid, err := e.orders.PayWithBalance(ctx, with(&orderpb.PayWithBalanceRequest{OrderId: e.order(t)}, e.c.customer))
	require.NoError(t, err)
	require.Equal(t, "0.00", e.balance(t))
	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: paid.Msg.GetPayment().GetId(), Destination: &balance}, operate.cred))
	require.NoError(t, err)
	require.Equal(t, "12.30", e.balance(t))
	e.ledgerClean(t)
}
