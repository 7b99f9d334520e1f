package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/testdb"
)

// seedExportPayments inserts n failed balance payments of orderID created
// now, failure reasons "bench 1" … "bench n" (about 230 bytes of CSV each).
func seedExportPayments(t *testing.T, pool *pgxpool.Pool, orderID string, customerID uuid.UUID, n int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `INSERT INTO payments (order_id, customer_id, method, amount, currency, status, failed_at, failure_reason)
		SELECT $1, $2, 'balance', 12.30, 'CNY', 'failed', now(), 'bench ' || g FROM generate_series(1, $3::int) g`,
		orderID, customerID, n)
	require.NoError(t, err)
}

// stalledExport starts an export as cr, reads its first 4 KiB and reads no
// more: far less than the file, so the server is left writing to a client
// that does not read. The body is closed when the test ends.
func stalledExport(t *testing.T, baseURL string, params url.Values, cr credential) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, baseURL+"/export/payments.csv?"+params.Encode(), nil)
	require.NoError(t, err)
	cr(req.Header)
	// A connection of its own, so that the test's other requests do not
	// queue behind it.
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	res, err := (&http.Client{Transport: tr}).Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = res.Body.Close() })
	require.Equal(t, http.StatusOK, res.StatusCode)
	first := make([]byte, 4096)
	_, err = io.ReadFull(res.Body, first)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(first), "id,created_at,"))
	return res
}

// today is an export range holding what a test wrote just now, in any
// time zone: yesterday to tomorrow by UTC dates. (A range of today's UTC
// date alone missed, between 23:00 and midnight UTC, rows that are already
// tomorrow in Europe/Berlin.)
func today() url.Values {
	now := time.Now().UTC()
	return url.Values{"from": {now.AddDate(0, 0, -1).Format(time.DateOnly)}, "to": {now.AddDate(0, 0, 1).Format(time.DateOnly)}}
}

// Exports that their clients do not read hold no connection of the pool:
// with as many stalled exports as the pool has connections, GetPayment and
// /ready still answer at once (they used to wait for a connection until
// the acquire timeout and answer Unavailable, and the instance was not
// ready). A connection is held only while a page of rows is read.
func TestStalledExportsLeaveThePoolToTheMoneyPath(t *testing.T) {
	t.Parallel()
	e := startPayments(t, func(c *config.Config) {
		c.DB.MaxConnections, c.DB.MinConnections = 4, 1
		c.Export.MaxConcurrent = 4
	})
	ctx := context.Background()
	paymentID := e.createPayment(t, e.order(t)).GetPayment().GetId()
	seedExportPayments(t, e.r.app.Pool(), e.order(t), e.c.customerID, 60000)

	for range 4 {
		stalledExport(t, e.r.baseURL, today(), e.c.admin)
	}
	got, err := e.payments.GetPayment(ctx, with(&paymentpb.GetPaymentRequest{Id: paymentID}, e.c.admin))
	require.NoError(t, err, "GetPayment while four exports stall")
	require.Equal(t, paymentID, got.Msg.GetPayment().GetId())
	res, err := http.Get(e.r.baseURL + "/ready")
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusOK, res.StatusCode, "/ready while four exports stall")
}

// One export more than [export].max_concurrent is refused at once with 429,
// Retry-After and a message that says why; when an export ends, the next
// one streams.
func TestAnExportBeyondTheCapIs429WithRetryAfter(t *testing.T) {
	t.Parallel()
	e := startPayments(t, func(c *config.Config) { c.Export.MaxConcurrent = 1 })
	seedExportPayments(t, e.r.app.Pool(), e.order(t), e.c.customerID, 60000)
	first := stalledExport(t, e.r.baseURL, today(), e.c.admin)

	req, err := http.NewRequest(http.MethodGet, e.r.baseURL+"/export/refunds.csv?"+today().Encode(), nil)
	require.NoError(t, err)
	e.c.admin(req.Header)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, string(body))
	require.Equal(t, "10", res.Header.Get("Retry-After"))
	require.Equal(t, "text/plain; charset=utf-8", res.Header.Get("Content-Type"))
	require.Contains(t, string(body), "1 exports are running on this server, the most it streams at once; retry in 10 seconds")

	// The first client goes away: its slot is free again.
	require.NoError(t, first.Body.Close())
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		status, _, body := (&exportBundle{e: e}).get(c, "/export/refunds.csv", today(), e.c.admin)
		assert.Equal(c, http.StatusOK, status, body)
	}, 20*time.Second, 50*time.Millisecond)
}

// A client that stops taking the file is cut off after
// [export].write_timeout without progress: its download ends broken (no
// final chunk), and its slot goes to the next export.
func TestAnExportWhoseClientStopsReadingIsCutOffAfterTheWriteTimeout(t *testing.T) {
	t.Parallel()
	e := startPayments(t, func(c *config.Config) {
		c.Export.MaxConcurrent = 1
		c.Export.WriteTimeout = time.Second
	})
	seedExportPayments(t, e.r.app.Pool(), e.order(t), e.c.customerID, 60000)
	stalled := stalledExport(t, e.r.baseURL, today(), e.c.admin)

	// The slot comes free when the server gives up on the stalled client.
	w := &exportBundle{e: e}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		status, _, body := w.get(c, "/export/refunds.csv", today(), e.c.admin)
		assert.Equal(c, http.StatusOK, status, body)
	}, 60*time.Second, 100*time.Millisecond, "the stalled export still holds the only slot")

	rest, err := io.ReadAll(stalled.Body)
	require.Error(t, err, "a cut-off export must not read as complete (%d more bytes)", len(rest))
	require.Less(t, 4096+len(rest), 60000*100, "the export stopped short of the rows")
}

