package payment_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// A USD order through epay (CNY only): 100.00 USD would be charged as
// 100.00 CNY. Refused before the gateway is asked, with both currencies
// named; nothing is written.
func TestCreatePaymentInACurrencyTheInterfaceDoesNotTakeIsInvalidArgument(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	usd := testfixture.OrderIn(t, f.pool, f.alice, "100.00", "USD")

	_, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &usd, GatewayInterfaceID: f.epayGW, ReturnURL: "https://shop.example/done"})
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.ErrorContains(t, err, "does not take USD (it takes CNY)")
	require.Empty(t, f.fake.Orders(), "the gateway was never asked")
	require.Zero(t, f.count(t, `SELECT count(*) FROM payments WHERE order_id = $1`, usd))
	require.Zero(t, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.create'`))

	// An interface that declares nothing takes nothing.
	gw, err := f.gws.Get(context.Background(), f.epayGW)
	require.NoError(t, err)
	gw.Currencies = nil
	f.gws.set(gw)
	cny := f.order(t, "10.00")
	_, err = f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &cny, GatewayInterfaceID: f.epayGW, ReturnURL: "https://shop.example/done"})
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.ErrorContains(t, err, "does not take CNY (it takes no currency)")

	// Once the interface takes USD (a bank account in dollars), it works.
	bank, err := f.gws.Get(context.Background(), f.bankGW)
	require.NoError(t, err)
	bank.Currencies = []string{"EUR", "USD"}
	bank.ConfigJSON = mustJSON(map[string]any{"bank_name": "Test Bank", "account_name": "Rustbill Ltd", "account_number": "US00 1234", "currencies": []string{"EUR", "USD"}})
	f.gws.set(bank)
	p, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &usd, GatewayInterfaceID: f.bankGW, ReturnURL: "https://shop.example/done"})
	require.NoError(t, err)
	require.Equal(t, "USD", p.Currency)
	require.Contains(t, p.Instructions, "100.00 USD")
}

func TestCurrencyDueIsTheOrdersOrInvoicesForItsOwnerOnly(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	usd := testfixture.OrderIn(t, f.pool, f.alice, "7.25", "USD")
	cur, err := f.svc.CurrencyDue(f.asAlice, &usd, nil)
	require.NoError(t, err)
	require.Equal(t, "USD", cur)
	cur, err = f.svc.CurrencyDue(f.admin, &usd, nil)
	require.NoError(t, err)
	require.Equal(t, "USD", cur, "admins may look at anyone's")

	_, err = f.svc.CurrencyDue(f.asBob, &usd, nil)
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.ErrorContains(t, err, "does not exist", "another customer's order is no order at all")
	missing := uuid.New()
	_, err = f.svc.CurrencyDue(f.asAlice, &missing, nil)
	require.ErrorContains(t, err, "does not exist")
	_, err = f.svc.CurrencyDue(f.asAlice, nil, nil)
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)

	inv := f.invoice(t, nil, "30.00")
	cur, err = f.svc.CurrencyDue(f.asAlice, nil, &inv)
	require.NoError(t, err)
	require.Equal(t, "CNY", cur)
	_, err = f.svc.CurrencyDue(f.asBob, nil, &inv)
	require.ErrorContains(t, err, "does not exist")
	_, err = f.svc.CurrencyDue(context.Background(), &usd, nil)
	require.True(t, apperr.Is(err, apperr.Unauthenticated), "%v", err)
}

