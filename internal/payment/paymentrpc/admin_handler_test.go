package paymentrpc

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
)

// The stored text of a refund is every outcome's (a gateway's success text
// too); on the wire it is the message, and the error only when it failed.
func TestRefundRecordSaysErrorOnlyForAFailedRefund(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status, text, wantError string
	}{
		{store.RefundSucceeded, "退款成功", ""},
		{store.RefundPending, "refund manually: transfer 12.30 CNY back to the payer", ""},
		{store.RefundPending, "outcome unknown: timeout", ""},
		{store.RefundFailed, "insufficient balance", "insufficient balance"},
	} {
		r := refundRecord(store.Refund{Status: tc.status, Error: tc.text}, "CNY")
		require.Equal(t, tc.text, r.GetMessage(), tc.status)
		require.Equal(t, tc.wantError, r.GetError(), tc.status)
	}
}