// A formula behind spaces, zero-width characters or a byte order mark, or
// spelt in fullwidth, is written with the quote in front in the file (a
// signed epay notification's trade_no " =1+1" went out as it was).
func TestAnExportQuotesFormulasBehindInvisibleCharacters(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	pool := e.r.app.Pool()
	reasons := []string{" =1+1", "\u200b=HYPERLINK(\"http://evil.example\")", "\ufeff@SUM(A1)", "\u00a0\u3000-2+3",
		"\u2060+1", "\uff1d1+1", "\uff20x", " \uff0d1", "plain reason"}
	orderID := e.order(t)
	for i, reason := range reasons {
		_, err := pool.Exec(ctx, `INSERT INTO payments (order_id, customer_id, method, amount, currency, status, failed_at,
				failure_reason, gateway_tx_id, created_at)
			VALUES ($1, $2, 'balance', 1.00, 'CNY', 'failed', now(), $3, $3, now() + $4 * interval '1 microsecond')`,
			orderID, e.c.customerID, reason, i)
		require.NoError(t, err)
	}
	status, _, body := (&exportBundle{e: e}).get(t, "/export/payments.csv", url.Values{
		"from": {time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly)}, "to": {time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)},
		"order_id": {orderID}}, e.c.admin)
	require.Equal(t, http.StatusOK, status, body)
	_, rows := records(t, body)
	require.Len(t, rows, len(reasons))
	for i, reason := range reasons {
		want := "'" + reason
		if reason == "plain reason" {
			want = reason
		}
		require.Equal(t, want, rows[i]["failure_reason"], "%q", reason)
		require.Equal(t, want, rows[i]["gateway_tx_id"], "%q", reason)
	}
}

// Every export leaves an audit row naming who made it (the admin, or the
// API key), with its parameters and row count, and its log line names the
// principal and the key's id, as RPC lines do.
func TestAnExportIsAuditedAndLoggedWithItsPrincipal(t *testing.T) {
	t.Parallel()
	cfg := testConfig(testdb.URL(t))
	cfg.Plugins.Dir = pluginDir(t)
	r, logs := startLogged(t, cfg)
	c := login(t, r)
	ctx := context.Background()
	pool := r.app.Pool()
	var orderID string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO orders (customer_id, total_amount, currency) VALUES ($1, 12.30, 'CNY') RETURNING id`,
		c.customerID).Scan(&orderID))
	seedExportPayments(t, pool, orderID, c.customerID, 3)
	key := newAdminKey(t, r.baseURL, c.admin, "read")
	var adminID string
	require.NoError(t, pool.QueryRow(ctx, `SELECT id FROM admin_users WHERE username = 'admin'`).Scan(&adminID))

	w := &exportBundle{e: &payBundle{r: r}}
	params := today()
	params.Set("status", "failed")
	params.Set("tz", "Europe/Berlin")
	status, _, body := w.get(t, "/export/payments.csv", params, key.cred)
	require.Equal(t, http.StatusOK, status, body)
	status, _, body = w.get(t, "/export/refunds.csv", today(), c.admin)
	require.Equal(t, http.StatusOK, status, body)

	type row struct {
		ActorKind, ActorID, Action, EntityType, EntityID string
		After                                            []byte
	}
	rows, err := pool.Query(ctx, `SELECT actor_kind, actor_id, action, entity_type, entity_id, after FROM audit_log
		WHERE action LIKE 'export.%' ORDER BY id`)
	require.NoError(t, err)
	var got []row
	for rows.Next() {
		var x row
		require.NoError(t, rows.Scan(&x.ActorKind, &x.ActorID, &x.Action, &x.EntityType, &x.EntityID, &x.After))
		got = append(got, x)
	}
	require.NoError(t, rows.Err())
	require.Len(t, got, 2)
	require.Equal(t, []string{"api_key", key.id, "export.payments", "export", "payments"},
		[]string{got[0].ActorKind, got[0].ActorID, got[0].Action, got[0].EntityType, got[0].EntityID})
	require.JSONEq(t, `{"params": {"from": "`+params.Get("from")+`", "to": "`+params.Get("to")+`", "status": "failed", "tz": "Europe/Berlin"},
		"rows": 3, "outcome": "complete"}`, string(got[0].After))
	require.Equal(t, []string{"admin", adminID, "export.refunds", "export", "refunds"},
		[]string{got[1].ActorKind, got[1].ActorID, got[1].Action, got[1].EntityType, got[1].EntityID})
	require.JSONEq(t, `{"params": {"from": "`+params.Get("from")+`", "to": "`+params.Get("to")+`"}, "rows": 0, "outcome": "complete"}`,
		string(got[1].After))

	var lines []map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "export streamed" {
			lines = append(lines, m)
		}
	}
	require.Len(t, lines, 2)
	require.Equal(t, "payments", lines[0]["export"])
	require.Equal(t, float64(3), lines[0]["rows"])
	require.Equal(t, "admin:"+adminID, lines[0]["principal"])
	require.Equal(t, "api_key", lines[0]["credential"])
	require.Equal(t, key.id, lines[0]["api_key_id"])
	require.Equal(t, "refunds", lines[1]["export"])
	require.Equal(t, "admin:"+adminID, lines[1]["principal"])
	require.Equal(t, "session", lines[1]["credential"])
	require.NotContains(t, lines[1], "api_key_id")
}
