package payment_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
)

func TestEpayNotifyOverHTTPPaysTheOrderOnceAndIsAcknowledged(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	orderID := f.order(t, "12.30")
	p := f.pay(t, orderID)

	require.NoError(t, f.fake.Pay(p.ID.String()))
	eventually(t, "the notify is acknowledged", func() bool {
		ns := f.fake.Notifications()
		return len(ns) > 0 && ns[len(ns)-1].Acked
	})
	n := f.fake.Notifications()[0]
	require.Equal(t, http.MethodGet, n.Method)
	require.Equal(t, "success", n.Body)

	paid := f.payment(t, p.ID)
	require.Equal(t, "success", paid.Status)
	o, _ := f.fake.Order(p.ID.String())
	require.Equal(t, o.TradeNo, paid.GatewayPaymentID)
	require.NotNil(t, paid.PaidAt)
	require.Nil(t, paid.NextReconcileAt, "a settled payment is not reconciled")
	require.Equal(t, "paid", f.orderStatus(t, orderID))

	events, err := store.Q(f.pool).ListOrderEvents(context.Background(), orderID)
	require.NoError(t, err)
	require.Len(t, events, 1)
	require.Equal(t, "order_paid", events[0].EventType)
	var payload order.OrderPaidPayload
	require.NoError(t, json.Unmarshal(events[0].Payload, &payload))
	require.Equal(t, order.OrderPaidPayload{OrderID: orderID, PaymentID: &p.ID, Amount: p.Amount, Currency: "CNY", Method: "gateway"}, payload)
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.success' AND actor_kind = 'gateway' AND actor_id = $1`, f.epayGW.String()))
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'order.paid' AND entity_id = $1`, orderID.String()))

	// The gateway sends it again (a new round): acknowledged again, nothing changes.
	require.NoError(t, f.fake.Renotify(p.ID.String()))
	eventually(t, "the repeat is acknowledged", func() bool {
		ns := f.fake.Notifications()
		return len(ns) >= 2 && ns[len(ns)-1].Acked
	})
	require.Equal(t, 1, f.orderPaidEvents(t, orderID))
	require.Equal(t, paid.UpdatedAt, f.payment(t, p.ID).UpdatedAt)
	testfixture.CheckMoneyInvariants(t, f.pool)
}

func TestFiftyConcurrentDeliveriesOfOneCallbackApplyExactlyOnce(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	orderID := f.order(t, "88.80")
	p := f.pay(t, orderID)
	payload := notify(p.ID, "2026010100000000001", "88.8")

	const n = 50
	codes := make([]connect.Code, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, err := f.client.HandleCallback(context.Background(), connect.NewRequest(&paymentpb.PaymentCallbackRequest{
				GatewayInterfaceId: f.epayGW.String(), Payload: payload,
			}))
			codes[i] = connect.CodeOf(err)
			if err == nil {
				codes[i] = 0
			}
		})
	}
	close(start)
	wg.Wait()
	var ok, dup int
	for _, c := range codes {
		switch c {
		case 0:
			ok++
		case connect.CodeAlreadyExists:
			dup++
		default:
			t.Fatalf("unexpected code %v", c)
		}
	}
	require.Equal(t, 1, ok, "exactly one delivery applies")
	require.Equal(t, n-1, dup, "the others are duplicates")
	require.Equal(t, 1, f.orderPaidEvents(t, orderID))
	require.Equal(t, "paid", f.orderStatus(t, orderID))
	got := f.payment(t, p.ID)
	require.Equal(t, "success", got.Status)
	require.Equal(t, "2026010100000000001", got.GatewayPaymentID)
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.success' AND entity_id = $1`, p.ID.String()))
	testfixture.CheckMoneyInvariants(t, f.pool)
}

func TestCallbackAmountIsComparedAsADecimal(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	p := f.pay(t, f.order(t, "1.00"))
	res, err := f.svc.HandleCallback(context.Background(), f.callbackOf(notify(p.ID, "T1", "1")))
	require.NoError(t, err, `"1" is 1.00`)
	require.True(t, res.Applied)
	require.Equal(t, "success", res.Ack)

	res, err = f.svc.HandleCallback(context.Background(), f.callbackOf(notify(p.ID, "T1", "1.0")))
	require.NoError(t, err)
	require.True(t, res.Duplicate, "the same callback with the amount written otherwise is still the same")
}

