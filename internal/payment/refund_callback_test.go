package payment

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
)

// refundReportMismatch is the refund notification's identity check: every
// way a gateway's report can fail to be about the refund, without a
// database (the over-the-wire cases are in internal/app's
// TestStripeRefundNotificationsCompleteOrFailAPendingRefundOnce).
func TestRefundReportMismatchNamesEveryReportNotAboutTheRefund(t *testing.T) {
	t.Parallel()
	gw, otherGW := uuid.New(), uuid.New()
	pay := store.Payment{ID: uuid.New(), GatewayInterfaceID: &gw, Amount: money.MustParse("12.30"), Currency: "USD"}
	ref := store.Refund{ID: uuid.New(), PaymentID: pay.ID, Amount: money.MustParse("5.00"), Destination: store.RefundToGateway, GatewayRefundID: "re_1"}
	good := callbackRefund{RefundID: ref.ID.String(), Status: refundSucceeded, GatewayRefundID: "re_1", Amount: "5.00", Currency: "USD"}

	for _, tc := range []struct {
		name      string
		ifc       uuid.UUID
		paymentID string
		edit      func(p *store.Payment, r *store.Refund, c *callbackRefund)
		kind      string
	}{
		{name: "the refund as recorded", ifc: gw, paymentID: pay.ID.String()},
		{name: "no payment id, amount or currency said", ifc: gw, edit: func(_ *store.Payment, _ *store.Refund, c *callbackRefund) {
			c.Amount, c.Currency = "", ""
		}},
		{name: "the currency in lower case, the amount as 5", ifc: gw, edit: func(_ *store.Payment, _ *store.Refund, c *callbackRefund) {
			c.Amount, c.Currency = "5", "usd"
		}},
		{name: "no gateway refund id recorded yet", ifc: gw, edit: func(_ *store.Payment, r *store.Refund, c *callbackRefund) {
			r.GatewayRefundID, c.GatewayRefundID = "", "re_9"
		}},
		{name: "another interface's payment", ifc: otherGW, kind: "interface_mismatch"},
		{name: "a balance payment", ifc: gw, edit: func(p *store.Payment, _ *store.Refund, _ *callbackRefund) { p.GatewayInterfaceID = nil }, kind: "interface_mismatch"},
		{name: "a refund to the balance", ifc: gw, edit: func(_ *store.Payment, r *store.Refund, _ *callbackRefund) { r.Destination = store.RefundToBalance }, kind: "interface_mismatch"},
		{name: "another payment", ifc: gw, paymentID: uuid.NewString(), kind: "refund_payment_mismatch"},
		{name: "another currency", ifc: gw, edit: func(_ *store.Payment, _ *store.Refund, c *callbackRefund) { c.Currency = "EUR" }, kind: "currency_mismatch"},
		{name: "one cent more", ifc: gw, edit: func(_ *store.Payment, _ *store.Refund, c *callbackRefund) { c.Amount = "5.01" }, kind: "amount_mismatch"},
		{name: "the payment's amount", ifc: gw, edit: func(_ *store.Payment, _ *store.Refund, c *callbackRefund) { c.Amount = "12.30" }, kind: "amount_mismatch"},
		{name: "an unreadable amount", ifc: gw, edit: func(_ *store.Payment, _ *store.Refund, c *callbackRefund) { c.Amount = "5.0.0" }, kind: "amount_mismatch"},
		{name: "another gateway refund", ifc: gw, edit: func(_ *store.Payment, _ *store.Refund, c *callbackRefund) { c.GatewayRefundID = "re_2" }, kind: "refund_id_mismatch"},
	} {
		p, r, c := pay, ref, good
		if tc.edit != nil {
			tc.edit(&p, &r, &c)
		}
		kind, msg := refundReportMismatch(tc.ifc, tc.paymentID, p, r, &c)
		require.Equal(t, tc.kind, kind, "%s: %s", tc.name, msg)
		if tc.kind != "" {
			require.Contains(t, msg, r.ID.String(), tc.name)
		}
	}
}
