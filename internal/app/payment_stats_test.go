package app_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/fakes/epay"
)

// The dashboard's figures over the wire, for payments made the way
// customers and the gateway make them: settled by the gateway's callback,
// refunded in part and in full, failed by a cancelled order, still pending,
// and in two currencies.
func TestGetPaymentStatsSumsUpTodaysRealPayments(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	admin := paymentpbconnect.NewPaymentAdminServiceClient(http.DefaultClient, e.r.baseURL)
	stats := func(since string, cr credential) (*paymentpb.GetPaymentStatsResponse, error) {
		res, err := admin.GetPaymentStats(ctx, with(&paymentpb.GetPaymentStatsRequest{Since: since}, cr))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}

	empty, err := stats("", e.c.admin)
	require.NoError(t, err)
	require.Zero(t, empty.GetTotal())
	require.Nil(t, empty.SuccessRate, "no rate while nothing is decided")
	start := time.Now().UTC()
	require.Equal(t, time.Date(start.Year(), start.Month(), start.Day(), 0, 0, 0, 0, time.UTC).Format(time.RFC3339), empty.GetSince())

	paid := func(orderID string) string {
		id := e.createPayment(t, orderID).GetPayment().GetId()
		require.NoError(t, e.fake.Pay(id))
		e.waitSettled(t, id)
		return id
	}
	refund := func(id, amount string) {
		_, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: id, Amount: amount}, e.c.admin))
		require.NoError(t, err)
	}
	paid(e.order(t))                 // success, 12.30
	refund(paid(e.order(t)), "5.00") // success, 5.00 refunded
	refund(paid(e.order(t)), "")     // refunded, 12.30
	e.createPayment(t, e.order(t))   // pending
	failedOrder := e.order(t)        // failed: its order is cancelled
	e.createPayment(t, failedOrder)  //
	_, err = e.orders.CancelOrder(ctx, with(&orderpb.CancelOrderRequest{OrderId: failedOrder}, e.c.customer))
	require.NoError(t, err)
	usd, err := e.orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{Name: "VPS (USD)", Price: "7.25", Currency: "USD"}, e.c.admin))
	require.NoError(t, err)
	usdOrder, err := e.orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: usd.Msg.GetProduct().GetId()}, e.c.customer))
	require.NoError(t, err)
	dollars := e.createPaymentVia(t, usdOrder.Msg.GetOrder().GetId(), e.dollarGateway(t)).GetPayment().GetId()
	require.NoError(t, e.fake.Pay(dollars))
	e.waitSettled(t, dollars) // success, 7.25 USD

	got, err := stats("", e.c.admin)
	require.NoError(t, err)
	require.EqualValues(t, 6, got.GetTotal())
	require.EqualValues(t, 1, got.GetPending())
	require.EqualValues(t, 3, got.GetSuccess())
	require.EqualValues(t, 1, got.GetRefunded())
	require.EqualValues(t, 1, got.GetFailed())
	require.NotNil(t, got.SuccessRate)
	require.InDelta(t, 0.8, got.GetSuccessRate(), 1e-9, "4 of 5 decided payments succeeded")
	require.EqualValues(t, 1, got.GetPendingNow())
	require.Len(t, got.GetSucceeded(), 2)
	cny, usdTotal := got.GetSucceeded()[0], got.GetSucceeded()[1]
	require.Equal(t, "CNY", cny.GetCurrency())
	require.EqualValues(t, 3, cny.GetPayments())
	require.Equal(t, "36.90", cny.GetAmount())
	require.Equal(t, "17.30", cny.GetRefundedAmount())
	require.Equal(t, "USD", usdTotal.GetCurrency())
	require.EqualValues(t, 1, usdTotal.GetPayments())
	require.Equal(t, "7.25", usdTotal.GetAmount())
	require.Equal(t, "0.00", usdTotal.GetRefundedAmount())
	asOf, err := time.Parse(time.RFC3339Nano, got.GetAsOf())
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), asOf, time.Minute)
	require.Zero(t, got.GetRefundsPending(), "every refund so far succeeded")
	require.Empty(t, got.GetOldestPendingRefundAt())

	// A refund whose gateway answer is lost stays pending for an admin: the
	// dashboard counts it and says since when, and nothing else moves.
	e.fake.InjectFault(epay.Fault{Path: "/api.php", Act: "refund", Status: http.StatusBadGateway, Times: 1})
	lost := paid(e.order(t))
	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: lost, Amount: "2.00"}, e.c.admin))
	require.Equal(t, connect.CodeInternal, connect.CodeOf(err), "%v", err)
	refunds, err := admin.ListRefunds(ctx, with(&paymentpb.ListRefundsRequest{PaymentId: lost}, e.c.admin))
	require.NoError(t, err)
	require.Len(t, refunds.Msg.GetRefunds(), 1)
	require.Equal(t, "pending", refunds.Msg.GetRefunds()[0].GetStatus())
	got, err = stats("", e.c.admin)
	require.NoError(t, err)
	require.EqualValues(t, 1, got.GetRefundsPending())
	require.Equal(t, refunds.Msg.GetRefunds()[0].GetCreatedAt(), got.GetOldestPendingRefundAt())
	require.EqualValues(t, 7, got.GetTotal())
	require.EqualValues(t, 4, got.GetSuccess())

	// A window that starts after everything: nothing in it, but what is
	// pending now (a payment, a refund) is still pending.
	later, err := stats(time.Now().Add(-time.Millisecond).Format(time.RFC3339Nano), e.c.admin)
	require.NoError(t, err)
	require.Zero(t, later.GetTotal())
	require.EqualValues(t, 1, later.GetPendingNow())
	require.EqualValues(t, 1, later.GetRefundsPending())
	// Another offset means the same moment.
	sameStart, err := stats(start.Add(-time.Hour).In(time.FixedZone("UTC+8", 8*3600)).Format(time.RFC3339Nano), e.c.admin)
	require.NoError(t, err)
	require.EqualValues(t, 7, sameStart.GetTotal())

	// Bad input and bad callers.
	for since, want := range map[string]string{
		"yesterday":  "is not an RFC 3339 time",
		"2026-05-01": "is not an RFC 3339 time",
		time.Now().Add(time.Hour).Format(time.RFC3339):    "in the future",
		time.Now().AddDate(-2, 0, 0).Format(time.RFC3339): "at most 366 days back",
	} {
		_, err := stats(since, e.c.admin)
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%s: %v", since, err)
		require.ErrorContains(t, err, want)
	}
	_, err = stats("", e.c.customer)
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))
	_, err = stats("", e.c.key)
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))
	_, err = stats("", nobody)
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err))
}