func TestCallbackRefusals(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	ctx := context.Background()
	orderID := f.order(t, "20.00")
	p := f.pay(t, orderID)

	t.Run("bad signature changes nothing", func(t *testing.T) {
		tampered := strings.Replace(notify(p.ID, "T1", "20.00"), "money=20.00", "money=0.01", 1)
		_, err := f.svc.HandleCallback(ctx, f.callbackOf(tampered))
		require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
		require.Contains(t, err.Error(), "signature verification failed: bad signature")
		require.Equal(t, "pending", f.payment(t, p.ID).Status)
		require.Zero(t, f.anomalies(t, p.ID), "a forgery is not an anomaly of the payment")
	})
	t.Run("unknown payment", func(t *testing.T) {
		_, err := f.svc.HandleCallback(ctx, f.callbackOf(notify(uuid.New(), "T1", "20.00")))
		require.True(t, apperr.Is(err, apperr.NotFound), "%v", err)
		v := url.Values{"pid": {"1001"}, "trade_no": {"T"}, "out_trade_no": {"not-a-payment"}, "money": {"1"}, "trade_status": {"TRADE_SUCCESS"}}
		_, err = f.svc.HandleCallback(ctx, f.callbackOf(signed(v)))
		require.True(t, apperr.Is(err, apperr.NotFound), "%v", err)
	})
	t.Run("unknown interface", func(t *testing.T) {
		_, err := f.svc.HandleCallback(ctx, payment.Callback{GatewayInterfaceID: uuid.New(), Method: "GET", Payload: notify(p.ID, "T1", "20.00")})
		require.True(t, apperr.Is(err, apperr.NotFound), "%v", err)
	})
	t.Run("amount mismatch is recorded, nothing else changes", func(t *testing.T) {
		for range 3 { // the gateway's retries are recorded once
			_, err := f.svc.HandleCallback(ctx, f.callbackOf(notify(p.ID, "T1", "19.99")))
			require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
			require.Contains(t, err.Error(), "amount mismatch")
		}
		require.Equal(t, "pending", f.payment(t, p.ID).Status)
		require.Equal(t, 1, f.anomalies(t, p.ID))
		require.Equal(t, "pending", f.orderStatus(t, orderID))
	})
	t.Run("a garbage amount", func(t *testing.T) {
		_, err := f.svc.HandleCallback(ctx, f.callbackOf(notify(p.ID, "T1", "1e3")))
		require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
		require.Contains(t, err.Error(), "unreadable amount")
	})
	t.Run("a payment of another interface", func(t *testing.T) {
		other := testfixture.GatewayInterface(t, f.pool, "epay")
		gw, err := f.gws.Get(ctx, f.epayGW)
		require.NoError(t, err)
		gw.InterfaceID = other
		f.gws.set(gw)
		_, err = f.svc.HandleCallback(ctx, payment.Callback{GatewayInterfaceID: other, Method: "GET", Payload: notify(p.ID, "T1", "20.00")})
		require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
		require.Contains(t, err.Error(), "does not belong")
		require.Equal(t, "pending", f.payment(t, p.ID).Status)
	})
	t.Run("a notification that is not a success changes nothing", func(t *testing.T) {
		v := url.Values{"pid": {"1001"}, "trade_no": {"T1"}, "out_trade_no": {p.ID.String()}, "money": {"20.00"}, "trade_status": {"WAIT_BUYER_PAY"}}
		res, err := f.svc.HandleCallback(ctx, f.callbackOf(signed(v)))
		require.NoError(t, err)
		require.False(t, res.Applied)
		require.Equal(t, "pending", res.Payment.Status)
	})
	t.Run("order number mismatch after settling", func(t *testing.T) {
		res, err := f.svc.HandleCallback(ctx, f.callbackOf(notify(p.ID, "T1", "20.00")))
		require.NoError(t, err)
		require.True(t, res.Applied)
		_, err = f.svc.HandleCallback(ctx, f.callbackOf(notify(p.ID, "T2", "20.00")))
		require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
		require.Contains(t, err.Error(), "order number mismatch")
		require.Equal(t, "T1", f.payment(t, p.ID).GatewayPaymentID)
		require.Equal(t, 3, f.anomalies(t, p.ID), "the amount and interface mismatches before, and this one")
		res, err = f.svc.HandleCallback(ctx, f.callbackOf(notify(p.ID, "T1", "20.00")))
		require.NoError(t, err)
		require.True(t, res.Duplicate)
	})
	t.Run("a gateway order number already used by another payment", func(t *testing.T) {
		q := f.pay(t, f.order(t, "20.00"))
		_, err := f.svc.HandleCallback(ctx, f.callbackOf(notify(q.ID, "T1", "20.00")))
		require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
		require.Contains(t, err.Error(), "order number mismatch")
		require.Equal(t, "pending", f.payment(t, q.ID).Status)
	})
	testfixture.CheckMoneyInvariants(t, f.pool)
}

