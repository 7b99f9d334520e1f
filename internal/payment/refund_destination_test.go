package payment_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// An operate API key does the day-to-day refunds, back the way the money
// came; crediting a gateway payment's money to the customer's balance is
// money the customer can spend, and needs an admin key.
func TestAnOperateKeyRefundsBackTheWayTheMoneyCameButNotAGatewayPaymentToTheBalance(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	ctx := context.Background()
	operate := auth.WithPrincipal(ctx, auth.Principal{Role: auth.RoleAdmin, ID: f.adminID, Kind: auth.KindAPIKey, CredentialID: "key-1", Scope: auth.ScopeOperate})
	p := f.paidAtTheGateway(t, "10.00")

	_, err := f.svc.RefundPayment(operate, p.ID, "4.00", "", store.RefundToBalance)
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "to the customer's balance")
	require.Empty(t, f.refunds(t, p.ID), "nothing reserved")
	require.Equal(t, "0.00", f.payment(t, p.ID).RefundedAmount.String())

	res, err := f.svc.RefundPayment(operate, p.ID, "4.00", "", "")
	require.NoError(t, err, "a gateway payment's refund through its gateway is an operate key's")
	require.Equal(t, "4.00", res.Payment.RefundedAmount.String())
	require.Len(t, f.fake.Refunds(), 1)

	_, err = f.pool.Exec(ctx, `UPDATE customers SET balance = 20.00 WHERE id = $1`, f.alice)
	require.NoError(t, err)
	orderID := f.order(t, "20.00")
	paid, err := order.NewService(f.pool, []string{"CNY"}, nil, nil, nil).PayWithBalance(f.asAlice, orderID)
	require.NoError(t, err)
	res, err = f.svc.RefundPayment(operate, paid.Payment.ID, "5.00", "", store.RefundToBalance)
	require.NoError(t, err, "a balance payment goes back to the balance it came from")
	require.Equal(t, "5.00", res.Payment.RefundedAmount.String())
	acct, err := store.GetBalanceAccount(ctx, f.pool, f.alice)
	require.NoError(t, err)
	require.Equal(t, "5.00", acct.Balance.String())
	testfixture.CheckMoneyInvariants(t, f.pool)
}

// A balance payment cannot be refunded through a gateway, and a destination
// that is neither is refused; neither reserves or sends anything.
func TestARefundDestinationThePaymentCannotTakeIsRefused(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	ctx := context.Background()
	_, err := f.pool.Exec(ctx, `UPDATE customers SET balance = 20.00 WHERE id = $1`, f.alice)
	require.NoError(t, err)
	orderID := f.order(t, "20.00")
	paid, err := order.NewService(f.pool, []string{"CNY"}, nil, nil, nil).PayWithBalance(f.asAlice, orderID)
	require.NoError(t, err)
	p := f.paidAtTheGateway(t, "10.00")

	_, err = f.svc.RefundPayment(f.admin, paid.Payment.ID, "", "", store.RefundToGateway)
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.Contains(t, err.Error(), "not through a gateway")
	_, err = f.svc.RefundPayment(f.admin, p.ID, "", "", "cheque")
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.Contains(t, err.Error(), "neither")

	require.Empty(t, f.refunds(t, paid.Payment.ID))
	require.Empty(t, f.refunds(t, p.ID))
	require.Empty(t, f.fake.Refunds())
	acct, err := store.GetBalanceAccount(ctx, f.pool, f.alice)
	require.NoError(t, err)
	require.Equal(t, "0.00", acct.Balance.String())

	res, err := f.svc.RefundPayment(f.admin, p.ID, "3.00", "", store.RefundToGateway)
	require.NoError(t, err, "a gateway payment named back to its gateway")
	require.Equal(t, "3.00", res.Payment.RefundedAmount.String())
	require.Len(t, f.fake.Refunds(), 1)
	testfixture.CheckMoneyInvariants(t, f.pool)
}

// RefundOrder answers the error of a refund the gateway refused, so the
// event worker tries again; it does not report the order refunded while
// its money is still with the gateway.
func TestRefundOrderAnswersARefusedRefund(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	ctx := context.Background()
	p := f.paidAtTheGateway(t, "25.00")
	f.fake.InjectFault(epay.Fault{Path: "/api.php", Act: "refund", Status: http.StatusBadRequest, Times: 1})

	err := f.svc.RefundOrder(ctx, *p.OrderID, "provisioning_failed")
	require.True(t, apperr.Is(err, apperr.Internal), "%v", err)
	require.Contains(t, err.Error(), "gateway refund failed")
	require.Equal(t, "success", f.payment(t, p.ID).Status)
	require.Equal(t, "0.00", f.payment(t, p.ID).RefundedAmount.String())

	require.NoError(t, f.svc.RefundOrder(ctx, *p.OrderID, "provisioning_failed"), "the retry refunds it")
	require.Equal(t, "refunded", f.payment(t, p.ID).Status)
	testfixture.CheckMoneyInvariants(t, f.pool)
}

// A failed payment whose money the gateway never took has nothing to give
// back: it is refused as not refundable, before its gateway is asked or
// anything reserved.
func TestAFailedPaymentWithNothingCapturedIsNotRefundable(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	orderID := f.order(t, "15.00")
	p := f.pay(t, orderID)
	_, err := order.NewService(f.pool, []string{"CNY"}, nil, nil, nil).CancelOrder(f.asAlice, orderID)
	require.NoError(t, err)
	require.Equal(t, "failed", f.payment(t, p.ID).Status)
	require.Equal(t, "0.00", f.payment(t, p.ID).CapturedAmount.String())

	_, err = f.svc.RefundPayment(f.admin, p.ID, "", "", "")
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.Contains(t, err.Error(), "is failed; only a successful payment, or a failed one whose money the gateway captured")
	require.Empty(t, f.refunds(t, p.ID))
	require.Empty(t, f.fake.Refunds())
}
