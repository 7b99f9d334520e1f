package app_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/testfixture"
	"github.com/rustbill/paymentd/internal/testkit"
)

// capturedBundle is a payment environment on a business clock the test moves,
// with a bank-transfer interface besides epay.
type capturedBundle struct {
	*payBundle
	clock  *testkit.Clock
	bankGW string
	stats  paymentpbconnect.PaymentAdminServiceClient
}

func startCapturedEnv(t *testing.T) *capturedBundle {
	t.Helper()
	clock := testkit.NewClockAt(time.Now().UTC())
	e := startPaymentsWith(t, []app.Option{app.WithClock(clock.Now)}, func(c *config.Config) {
		c.Events.TimeoutScanInterval = 50 * time.Millisecond
	})
	bankGW := e.addGateway(t, "bank_transfer", "Bank transfer", map[string]any{
		"bank_name": "Bank", "account_name": "Hosting Ltd", "account_number": "1234", "currencies": []any{"CNY"},
	})
	return &capturedBundle{payBundle: e, clock: clock, bankGW: bankGW,
		stats: paymentpbconnect.NewPaymentAdminServiceClient(http.DefaultClient, e.r.baseURL)}
}

// cancelledWithPayment places an order, creates a payment for it through
// gw and has the customer cancel the order: the payment fails with it.
func (e *capturedBundle) cancelledWithPayment(t *testing.T, gw string) (string, *paymentpb.PaymentRecord) {
	t.Helper()
	orderID := e.order(t)
	p := e.createPaymentVia(t, orderID, gw).GetPayment()
	_, err := e.orders.CancelOrder(context.Background(), with(&orderpb.CancelOrderRequest{OrderId: orderID}, e.c.customer))
	require.NoError(t, err)
	require.Equal(t, "failed", e.getPayment(t, p.GetId()).GetStatus())
	return orderID, p
}

func (e *capturedBundle) toReturn(t *testing.T) ([]string, []*paymentpb.MoneyToReturn) {
	t.Helper()
	ctx := context.Background()
	list, err := e.payments.ListPayments(ctx, with(&paymentpb.ListPaymentsRequest{Pagination: &paymentpb.PageRequest{}, ToReturn: true}, e.c.admin))
	require.NoError(t, err)
	var ids []string
	for _, p := range list.Msg.GetPayments() {
		ids = append(ids, p.GetId())
	}
	stats, err := e.stats.GetPaymentStats(ctx, with(&paymentpb.GetPaymentStatsRequest{}, e.c.admin))
	require.NoError(t, err)
	return ids, stats.Msg.GetToReturn()
}

func (e *capturedBundle) signInAgain(t *testing.T) {
	t.Helper()
	var err error
	e.c.admin, e.c.customer, err = signIn(context.Background(), e.r.baseURL)
	require.NoError(t, err)
}

// balance is alice's balance, as an admin sees it.
func (e *capturedBundle) balance(t *testing.T) string {
	t.Helper()
	customers := identitypbconnect.NewCustomerAdminServiceClient(http.DefaultClient, e.r.baseURL)
	c, err := customers.GetCustomer(context.Background(), with(&identitypb.GetCustomerRequest{Id: e.c.customerID.String()}, e.c.admin))
	require.NoError(t, err)
	return c.Msg.GetCustomer().GetBalance()
}

func (e *capturedBundle) ledgerClean(t *testing.T) {
	t.Helper()
	rep, err := ledger.Verify(context.Background(), e.r.app.Pool())
	require.NoError(t, err)
	require.True(t, rep.OK(), "%s", rep)
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}

// A customer pays at the gateway after cancelling the order: the money
// lands as captured money to return (the payment stays failed), the admin
// finds it (ListPayments to_return, GetPaymentStats) and returns it through
// the gateway with RefundPayment, recorded as a refund.
func TestMoneyCapturedAfterTheOrderClosedIsFoundAndReturnedThroughTheGateway(t *testing.T) {
	t.Parallel()
	e := startCapturedEnv(t)
	ctx := context.Background()
	orderID, p := e.cancelledWithPayment(t, e.epayGW)

	require.NoError(t, e.fake.Pay(p.GetId()))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, "12.30", e.getPayment(c, p.GetId()).GetCapturedAmount())
	}, 15*time.Second, 20*time.Millisecond)
	got := e.getPayment(t, p.GetId())
	require.Equal(t, "failed", got.GetStatus(), "a final state is never left")
	require.NotEmpty(t, got.GetCapturedAt())
	require.NotEmpty(t, got.GetFailedAt())
	require.Equal(t, "cancelled", e.orderStatus(t, orderID))
	require.Eventually(t, func() bool {
		ns := e.fake.Notifications()
		return len(ns) > 0 && ns[len(ns)-1].Acked
	}, 15*time.Second, 20*time.Millisecond, "once recorded, the gateway's repeat is acknowledged")
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.capture' AND entity_id = $1`, p.GetId()))

	ids, sums := e.toReturn(t)
	require.Equal(t, []string{p.GetId()}, ids)
	require.Len(t, sums, 1)
	require.Equal(t, "CNY", sums[0].GetCurrency())
	require.EqualValues(t, 1, sums[0].GetPayments())
	require.Equal(t, "12.30", sums[0].GetAmount())

	// The customer cannot send it back to themselves; an admin can.
	gateway := "gateway"
	_, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId(), Destination: &gateway}, e.c.customer))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%v", err)
	res, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId(), Destination: &gateway, Reason: "order was cancelled"}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "succeeded", res.Msg.GetRefund().GetStatus())
	require.Equal(t, "gateway", res.Msg.GetRefund().GetDestination())
	require.Equal(t, "failed", res.Msg.GetPayment().GetStatus(), "returned captured money leaves the payment failed")
	require.Equal(t, "12.30", res.Msg.GetPayment().GetRefundedAmount())
	require.Len(t, e.fake.Refunds(), 1, "the gateway paid it back")
	require.Equal(t, "cancelled", e.orderStatus(t, orderID), "the cancelled order does not move")

	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId()}, e.c.admin))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "nothing left: %v", err)
	ids, sums = e.toReturn(t)
	require.Empty(t, ids)
	require.Empty(t, sums)
	e.ledgerClean(t)
}