// signed signs v with the merchant key.
func signed(v url.Values) string {
	v.Set("type", "alipay")
	v.Set("name", "VPS")
	return notifyValues(v)
}

func TestLateSuccessForAFailedPaymentIsCapturedOnceAndNeverLeavesFailed(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	ctx := context.Background()
	orderID := f.order(t, "15.00")
	p := f.pay(t, orderID)
	orders := order.NewService(f.pool, []string{"CNY"}, nil, nil, nil)
	_, err := orders.CancelOrder(f.asAlice, orderID)
	require.NoError(t, err)
	require.Equal(t, "failed", f.payment(t, p.ID).Status, "cancelling the order failed its payment")

	// The first report is refused (the payment did not apply) and its money
	// recorded as captured; the gateway's repeats are acknowledged.
	_, err = f.svc.HandleCallback(ctx, f.callbackOf(notify(p.ID, "T9", "15.00")))
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.Contains(t, err.Error(), "late success")
	require.Contains(t, err.Error(), "captured money to return")
	for range 2 {
		res, err := f.svc.HandleCallback(ctx, f.callbackOf(notify(p.ID, "T9", "15.00")))
		require.NoError(t, err)
		require.True(t, res.Duplicate)
	}
	// Another gateway order for the same payment is not a second capture.
	_, err = f.svc.HandleCallback(ctx, f.callbackOf(notify(p.ID, "T10", "15.00")))
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.Contains(t, err.Error(), "order number mismatch")

	got := f.payment(t, p.ID)
	require.Equal(t, "failed", got.Status, "a final state is never left")
	require.Equal(t, "15.00", got.CapturedAmount.String())
	require.Equal(t, "T9", got.GatewayPaymentID)
	require.NotNil(t, got.CapturedAt)
	require.Nil(t, got.NextReconcileAt, "nothing more to ask the gateway")
	require.Equal(t, "cancelled", f.orderStatus(t, orderID))
	require.Equal(t, 2, f.anomalies(t, p.ID), "the late success and the other order number")
	require.Zero(t, f.orderPaidEvents(t, orderID))
	testfixture.CheckMoneyInvariants(t, f.pool)
}

func TestSettlingAnOrderFailsItsOtherPendingPayments(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	orderID := f.order(t, "15.00")
	byEpay := f.pay(t, orderID)
	byBank, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &orderID, GatewayInterfaceID: f.bankGW, ReturnURL: "https://x.example"})
	require.NoError(t, err)

	_, err = f.svc.HandleCallback(context.Background(), f.callbackOf(notify(byEpay.ID, "T1", "15.00")))
	require.NoError(t, err)
	bank := f.payment(t, byBank.ID)
	require.Equal(t, "failed", bank.Status)
	require.Contains(t, bank.FailureReason, byEpay.ID.String())

	// The customer wires the money anyway: the admin cannot confirm it
	// into the paid order; it is recorded as captured money to return.
	confirmed, err := f.svc.ConfirmBankTransfer(f.admin, byBank.ID, "STATEMENT-1")
	require.NoError(t, err)
	require.Equal(t, "failed", confirmed.Status)
	require.Equal(t, "15.00", confirmed.CapturedAmount.String())
	require.Equal(t, 1, f.anomalies(t, byBank.ID))
	_, err = f.svc.ConfirmBankTransfer(f.admin, byBank.ID, "STATEMENT-1")
	require.True(t, apperr.Is(err, apperr.AlreadyExists), "%v", err)
	require.Equal(t, 1, f.orderPaidEvents(t, orderID))
	testfixture.CheckMoneyInvariants(t, f.pool)
}

