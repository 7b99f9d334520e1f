package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The API's surprises (docs/api.md, "Surprises, and why"), over the wire as
// a Connect JSON client meets them, on one service: what looks odd is what
// the contract fixes, and a client that trips on it gets an error naming
// the field and changes nothing. (The fourth, GetRenewalOverview on two
// services, is TestAMonthOfRenewalRehearsedWithTheTestClock's.)
func TestAPISurprisesOverTheWire(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	t.Run("CreatePaymentWantsAReturnURLEvenForABankTransfer", func(t *testing.T) {
		t.Parallel()
		createPaymentWantsAReturnURLEvenForABankTransfer(t, e)
	})
	t.Run("ASuccessfulPaymentAnswersCapturedAmountZero", func(t *testing.T) {
		t.Parallel()
		aSuccessfulPaymentAnswersCapturedAmountZero(t, e)
	})
	t.Run("OrderCallsRefuseTheOtherSpellingOfTheOrderID", func(t *testing.T) {
		t.Parallel()
		orderCallsRefuseTheOtherSpellingOfTheOrderID(t, e)
	})
}

// postJSON makes one Connect JSON call and answers its HTTP status and
// decoded body.
func postJSON(t *testing.T, base, path string, cred credential, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	cred(req.Header)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out), "%s answered %s", path, raw)
	return resp.StatusCode, out
}

// CreatePayment lists return_url as required (the contract lists every
// field of its request so), for a bank transfer too, where nobody comes
// back: left out or empty it is InvalidArgument naming return_url, and
// nothing is created; with the shop's page of the order it answers the
// transfer instructions and no payment URL, the URL going nowhere.
func createPaymentWantsAReturnURLEvenForABankTransfer(t *testing.T, e *payBundle) {
	bank := e.addGateway(t, "bank_transfer", "Bank transfer", map[string]any{
		"bank_name": "Example Bank", "account_name": "Rustbill Ltd", "account_number": "DE89 3704", "currencies": []any{"CNY"},
	})
	order := e.order(t)
	const create = "/billing.payment.PaymentService/CreatePayment"

	for _, body := range []string{
		`{"orderId": "` + order + `", "gatewayInterfaceId": "` + bank + `"}`,
		`{"orderId": "` + order + `", "gatewayInterfaceId": "` + bank + `", "returnUrl": ""}`,
	} {
		status, got := postJSON(t, e.r.baseURL, create, e.c.customer, body)
		require.Equal(t, http.StatusBadRequest, status, "%v", got)
		require.Equal(t, "invalid_argument", got["code"])
		require.Equal(t, "validation error: return_url: value is required", got["message"])
	}
	require.Zero(t, e.count(t, `SELECT count(*) FROM payments WHERE order_id = $1`, order), "a refused CreatePayment creates nothing")

	status, got := postJSON(t, e.r.baseURL, create, e.c.customer,
		`{"orderId": "`+order+`", "gatewayInterfaceId": "`+bank+`", "returnUrl": "https://shop.example/orders/`+order+`"}`)
	require.Equal(t, http.StatusOK, status, "%v", got)
	require.NotContains(t, got, "paymentUrl", "a bank transfer has no page to send the payer to")
	require.NotContains(t, got, "qrCode")
	require.Contains(t, got["instructions"], "Quote the reference")
	require.NotContains(t, got["instructions"], "shop.example", "the transfer instructions do not carry the return URL")
	payment := got["payment"].(map[string]any)
	require.Equal(t, "pending", payment["status"])
	require.Equal(t, "0.00", payment["capturedAmount"])
}

// A successful payment answers capturedAmount "0.00": captured_amount is
// money a gateway took for a payment that could no longer apply (to be
// returned), never a success's money, which is amount from paidAt on; and
// a money field is always written with two decimals, never left out.
func aSuccessfulPaymentAnswersCapturedAmountZero(t *testing.T, e *payBundle) {
	created := e.createPayment(t, e.order(t))
	id := created.GetPayment().GetId()
	require.NoError(t, e.callback(signedNotify(id, "T-SURPRISE-1", "12.30")))

	status, got := postJSON(t, e.r.baseURL, "/billing.payment.PaymentService/GetPayment", e.c.customer, `{"id": "`+id+`"}`)
	require.Equal(t, http.StatusOK, status, "%v", got)
	payment := got["payment"].(map[string]any)
	require.Equal(t, "success", payment["status"])
	require.Equal(t, "12.30", payment["amount"])
	require.NotEmpty(t, payment["paidAt"])
	require.Equal(t, "0.00", payment["capturedAmount"], "nothing was captured to return")
	require.NotContains(t, payment, "capturedAt")
	require.Equal(t, "0.00", payment["refundedAmount"])
}

// GetOrder names the order `id` and CancelOrder `order_id`, as the
// contract's GetPayment names a payment `id` and its RefundPayment
// `payment_id`. The other spelling is not an alias: Connect JSON drops a
// field the message does not have, so the call answers InvalidArgument
// naming the field it lacks, and the order is left as it was.
func orderCallsRefuseTheOtherSpellingOfTheOrderID(t *testing.T, e *payBundle) {
	order := e.order(t)
	const cancel, get = "/billing.order.OrderService/CancelOrder", "/billing.order.OrderService/GetOrder"

	status, got := postJSON(t, e.r.baseURL, cancel, e.c.customer, `{"id": "`+order+`"}`)
	require.Equal(t, http.StatusBadRequest, status, "%v", got)
	require.Equal(t, "invalid_argument", got["code"])
	require.Equal(t, "validation error: order_id: value is required", got["message"])
	require.Equal(t, "pending", e.orderStatus(t, order), "a refused CancelOrder cancels nothing")

	status, got = postJSON(t, e.r.baseURL, get, e.c.customer, `{"orderId": "`+order+`"}`)
	require.Equal(t, http.StatusBadRequest, status, "%v", got)
	require.Equal(t, "invalid_argument", got["code"])
	require.Equal(t, "validation error: id: value is required", got["message"])

	status, got = postJSON(t, e.r.baseURL, cancel, e.c.customer, `{"orderId": "`+order+`"}`)
	require.Equal(t, http.StatusOK, status, "%v", got)
	require.Equal(t, "cancelled", got["order"].(map[string]any)["status"])
	status, got = postJSON(t, e.r.baseURL, get, e.c.customer, `{"id": "`+order+`"}`)
	require.Equal(t, http.StatusOK, status, "%v", got)
	require.Equal(t, "cancelled", got["order"].(map[string]any)["status"])
}
