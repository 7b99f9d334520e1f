package payment_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/payment"
)

// The "payment settled" line says whether the payment paid its order and
// how many other pending payments that failed: the order's bank transfer
// here, failed when the order moved to paid. (The mutation run's sixth
// part: with the order move's error test negated, or the two counts
// subtracted, the line said the order was not paid, or -1 voided.)
func TestThePaymentSettledLineSaysTheOrderWasPaidAndWhatItVoided(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	logs := &lockedBuffer{}
	svc := f.loggedService(logs)
	orderID := f.order(t, "12.30")
	p := f.pay(t, orderID)
	other, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &orderID, GatewayInterfaceID: f.bankGW, ReturnURL: "https://x.example"})
	require.NoError(t, err)

	_, err = svc.HandleCallback(t.Context(), f.callbackOf(notify(p.ID, "T1", "12.30")))
	require.NoError(t, err)
	require.Equal(t, "paid", f.orderStatus(t, orderID))
	require.Equal(t, "failed", f.payment(t, other.ID).Status)
	recs := logs.records(t, "payment settled")
	require.Len(t, recs, 1)
	require.Equal(t, p.ID.String(), recs[0]["payment_id"])
	require.Equal(t, true, recs[0]["order_paid"])
	require.Equal(t, float64(1), recs[0]["voided_payments"])
}
