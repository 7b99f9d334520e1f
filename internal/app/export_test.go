package app_test

import (
	"context"
	"encoding/csv"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/testkit"
)

// exportBundle is what TestExports made: payments in each status today, one
// two days ago, and refunds whose reasons a spreadsheet would run.
type exportBundle struct {
	e                          *payBundle
	paid, pending, failed, old *paymentpb.PaymentRecord
	refunds                    []*paymentpb.Refund
	readKey, operateKey        credential
	today, yesterday, zone     string
}

func makeExportWorld(t *testing.T) *exportBundle {
	e := startPayments(t)
	ctx := context.Background()
	w := &exportBundle{e: e, zone: "Asia/Shanghai"}
	loc, err := time.LoadLocation(w.zone)
	require.NoError(t, err)

	paid := e.createPayment(t, e.order(t)).GetPayment().GetId()
	require.NoError(t, e.fake.Pay(paid))
	e.waitSettled(t, paid)
	for _, r := range []struct{ amount, reason string }{{"5.00", "=HYPERLINK(\"http://evil.example\",\"x\")"}, {"1.30", "+1, -2, @SUM"}} {
		_, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: paid, Amount: r.amount, Reason: r.reason}, e.c.admin))
		require.NoError(t, err)
	}
	pending := e.createPayment(t, e.order(t)).GetPayment().GetId()
	failedOrder := e.order(t)
	failed := e.createPayment(t, failedOrder).GetPayment().GetId()
	_, err = e.orders.CancelOrder(ctx, with(&orderpb.CancelOrderRequest{OrderId: failedOrder}, e.c.admin))
	require.NoError(t, err)
	old := e.createPayment(t, e.order(t)).GetPayment().GetId()

	// What only a gateway or a bygone day could write: a failure reason a
	// spreadsheet would run, and a payment created two days ago.
	pool := e.r.app.Pool()
	_, err = pool.Exec(ctx, `UPDATE payments SET failure_reason = '-cmd|'' /C calc''!A0' WHERE id = $1`, failed)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE payments SET created_at = created_at - interval '2 days' WHERE id = $1`, old)
	require.NoError(t, err)

	w.paid, w.pending, w.failed, w.old = e.getPayment(t, paid), e.getPayment(t, pending), e.getPayment(t, failed), e.getPayment(t, old)
	require.Equal(t, "failed", w.failed.GetStatus())
	admin := paymentpbconnect.NewPaymentAdminServiceClient(http.DefaultClient, e.r.baseURL)
	refunds, err := admin.ListRefunds(ctx, with(&paymentpb.ListRefundsRequest{PaymentId: paid}, e.c.admin))
	require.NoError(t, err)
	w.refunds = refunds.Msg.GetRefunds()
	require.Len(t, w.refunds, 2)

	w.readKey = newAdminKey(t, e.r.baseURL, e.c.admin, "read").cred
	w.operateKey = newAdminKey(t, e.r.baseURL, e.c.admin, "operate").cred
	now := time.Now().In(loc)
	w.today, w.yesterday = now.Format(time.DateOnly), now.AddDate(0, 0, -1).Format(time.DateOnly)
	return w
}

// get fetches an export as cr; the status, the Content-Type and the body
// (t may be an EventuallyWithT condition's collector).
func (w *exportBundle) get(t testkit.T, path string, params url.Values, cr credential) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, w.e.r.baseURL+path+"?"+params.Encode(), nil)
	require.NoError(t, err)
	cr(req.Header)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res.StatusCode, res.Header.Get("Content-Type"), string(body)
}

// records parses a CSV export back: its header and its rows, each a map.
func records(t *testing.T, body string) ([]string, []map[string]string) {
	t.Helper()
	all, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	require.NoError(t, err)
	require.NotEmpty(t, all, "a header row at least")
	var rows []map[string]string
	for _, rec := range all[1:] {
		m := map[string]string{}
		for i, col := range all[0] {
			m[col] = rec[i]
		}
		rows = append(rows, m)
	}
	return all[0], rows
}

// in is an RFC 3339 time of the API in zone, as the export writes it.
func in(t *testing.T, rfc3339, zone string) string {
	t.Helper()
	if rfc3339 == "" {
		return ""
	}
	at, err := time.Parse(time.RFC3339Nano, rfc3339)
	require.NoError(t, err)
	loc, err := time.LoadLocation(zone)
	require.NoError(t, err)
	return at.In(loc).Format(time.RFC3339)
}

func TestExportsStreamTheWorldAsCSVToAdminsOnly(t *testing.T) {
	t.Parallel()
	w := makeExportWorld(t)
	range_ := url.Values{"from": {w.yesterday}, "to": {w.today}, "tz": {w.zone}}
	with := func(extra ...string) url.Values {
		v := url.Values{}
		for k, vs := range range_ {
			v[k] = vs
		}
		for i := 0; i+1 < len(extra); i += 2 {
			v.Set(extra[i], extra[i+1])
		}
		return v
	}

	t.Run("PaymentsOfTheRangeExactly", func(t *testing.T) {
		status, ctype, body := w.get(t, "/export/payments.csv", with(), w.readKey)
		require.Equal(t, http.StatusOK, status, body)
		require.Equal(t, "text/csv; charset=utf-8", ctype)
		header, rows := records(t, body)
		require.Equal(t, []string{"id", "created_at", "updated_at", "paid_at", "failed_at", "status", "method",
			"amount", "refunded_amount", "captured_amount", "currency", "customer_id", "order_id", "invoice_id",
			"gateway_interface_id", "gateway_payment_id", "gateway_tx_id", "failure_reason"}, header)
		// Oldest first; the payment of two days ago is outside the range.
		want := []*paymentpb.PaymentRecord{w.paid, w.pending, w.failed}
		require.Len(t, rows, len(want), body)
		for i, p := range want {
			got := rows[i]
			require.Equal(t, p.GetId(), got["id"])
			require.Equal(t, in(t, p.GetCreatedAt(), w.zone), got["created_at"])
			require.Equal(t, in(t, p.GetUpdatedAt(), w.zone), got["updated_at"])
			require.Equal(t, in(t, p.GetPaidAt(), w.zone), got["paid_at"])
			require.Equal(t, in(t, p.GetFailedAt(), w.zone), got["failed_at"])
			require.True(t, strings.HasSuffix(got["created_at"], "+08:00"), got["created_at"])
			require.Equal(t, p.GetStatus(), got["status"])
			require.Equal(t, "gateway", got["method"])
			require.Equal(t, p.GetAmount(), got["amount"])
			require.Equal(t, p.GetRefundedAmount(), got["refunded_amount"])
			require.Equal(t, p.GetCapturedAmount(), got["captured_amount"])
			require.Equal(t, p.GetCurrency(), got["currency"])
			require.Equal(t, w.e.c.customerID.String(), got["customer_id"])
			require.Equal(t, p.GetOrderId(), got["order_id"])
			require.Equal(t, p.GetGatewayInterfaceId(), got["gateway_interface_id"])
			require.Equal(t, p.GetGatewayPaymentId(), got["gateway_payment_id"])
			require.Equal(t, p.GetGatewayTxId(), got["gateway_tx_id"])
		}
		require.Equal(t, "12.30", rows[0]["amount"])
		require.Equal(t, "6.30", rows[0]["refunded_amount"])
		require.Equal(t, "'-cmd|' /C calc'!A0", rows[2]["failure_reason"], "a formula is written as text")
		require.Empty(t, rows[1]["paid_at"])
	})

	t.Run("FiltersApply", func(t *testing.T) {
		oldAt, err := time.Parse(time.RFC3339, in(t, w.old.GetCreatedAt(), "UTC"))
		require.NoError(t, err)
		oldTo := oldAt.Add(time.Second).Format(time.RFC3339)
		for _, tc := range []struct {
			params url.Values
			want   []string
		}{
			{with("status", "failed"), []string{w.failed.GetId()}},
			{with("status", "success"), []string{w.paid.GetId()}},
			{with("order_id", w.pending.GetOrderId()), []string{w.pending.GetId()}},
			{with("customer_id", w.e.c.otherID.String()), nil},
			{with("gateway_interface_id", w.e.epayGW, "status", "pending"), []string{w.pending.GetId()}},
			{with("to_return", "true"), nil},
			// RFC 3339 bounds: the second the old payment was created in.
			{url.Values{"from": {in(t, w.old.GetCreatedAt(), "UTC")}, "to": {oldTo}}, []string{w.old.GetId()}},
		} {
			status, _, body := w.get(t, "/export/payments.csv", tc.params, w.e.c.admin)
			require.Equal(t, http.StatusOK, status, body)
			_, rows := records(t, body)
			var got []string
			for _, r := range rows {
				got = append(got, r["id"])
			}
			require.Equal(t, tc.want, got, tc.params.Encode())
		}
	})

	t.Run("RefundsWithFormulasEscaped", func(t *testing.T) {
		status, _, body := w.get(t, "/export/refunds.csv", with("payment_id", w.paid.GetId()), w.readKey)
		require.Equal(t, http.StatusOK, status, body)
		header, rows := records(t, body)
		require.Equal(t, []string{"id", "created_at", "updated_at", "status", "destination", "amount", "currency",
			"payment_id", "customer_id", "requested_by", "gateway_refund_id", "reason", "error", "message"}, header)
		require.Len(t, rows, 2)
		// ListRefunds is newest first; the export oldest first.
		for i, r := range []*paymentpb.Refund{w.refunds[1], w.refunds[0]} {
			got := rows[i]
			require.Equal(t, r.GetId(), got["id"])
			require.Equal(t, in(t, r.GetCreatedAt(), w.zone), got["created_at"])
			require.Equal(t, r.GetAmount(), got["amount"])
			require.Equal(t, "CNY", got["currency"])
			require.Equal(t, r.GetStatus(), got["status"])
			require.Equal(t, w.paid.GetId(), got["payment_id"])
			require.Equal(t, r.GetRequestedBy(), got["requested_by"])
			require.Equal(t, r.GetGatewayRefundId(), got["gateway_refund_id"])
			// error means failure: a succeeded refund's gateway text is
			// its message, as in ListRefunds.
			require.Equal(t, "succeeded", got["status"])
			require.Equal(t, "", got["error"])
			require.NotEmpty(t, r.GetMessage())
			require.Equal(t, r.GetMessage(), got["message"])
		}
		require.Equal(t, "'=HYPERLINK(\"http://evil.example\",\"x\")", rows[0]["reason"])
		require.Equal(t, "'+1, -2, @SUM", rows[1]["reason"])

		_, _, body = w.get(t, "/export/refunds.csv", with("status", "failed"), w.readKey)
		_, rows = records(t, body)
		require.Empty(t, rows, "no refund failed")
	})

	t.Run("OnlyAnAdminOrAReadKey", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			cr   credential
			want int
		}{
			{"anonymous", nobody, http.StatusUnauthorized},
			{"a forged key", apiKey("ak_forged"), http.StatusUnauthorized},
			{"customer", w.e.c.customer, http.StatusForbidden},
			{"customer key", w.e.c.key, http.StatusForbidden},
			{"admin session", w.e.c.admin, http.StatusOK},
			{"operate key", w.operateKey, http.StatusOK},
		} {
			for _, path := range []string{"/export/payments.csv", "/export/refunds.csv"} {
				status, ctype, body := w.get(t, path, with(), tc.cr)
				require.Equal(t, tc.want, status, "%s on %s: %s", tc.name, path, body)
				if tc.want != http.StatusOK {
					require.NotContains(t, ctype, "text/csv", tc.name)
					require.NotContains(t, body, w.paid.GetId(), tc.name)
				}
			}
		}
	})

	t.Run("BadParametersAre400AndStreamNothing", func(t *testing.T) {
		for _, tc := range []struct {
			params url.Values
			says   string
		}{
			{url.Values{"to": {w.today}}, "from is required"},
			{url.Values{"from": {w.today}}, "to is required"},
			{url.Values{"from": {"yesterday"}, "to": {w.today}}, `from: "yesterday" is neither a date`},
			{url.Values{"from": {w.today}, "to": {w.yesterday}}, "must come after from"},
			{with("tz", "Mars/Olympus"), `tz: "Mars/Olympus" is not an IANA time zone`},
			{with("tz", "Local"), "tz"},
			{with("status", "paid"), `status: "paid" is not one of pending, success, failed, refunded`},
			{with("order_id", "42"), `order_id: "42" is not a UUID`},
			{with("to_return", "yes"), "to_return"},
			{with("stauts", "failed"), `unknown parameter "stauts"`},
			{url.Values{"from": {w.yesterday, w.today}, "to": {w.today}}, "from is given 2 times"},
		} {
			status, ctype, body := w.get(t, "/export/payments.csv", tc.params, w.readKey)
			require.Equal(t, http.StatusBadRequest, status, tc.params.Encode())
			require.Contains(t, body, tc.says, tc.params.Encode())
			require.NotContains(t, ctype, "text/csv")
			require.NotContains(t, body, "id,created_at")
		}
		status, _, body := w.get(t, "/export/refunds.csv", with("status", "success"), w.readKey)
		require.Equal(t, http.StatusBadRequest, status)
		require.Contains(t, body, `status: "success" is not one of pending, succeeded, failed`)
	})
}

// A failure after the first row (the database session killed half way)
// cannot change the status any more: the response ends without its final
// chunk, and the client sees a broken download, never a short file that
// looks complete. HEAD answers the headers without reading a row.
func TestAnExportCutOffHalfWayIsABrokenDownloadNotAShortFile(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	pool := e.r.app.Pool()
	// 60,000 payments of one order (about 14 MB of CSV): far more than the
	// socket buffers between the database, the server and the client hold.
	orderID := e.order(t)
	_, err := pool.Exec(ctx, `INSERT INTO payments (order_id, customer_id, method, amount, currency, status, failed_at, failure_reason)
		SELECT $1, $2, 'balance', 12.30, 'CNY', 'failed', now(), 'bench ' || g FROM generate_series(1, 60000) g`,
		orderID, e.c.customerID)
	require.NoError(t, err)
	day := time.Now().UTC().Format(time.DateOnly)
	params := url.Values{"from": {day}, "to": {day}}.Encode()

	head, err := http.NewRequest(http.MethodHead, e.r.baseURL+"/export/payments.csv?"+params, nil)
	require.NoError(t, err)
	e.c.admin(head.Header)
	res, err := http.DefaultClient.Do(head)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Equal(t, "text/csv; charset=utf-8", res.Header.Get("Content-Type"))

	req, err := http.NewRequest(http.MethodGet, e.r.baseURL+"/export/payments.csv?"+params, nil)
	require.NoError(t, err)
	e.c.admin(req.Header)
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	first := make([]byte, 4096)
	_, err = io.ReadFull(res.Body, first)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(first), "id,created_at,"))

	// The server is blocked writing to this client, holding no database
	// connection between pages. Lock the table so that its next page
	// waits, let the client read on, and end the waiting page's session.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `LOCK TABLE payments IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	type read struct {
		n   int
		err error
	}
	done := make(chan read, 1)
	go func() {
		rest, err := io.ReadAll(res.Body)
		done <- read{len(rest), err}
	}()
	var killed int
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'
			  AND query LIKE '%gateway_tx_id, failure_reason%FROM payments%'`).Scan(&killed))
		assert.Equal(c, 1, killed, "waiting export queries terminated")
	}, 30*time.Second, 20*time.Millisecond, "the export's next page waits for the lock")
	require.NoError(t, tx.Rollback(ctx))

	rest := <-done
	require.Error(t, rest.err, "a cut-off export must not read as complete (%d more bytes)", rest.n)
	require.Less(t, len(first)+rest.n, 60000*100, "the export stopped short of the rows")
}