// A bank transfer confirmed after the 24 h timeout cancelled its order
// lands as captured money, which the admin credits to the customer's
// balance in one step.
func TestBankTransferConfirmedAfterTheTimeoutIsCreditedToTheBalance(t *testing.T) {
	t.Parallel()
	e := startCapturedEnv(t)
	ctx := context.Background()
	orderID := e.order(t)
	p := e.createPaymentVia(t, orderID, e.bankGW).GetPayment()
	e.clock.Advance(25 * time.Hour)
	e.signInAgain(t) // a day later, the old session and token have expired
	e.waitOrderStatus(t, orderID, "cancelled")
	require.Equal(t, "failed", e.getPayment(t, p.GetId()).GetStatus())

	confirmed, err := e.admin.ConfirmBankTransfer(ctx, with(&gatewaypb.ConfirmBankTransferRequest{PaymentId: p.GetId(), Reference: "STATEMENT-7"}, e.c.admin))
	require.NoError(t, err, "the transfer is recorded, not refused")
	require.Equal(t, "failed", confirmed.Msg.GetPayment().GetStatus())
	require.Equal(t, "12.30", confirmed.Msg.GetPayment().GetCapturedAmount())
	require.Equal(t, "cancelled", e.orderStatus(t, orderID))

	before := e.balance(t)
	balance := "balance"
	res, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p.GetId(), Destination: &balance}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "succeeded", res.Msg.GetRefund().GetStatus())
	require.Equal(t, "balance", res.Msg.GetRefund().GetDestination())
	require.Equal(t, "12.30", res.Msg.GetPayment().GetRefundedAmount())
	require.Equal(t, "0.00", before)
	require.Equal(t, "12.30", e.balance(t))
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM balance_transactions WHERE type = 'refund' AND payment_id = $1 AND amount = 12.30`, p.GetId()))
	ids, _ := e.toReturn(t)
	require.Empty(t, ids)

	// A balance payment cannot be sent through a gateway.
	_, err = e.orders.PayWithBalance(ctx, with(&orderpb.PayWithBalanceRequest{OrderId: e.order(t)}, e.c.customer))
	require.NoError(t, err)
	var balancePayment string
	require.NoError(t, e.r.app.Pool().QueryRow(ctx, `SELECT id::text FROM payments WHERE method = 'balance'`).Scan(&balancePayment))
	gateway := "gateway"
	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: balancePayment, Destination: &gateway}, e.c.admin))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	bogus := "wallet"
	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: balancePayment, Destination: &bogus}, e.c.admin))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	e.ledgerClean(t)
}

// QueryPaymentStatus asks the gateway about a failed payment within
// [payments].late_capture_days: money taken after all is found and recorded
// as captured, never as a move out of failed. Past the window the gateway
// is not asked.
func TestQueryPaymentStatusFindsMoneyCapturedAfterAPaymentFailed(t *testing.T) {
	t.Parallel()
	e := startCapturedEnv(t)
	ctx := context.Background()
	e.fake.DropNotify(true) // the gateway's notifications get lost
	_, p := e.cancelledWithPayment(t, e.epayGW)
	_, old := e.cancelledWithPayment(t, e.epayGW)
	require.NoError(t, e.fake.Pay(p.GetId()))

	got, err := e.payments.QueryPaymentStatus(ctx, with(&paymentpb.QueryPaymentStatusRequest{PaymentId: p.GetId()}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "failed", got.Msg.GetPayment().GetStatus())
	require.Equal(t, "12.30", got.Msg.GetPayment().GetCapturedAmount())
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND entity_id = $1`, p.GetId()))

	// Eight days later the other payment's money arrives: nobody asks.
	e.clock.Advance(8 * 24 * time.Hour)
	e.signInAgain(t)
	require.NoError(t, e.fake.Pay(old.GetId()))
	got, err = e.payments.QueryPaymentStatus(ctx, with(&paymentpb.QueryPaymentStatusRequest{PaymentId: old.GetId()}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "0.00", got.Msg.GetPayment().GetCapturedAmount(), "past late_capture_days the gateway is not asked")
	e.ledgerClean(t)
}
