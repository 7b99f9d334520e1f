package payment_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// PostgreSQL's text and jsonb cannot hold a NUL. A notification whose
// gateway order or transaction number decodes to one (%00), even signed, is
// an unreadable report — 400 and InvalidArgument, nothing changed — never
// a failed INSERT answering 500; the refusal that names the bad parameter
// is no 500 either.
func TestNULInACallbackIsRefusedNeverAnInternalError(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	orderID := f.order(t, "9.90")
	p := f.pay(t, orderID)
	base := f.callback.URL + "/callbacks/" + f.epayGW.String()
	get := func(query string) (int, string) {
		resp, err := http.Get(base + "?" + query)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	for name, query := range map[string]string{
		"signed, NUL in trade_no":     notify(p.ID, "T\x001", "9.90"),
		"signed, NUL in api_trade_no": notify(p.ID, "T1", "9.90") + "&api_trade_no=%00",
		"unsigned, NUL in a name":     "a%00=1&a%00=2&sign=x",
		"unsigned, NUL in the sign":   "pid=1001&sign=%00",
		"unsigned, NUL in money":      notify(p.ID, "T1", "9.90\x00"),
	} {
		code, body := get(query)
		require.Equal(t, http.StatusBadRequest, code, "%s: %q", name, body)
		_, err := f.svc.HandleCallback(context.Background(), f.callbackOf(query))
		require.True(t, apperr.Is(err, apperr.InvalidArgument), "%s: %v", name, err)
	}
	require.Equal(t, "pending", f.payment(t, p.ID).Status)
	require.Equal(t, "pending", f.orderStatus(t, orderID))

	// The genuine notification still settles it.
	code, body := get(notify(p.ID, "T1", "9.90"))
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "T1", f.payment(t, p.ID).GatewayPaymentID)
}

// A gateway's answer to a status query with a NUL in its ids, wherever it
// is, is refused as unreadable, like an unreadable amount: the payment
// stays pending. (settle's check `IndexByte(...) >= 0` as `> 0` let a NUL
// first through to PostgreSQL, which refused it as no InvalidArgument.)
func TestNULInAStatusQueryAnswerIsRefused(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	p := testfixture.InsertPayment(t, f.pool, testfixture.Payment{Customer: f.alice, Gateway: f.epayGW, Amount: "12.30"})
	gw, err := f.gws.Get(context.Background(), f.epayGW)
	require.NoError(t, err)
	for _, answer := range []string{
		`{"status":"success","amount":"12.30","gateway_payment_id":"G\u00001"}`,
		`{"status":"success","amount":"12.30","gateway_payment_id":"\u0000G1"}`, // a NUL first
		`{"status":"success","amount":"12.30","gateway_payment_id":"G1","gateway_tx_id":"\u0000"}`,
	} {
		gw.Plugin = callerFunc(func(string) (string, error) { return answer, nil })
		f.gws.set(gw)
		_, err := f.svc.QueryPaymentStatus(f.admin, p)
		require.True(t, apperr.Is(err, apperr.InvalidArgument), "%s: %v", answer, err)
		require.Contains(t, err.Error(), "unreadable")
		require.Equal(t, "pending", f.payment(t, p).Status)
	}
}

// Free text a plugin returns (a refund's message) keeps its content with
// each NUL shown as "?", as clip does with invalid UTF-8.
func TestNULInARefundMessageIsStoredReplaced(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	p := f.paidAtTheGateway(t, "30.00")
	gw, err := f.gws.Get(context.Background(), f.epayGW)
	require.NoError(t, err)
	gw.Plugin = callerFunc(func(string) (string, error) {
		return `{"status":"failed","gateway_refund_id":"R\u00001","message":"refused\u0000 by the bank"}`, nil
	})
	f.gws.set(gw)
	_, err = f.svc.RefundPayment(f.admin, p.ID, "10.00", "", "")
	require.True(t, apperr.Is(err, apperr.Internal), "the contract's code for a refund the gateway refused: %v", err)
	require.Contains(t, err.Error(), "gateway refund failed")
	rs := f.refunds(t, p.ID)
	require.Len(t, rs, 1)
	require.Equal(t, store.RefundFailed, rs[0].Status)
	require.Contains(t, rs[0].Error, "refused? by the bank")
	require.False(t, strings.ContainsRune(rs[0].Error, 0))
}
