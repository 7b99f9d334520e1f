package app_test

import (
	"context"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// The money rules at their edges, over the wire: each was guarded by
// package tests only, or by a single case on one side of the edge.

// moneyState is what a refused request must leave as it was: payments,
// orders, the customer's balance and ledger, events and audit rows.
func (e *payBundle) moneyState(t *testing.T) string {
	t.Helper()
	var d string
	require.NoError(t, e.r.app.Pool().QueryRow(context.Background(), `SELECT concat_ws('|',
		(SELECT string_agg(row(id, status, amount, refunded_amount, captured_amount, gateway_payment_id, paid_at)::text, ',' ORDER BY id) FROM payments),
		(SELECT string_agg(row(id, status, paid_at)::text, ',' ORDER BY id) FROM orders),
		(SELECT string_agg(row(id, balance, credit_limit)::text, ',' ORDER BY id) FROM customers),
		(SELECT count(*) FROM balance_transactions),
		(SELECT count(*) FROM events),
		(SELECT count(*) FROM audit_log WHERE action <> 'payment.anomaly'))`).Scan(&d))
	return d
}

// A balance payment may take the balance down to exactly minus the credit
// limit; one cent past it is refused with InvalidArgument "insufficient
// balance", and nothing moves: no payment, no ledger row, the order still
// pending, the balance as it was.
func TestBalancePaymentMayReachTheCreditLimitButNotOneCentPast(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	customers := identitypbconnect.NewCustomerAdminServiceClient(http.DefaultClient, e.r.baseURL)
	setLimit := func(limit string) {
		t.Helper()
		res, err := customers.SetCreditLimit(ctx, with(&identitypb.SetCreditLimitRequest{CustomerId: e.c.customerID.String(), CreditLimit: limit}, e.c.admin))
		require.NoError(t, err)
		require.Equal(t, limit, res.Msg.GetCustomer().GetCreditLimit())
	}
	balance := func() string {
		t.Helper()
		c, err := customers.GetCustomer(ctx, with(&identitypb.GetCustomerRequest{Id: e.c.customerID.String()}, e.c.admin))
		require.NoError(t, err)
		return c.Msg.GetCustomer().GetBalance()
	}
	require.Equal(t, "0.00", balance())

	// The order costs 12.30; a limit of 12.29 leaves it one cent short.
	setLimit("12.29")
	orderID := e.order(t)
	before := e.moneyState(t)
	_, err := e.orders.PayWithBalance(ctx, with(&orderpb.PayWithBalanceRequest{OrderId: orderID}, e.c.customer))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "insufficient balance")
	require.Equal(t, before, e.moneyState(t), "a refused balance payment moves nothing")
	require.Equal(t, "0.00", balance())
	require.Equal(t, "pending", e.orderStatus(t, orderID))
	require.Zero(t, e.count(t, `SELECT count(*) FROM payments WHERE order_id = $1`, orderID))

	// At exactly the limit it is paid, and the balance stands at -12.30.
	setLimit("12.30")
	paid, err := e.orders.PayWithBalance(ctx, with(&orderpb.PayWithBalanceRequest{OrderId: orderID}, e.c.customer))
	require.NoError(t, err)
	require.Equal(t, "-12.30", paid.Msg.GetBalance())
	require.Equal(t, "12.30", paid.Msg.GetPayment().GetAmount())
	require.Equal(t, "-12.30", balance())
	e.waitOrderStatus(t, orderID, "active")

	// The next order would take it one order past the limit: refused.
	next := e.order(t)
	before = e.moneyState(t)
	_, err = e.orders.PayWithBalance(ctx, with(&orderpb.PayWithBalanceRequest{OrderId: next}, e.c.customer))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	require.Equal(t, before, e.moneyState(t))
	require.Equal(t, "-12.30", balance())
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}

// A gateway that reports one cent more than the payment (12.31 for 12.30),
// signed: refused with InvalidArgument and recorded as an amount mismatch;
// the payment, the order and the money stay as they were, and the right
// amount still settles it afterwards.
func TestOverpaidCallbackIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	e.fake.DropNotify(true) // the test delivers every notification itself
	orderID := e.order(t)
	p := e.createPayment(t, orderID).GetPayment()
	require.Equal(t, "12.30", p.GetAmount())

	before := e.moneyState(t)
	err := e.callback(signedNotify(p.GetId(), "T-OVER-1", "12.31"))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "amount mismatch: the gateway reports 12.31 for payment "+p.GetId()+" of 12.30 CNY")
	require.Equal(t, before, e.moneyState(t), "an overpayment moves nothing")
	require.Equal(t, "pending", e.getPayment(t, p.GetId()).GetStatus())
	require.Equal(t, "pending", e.orderStatus(t, orderID))
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND entity_id = $1
		AND after->>'kind' = 'amount_mismatch' AND after->>'amount' = '12.31'`, p.GetId()))

	require.NoError(t, e.callback(signedNotify(p.GetId(), "T-OVER-1", "12.30")))
	require.Equal(t, "success", e.getPayment(t, p.GetId()).GetStatus())
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}

// A final order never moves. Cancelling an order fails its pending
// payments, so money that arrives later finds a failed payment
// (TestMoneyCapturedAfterTheOrderClosedIsFoundAndReturnedThroughTheGateway);
// here the payment is still pending on the cancelled order (a cancel made
// before cancelling failed the payments, or by hand), and the order's own
// state is what stops the money: it is captured, to be returned, and the
// order stays cancelled with no order_paid.
func TestMoneyForAPendingPaymentOfACancelledOrderIsCapturedAndTheOrderStaysCancelled(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	e.fake.DropNotify(true) // the test delivers the notification itself
	ctx := context.Background()
	orderID := e.order(t)
	p := e.createPayment(t, orderID).GetPayment()
	_, err := e.r.app.Pool().Exec(ctx, `UPDATE orders SET status = 'cancelled', cancelled_at = now(), cancel_reason = 'admin' WHERE id = $1`, uuid.MustParse(orderID))
	require.NoError(t, err)
	require.Equal(t, "pending", e.getPayment(t, p.GetId()).GetStatus())

	err = e.callback(signedNotify(p.GetId(), "T-LATE-1", "12.30"))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "the payment did not apply: %v", err)
	require.ErrorContains(t, err, "order "+orderID+" is cancelled")
	got := e.getPayment(t, p.GetId())
	require.Equal(t, "failed", got.GetStatus())
	require.Equal(t, "12.30", got.GetCapturedAmount(), "the money is kept as captured, to be returned")
	require.Equal(t, "cancelled", e.orderStatus(t, orderID), "a final order never moves")
	require.Zero(t, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_paid'`, orderID))
	require.Zero(t, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'order.paid' AND entity_id = $1`, orderID))

	// The gateway's repeat is a repeat, and still moves nothing.
	err = e.callback(signedNotify(p.GetId(), "T-LATE-1", "12.30"))
	require.Equal(t, connect.CodeAlreadyExists, connect.CodeOf(err), "%v", err)
	require.Equal(t, "cancelled", e.orderStatus(t, orderID))
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}