func TestInvoicePaymentPaysTheInvoiceAndThenItsOrder(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	ctx := context.Background()
	orderID := f.order(t, "40.00")
	invoiceID := f.invoice(t, &orderID, "40.00")
	p, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{InvoiceID: &invoiceID, GatewayInterfaceID: f.epayGW, ReturnURL: "https://x.example"})
	require.NoError(t, err)
	_, err = f.svc.HandleCallback(ctx, f.callbackOf(notify(p.ID, "T1", "40")))
	require.NoError(t, err)

	inv, err := store.Q(f.pool).GetInvoice(ctx, invoiceID)
	require.NoError(t, err)
	require.Equal(t, "paid", inv.Status)
	require.Equal(t, "40.00", inv.PaidAmount.String())
	require.NotNil(t, inv.PaidAt)
	require.Equal(t, "paid", f.orderStatus(t, orderID))
	require.Equal(t, 1, f.orderPaidEvents(t, orderID))

	// An extras invoice of the now paid order can still be paid; it does
	// not touch the order.
	extras := f.invoice(t, &orderID, "5.00")
	q, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &orderID, InvoiceID: &extras, GatewayInterfaceID: f.epayGW, ReturnURL: "https://x.example"})
	require.NoError(t, err)
	_, err = f.svc.HandleCallback(ctx, f.callbackOf(notify(q.ID, "T2", "5.00")))
	require.NoError(t, err)
	require.Equal(t, "paid", f.orderStatus(t, orderID))
	require.Equal(t, 1, f.orderPaidEvents(t, orderID))
	testfixture.CheckMoneyInvariants(t, f.pool)
}

func TestCallbackRouteAnswersInTheGatewaysTerms(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	orderID := f.order(t, "9.90")
	p := f.pay(t, orderID)
	base := f.callback.URL + "/callbacks/" + f.epayGW.String()
	get := func(u string) (int, string) {
		resp, err := http.Get(u)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	post := func(u, ct, body string) (int, string) {
		resp, err := http.Post(u, ct, strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	code, body := get(base + "?" + strings.Replace(notify(p.ID, "T1", "9.90"), "money=9.90", "money=0.01", 1))
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, "signature verification failed")
	require.NotContains(t, body, "success")

	code, _ = get(base + "?" + notify(uuid.New(), "T1", "9.90"))
	require.Equal(t, http.StatusNotFound, code)
	code, _ = get(f.callback.URL + "/callbacks/not-a-uuid?" + notify(p.ID, "T1", "9.90"))
	require.Equal(t, http.StatusNotFound, code)

	code, body = post(base, "application/x-www-form-urlencoded", notify(p.ID, "T1", "9.90"))
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "success", body)
	require.Equal(t, "paid", f.orderStatus(t, orderID))

	code, body = get(base + "?" + notify(p.ID, "T1", "9.90"))
	require.Equal(t, http.StatusOK, code, "a repeat is acknowledged so the gateway stops")
	require.Equal(t, "success", body)

	code, _ = get(base + "?" + notify(p.ID, "T2", "9.90"))
	require.Equal(t, http.StatusBadRequest, code, "another gateway order for a settled payment")

	code, _ = post(base, "application/json", `{"a":1}`)
	require.Equal(t, http.StatusBadRequest, code, "the plugin refuses the content type")
	code, _ = post(base, "application/x-www-form-urlencoded", strings.Repeat("a", payment.MaxCallbackBytes+1))
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	req, err := http.NewRequest(http.MethodPut, base, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	require.Equal(t, 1, f.orderPaidEvents(t, orderID))
}
