package app_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// Issue 35, finding 5, over the wire: a monthly order is active and its
// renewal invoice issued (test clock); the customer starts a gateway
// payment of the invoice; an admin refunds the order's first payment in
// full: it bought the current period, so the service ends now
// (terminated). The refund cancels the renewal invoice
// and fails its pending payment. The gateway then reports that payment
// paid: before the fix the callback answered HTTP 500, rolled back and was
// retried forever, the money recorded nowhere. Now the first report is
// refused (400: the payment did not apply), its money captured and listed
// to return; the repeat is acknowledged; the books hold.
func TestMoneyPaidIntoARefundedOrdersRenewalInvoiceIsCapturedOverTheWire(t *testing.T) {
	t.Parallel()
	e := startPayments(t, func(c *config.Config) {
		c.Billing.TestClock = true
		c.Events.PollInterval = 100 * time.Millisecond
		c.Events.RetryBase = 20 * time.Millisecond
		c.Events.RetryMax = 50 * time.Millisecond
	})
	ctx := context.Background()
	prod, err := e.orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{Name: "VPS monthly", Price: "10.00", Currency: "CNY", BillingCycle: "monthly"}, e.c.admin))
	require.NoError(t, err)
	placed, err := e.orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: prod.Msg.GetProduct().GetId()}, e.c.customer))
	require.NoError(t, err)
	id := placed.Msg.GetOrder().GetId()
	first := e.createPaymentVia(t, id, e.epayGW).GetPayment()
	require.NoError(t, e.fake.Pay(first.GetId()))
	e.waitSettled(t, first.GetId())
	e.waitOrderStatus(t, id, "active")

	// 1. The renewal invoice is issued (7 days before the period ends).
	got, err := e.orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: id}, e.c.customer))
	require.NoError(t, err)
	end, err := time.Parse(time.RFC3339, got.Msg.GetOrder().GetPaidUntil())
	require.NoError(t, err)
	adv, err := e.orders.AdvanceBillingClock(ctx, with(&orderpb.AdvanceBillingClockRequest{Seconds: int64(time.Until(end.Add(-7*24*time.Hour+time.Hour)) / time.Second)}, e.c.admin))
	require.NoError(t, err)
	require.EqualValues(t, 1, adv.Msg.GetIssued())
	got, err = e.orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: id}, e.c.customer))
	require.NoError(t, err)
	invoiceID := got.Msg.GetPeriods()[1].GetInvoiceId()

	// 2. The customer starts a gateway payment of it.
	started, err := e.payments.CreatePayment(ctx, with(&paymentpb.CreatePaymentRequest{InvoiceId: invoiceID, GatewayInterfaceId: e.epayGW, ReturnUrl: "https://shop.example/done"}, e.c.customer))
	require.NoError(t, err)
	renewal := started.Msg.GetPayment()
	require.Equal(t, id, renewal.GetOrderId(), "the invoice's payment carries the order")
	bankGW := e.addGateway(t, "bank_transfer", "Bank transfer", map[string]any{
		"bank_name": "Bank", "account_name": "Hosting Ltd", "account_number": "1234", "currencies": []any{"CNY"},
	})
	wired, err := e.payments.CreatePayment(ctx, with(&paymentpb.CreatePaymentRequest{InvoiceId: invoiceID, GatewayInterfaceId: bankGW, ReturnUrl: "https://shop.example/done"}, e.c.customer))
	require.NoError(t, err)
	transfer := wired.Msg.GetPayment()

	// 3. An admin refunds the first payment in full: the order ends (the
	// payment bought the current period).
	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: first.GetId(), Reason: "customer left"}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "terminated", e.orderStatus(t, id))

	// 4. The renewal invoice is cancelled with it, its payment failed.
	inv, err := e.orders.GetInvoice(ctx, with(&orderpb.GetInvoiceRequest{Id: invoiceID}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "cancelled", inv.Msg.GetInvoice().GetStatus())
	require.Equal(t, "failed", e.getPayment(t, renewal.GetId()).GetStatus())
	require.Equal(t, "failed", e.getPayment(t, transfer.GetId()).GetStatus())

	// 5. The gateway reports the renewal payment paid, on the route real
	// gateways call.
	notifyURL := e.r.baseURL + "/callbacks/" + e.epayGW + "?" + signedNotify(renewal.GetId(), "2027RENEWAL01", "10.00")
	call := func() (int, string) {
		res, err := http.Get(notifyURL)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}
	status, body := call()
	require.Equal(t, http.StatusBadRequest, status, "refused (the payment did not apply), never 500: %s", body)
	require.Contains(t, body, "captured money to return")
	status, body = call()
	require.Equal(t, http.StatusOK, status, "the repeat is acknowledged, so the gateway stops")
	require.Equal(t, "success", body)

	p := e.getPayment(t, renewal.GetId())
	require.Equal(t, "failed", p.GetStatus())
	require.Equal(t, "10.00", p.GetCapturedAmount())

	// The customer's bank transfer arrives too: the admin's confirmation
	// records it as captured money to return, not Internal.
	confirmed, err := e.admin.ConfirmBankTransfer(ctx, with(&gatewaypb.ConfirmBankTransferRequest{PaymentId: transfer.GetId(), Reference: "STATEMENT-35"}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "failed", confirmed.Msg.GetPayment().GetStatus())
	require.Equal(t, "10.00", confirmed.Msg.GetPayment().GetCapturedAmount())

	list, err := e.payments.ListPayments(ctx, with(&paymentpb.ListPaymentsRequest{Pagination: &paymentpb.PageRequest{}, ToReturn: true}, e.c.admin))
	require.NoError(t, err)
	var toReturn []string
	for _, p := range list.Msg.GetPayments() {
		toReturn = append(toReturn, p.GetId())
	}
	require.ElementsMatch(t, []string{renewal.GetId(), transfer.GetId()}, toReturn, "listed as money to return")
	inv, err = e.orders.GetInvoice(ctx, with(&orderpb.GetInvoiceRequest{Id: invoiceID}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "0.00", inv.Msg.GetInvoice().GetPaidAmount(), "nothing applied to the invoice")
	require.Equal(t, "terminated", e.orderStatus(t, id))

	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
	rep, err := ledger.Verify(ctx, e.r.app.Pool())
	require.NoError(t, err)
	require.True(t, rep.OK(), rep.String())
}
