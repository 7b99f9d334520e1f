package payment_test

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/payment"
)

// The payment package mirrors the order moves it makes (it cannot import
// internal/order, which imports it). This pins the copy to the original.
func TestOrderRulesAgreeWithTheOrderPackage(t *testing.T) {
	t.Parallel()
	for _, from := range order.Statuses {
		for _, to := range []order.Status{order.StatusPaid, order.StatusRefunded} {
			require.Equal(t, order.CanTransition(from, to), payment.OrderMayMove(string(from), string(to)), "%s → %s", from, to)
		}
	}
	for _, st := range order.InvoiceStatuses {
		require.Equal(t, order.CanTransitionInvoice(st, order.InvoicePaid), payment.InvoiceMayBePaid(string(st)), "invoice %s → paid", st)
	}

	id, pay := uuid.New(), uuid.New()
	amount := money.MustParse("12.30")
	mine, err := json.Marshal(payment.OrderPaidPayload(payment.OrderPaidFields{OrderID: id, PaymentID: &pay, Amount: amount, Currency: "CNY", Method: order.MethodGateway}))
	require.NoError(t, err)
	theirs, err := json.Marshal(order.OrderPaidPayload{OrderID: id, PaymentID: &pay, Amount: amount, Currency: "CNY", Method: order.MethodGateway})
	require.NoError(t, err)
	require.JSONEq(t, string(theirs), string(mine))
	require.Equal(t, order.EventOrderPaid, "order_paid")
}