// A gateway whose answers carry a currency: one that differs from the
// payment's is refused and recorded like an amount mismatch, from a
// callback and from a status query alike; the same report in the payment's
// currency (in any case) settles it.
func TestReportedCurrencyMustBeThePayments(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	orderID := f.order(t, "20.00")
	p := f.pay(t, orderID)
	gw, err := f.gws.Get(context.Background(), f.epayGW)
	require.NoError(t, err)
	answer := ""
	gw.Plugin = callerFunc(func(string) (string, error) { return answer, nil })
	f.gws.set(gw)

	answer = `{"valid":true,"payment_id":"` + p.ID.String() + `","amount":"20.00","currency":"USD","status":"success","gateway_payment_id":"T1","ack":"success"}`
	for range 2 {
		_, err = f.svc.HandleCallback(context.Background(), f.callbackOf("x=1"))
		require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
		require.ErrorContains(t, err, "currency mismatch: the gateway reports 20.00 USD for payment "+p.ID.String()+" of 20.00 CNY")
	}
	require.Equal(t, "pending", f.payment(t, p.ID).Status)
	require.Equal(t, "pending", f.orderStatus(t, orderID))
	require.Equal(t, 1, f.anomalies(t, p.ID), "recorded once per distinct report")
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND entity_id = $1
		AND after->>'kind' = 'currency_mismatch' AND after->>'currency' = 'USD' AND after->>'source' = 'callback'`, p.ID.String()))

	answer = `{"status":"success","amount":"20.00","currency":"EUR","gateway_payment_id":"T1","paid_at":""}`
	_, err = f.svc.QueryPaymentStatus(f.admin, p.ID)
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.ErrorContains(t, err, "currency mismatch")
	require.Equal(t, 2, f.anomalies(t, p.ID))
	require.Equal(t, "pending", f.payment(t, p.ID).Status)

	answer = `{"valid":true,"payment_id":"` + p.ID.String() + `","amount":"20.00","currency":" cny","status":"success","gateway_payment_id":"T1","ack":"success"}`
	res, err := f.svc.HandleCallback(context.Background(), f.callbackOf("x=1"))
	require.NoError(t, err)
	require.True(t, res.Applied)
	require.Equal(t, "paid", f.orderStatus(t, orderID))
}

// A USD payment made through epay before currencies were checked: epay
// reports no currency, but its figure is yuan. Its success is refused and
// recorded, a failure still fails it, and a refund through epay is refused
// before anything is reserved or sent.
func TestPaymentMadeBeforeCurrenciesWereCheckedIsNeitherSettledNorRefundedThroughTheWrongGateway(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	legacy := testfixture.InsertPayment(t, f.pool, testfixture.Payment{Customer: f.alice, Gateway: f.epayGW, Amount: "100.00", Currency: "USD"})

	_, err := f.svc.HandleCallback(context.Background(), payment.Callback{GatewayInterfaceID: f.epayGW, Method: http.MethodGet, Payload: notify(legacy, "T100", "100.00")})
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.ErrorContains(t, err, "currency mismatch: payment "+legacy.String()+" is of 100.00 USD, but its gateway interface takes CNY")
	require.Equal(t, "pending", f.payment(t, legacy).Status)
	require.Equal(t, 1, f.anomalies(t, legacy))

	paid := testfixture.InsertPayment(t, f.pool, testfixture.Payment{Customer: f.alice, Gateway: f.epayGW, Amount: "100.00", Currency: "USD", Status: "success"})
	_, err = f.svc.RefundPayment(f.admin, paid, "", "customer asked", "")
	require.True(t, apperr.Is(err, apperr.FailedPrecondition), "%v", err)
	require.ErrorContains(t, err, "is in USD, but gateway interface "+f.epayGW.String()+" (epay) takes CNY")
	require.Empty(t, f.refunds(t, paid), "nothing reserved")
	require.Empty(t, f.fake.Refunds(), "nothing sent")
	require.Equal(t, "success", f.payment(t, paid).Status)

	// No money arrived: the gateway's failure fails the pending one.
	gw, err := f.gws.Get(context.Background(), f.epayGW)
	require.NoError(t, err)
	gw.Plugin = callerFunc(func(string) (string, error) { return `{"status":"failed","amount":"100.00"}`, nil })
	f.gws.set(gw)
	failed, err := f.svc.QueryPaymentStatus(f.admin, legacy)
	require.NoError(t, err)
	require.Equal(t, "failed", failed.Status)
}
