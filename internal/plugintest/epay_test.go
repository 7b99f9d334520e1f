package plugintest_test

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/outbound"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
)

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// epayConfig is a gateway interface's configuration for the fake merchant.
func epayConfig(apiURL string) map[string]any {
	return map[string]any{"api_url": apiURL + "/", "pid": "1001", "key": "k3y"}
}

func loadEpay(t testing.TB) *plugin.Plugin {
	t.Helper()
	return plugintest.Load(t, "gateway/epay.lua", plugin.Options{})
}

func TestEpayInfoDeclaresQueryAndRefund(t *testing.T) {
	t.Parallel()
	p := loadEpay(t)
	info := plugintest.Call(t, p, "info", nil, nil)
	require.Equal(t, true, info["supports_query"])
	require.Equal(t, true, info["supports_refund"])
	require.Equal(t, []any{"CNY"}, info["currencies"], "epay v1 has no currency field: every amount is yuan")
	schema := plugintest.Call(t, p, "config_schema", nil, nil)
	props := schema["properties"].(map[string]any)
	require.Equal(t, "alipay", props["pay_type"].(map[string]any)["default"])
	require.Contains(t, props, "sitename")
}

// --- known answers ---------------------------------------------------------

func TestEpayCreatePaymentSignsTheFormAsWrittenByHand(t *testing.T) {
	t.Parallel()
	var (
		mu                sync.Mutex
		got               url.Values
		path, contentType string
		requests          atomic.Int32
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_ = r.ParseForm()
		mu.Lock()
		got, path, contentType = r.PostForm, r.URL.Path, r.Header.Get("Content-Type")
		mu.Unlock()
		_, _ = io.WriteString(w, `{"code":1,"msg":"succ","trade_no":"2026010112000000001","payurl":"https://pay.example.com/submit.php?trade_no=2026010112000000001"}`)
	}))
	t.Cleanup(srv.Close)
	p := loadEpay(t)

	res := plugintest.Call(t, p, "create_payment", epayConfig(srv.URL), map[string]any{
		"payment_id": "pay-0001",
		"order_id":   "ord-1",
		"invoice_id": "",
		"amount":     "12.30",
		"currency":   "CNY",
		"subject":    "VPS 1个月",
		"return_url": "https://billing.example.com/return",
		"notify_url": "https://billing.example.com/callbacks/gw-1",
		"client_ip":  "192.0.2.7",
	})

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, "/mapi.php", path)
	require.Equal(t, "application/x-www-form-urlencoded", contentType)
	const signing = "clientip=192.0.2.7&money=12.30&name=VPS 1个月" +
		"&notify_url=https://billing.example.com/callbacks/gw-1&out_trade_no=pay-0001&pid=1001" +
		"&return_url=https://billing.example.com/return&type=alipay"
	require.Equal(t, md5hex(signing+"k3y"), got.Get("sign"))
	require.Equal(t, "MD5", got.Get("sign_type"))
	require.Equal(t, "12.30", got.Get("money"))
	require.NotContains(t, got, "key", "the key is never sent with a create")
	require.NotContains(t, got, "sitename", "empty values are neither sent nor signed")
	require.EqualValues(t, 1, requests.Load())

	require.Equal(t, "https://pay.example.com/submit.php?trade_no=2026010112000000001", res["payment_url"])
	require.Equal(t, "", res["qr_code"])
	require.Equal(t, "2026010112000000001", res["gateway_payment_id"])
}

func TestEpayCreatePaymentIsNeverRetried(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusBadGateway)
	}))
	t.Cleanup(srv.Close)
	p := loadEpay(t)

	_, err := plugintest.CallErr(p, "create_payment", epayConfig(srv.URL), map[string]any{
		"payment_id": "pay-0002", "amount": "1.00", "currency": "CNY", "subject": "x", "notify_url": "https://b.example.com/cb",
	})
	require.Error(t, err)
	require.Contains(t, err.Error(), "HTTP 502")
	require.EqualValues(t, 1, requests.Load(), "a payment creation must not be sent twice blindly")
}

func TestEpayCreatePaymentReportsARefusal(t *testing.T) {
	t.Parallel()
	fake := startEpay(t, epay.Options{})
	p := loadEpay(t)
	cfg := epayConfig(fake.URL())
	cfg["key"] = "not-the-key"
	_, err := plugintest.CallErr(p, "create_payment", cfg, map[string]any{
		"payment_id": "pay-0003", "amount": "1.00", "currency": "CNY", "subject": "x", "notify_url": "https://b.example.com/cb",
	})
	require.Error(t, err)
	require.Contains(t, err.Error(), "签名错误")
	require.Empty(t, fake.Orders())
}

// epay's protocol has no currency: 100.00 USD sent as money=100.00 would
// be charged as 100.00 CNY. The script refuses before anything is sent.
func TestEpayRefusesAnyCurrencyButCNYWithoutCallingOut(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		_, _ = io.WriteString(w, `{"code":1,"trade_no":"1","payurl":"https://pay.example.com/x"}`)
	}))
	t.Cleanup(srv.Close)
	p := loadEpay(t)

	for _, currency := range []any{"USD", "", nil} {
		in := map[string]any{"payment_id": "pay-usd", "amount": "100.00", "subject": "x", "notify_url": "https://b.example.com/cb"}
		if currency != nil {
			in["currency"] = currency
		}
		_, err := plugintest.CallErr(p, "create_payment", epayConfig(srv.URL), in)
		require.ErrorContains(t, err, "epay takes CNY only", "currency %v", currency)
	}
	r := plugintest.Call(t, p, "refund", epayConfig(srv.URL), map[string]any{
		"payment_id": "pay-usd", "gateway_payment_id": "1", "amount": "1.00", "payment_amount": "100.00", "currency": "USD",
	})
	require.Equal(t, "failed", r["status"], "failed: nothing was sent, no money moved")
	require.Contains(t, r["message"], "CNY only")
	require.Zero(t, requests.Load())
}

// callbackPayload is a notify as epay sends it, written out by hand: the
// values in the query are those that were signed.
func callbackPayload(t *testing.T, fields map[string]string, key string) string {
	t.Helper()
	v := url.Values{}
	for k, x := range fields {
		v.Set(k, x)
	}
	v.Set("sign", epay.Sign(v, key))
	v.Set("sign_type", "MD5")
	return v.Encode()
}

func TestEpayParseCallbackVerifiesTheRawMoneyAsSigned(t *testing.T) {
	t.Parallel()
	p := loadEpay(t)
	// The order was created for "1.00"; this deployment notifies "1". The
	// signature covers "1", and "1" is what the plugin returns: the service
	// compares amounts as decimals, the plugin never reformats them.
	const signing = "money=1&name=VPS&out_trade_no=pay-0001&pid=1001" +
		"&trade_no=2026010112000000001&trade_status=TRADE_SUCCESS&type=alipay"
	payload := "pid=1001&trade_no=2026010112000000001&out_trade_no=pay-0001&type=alipay" +
		"&name=VPS&money=1&trade_status=TRADE_SUCCESS&sign=" + md5hex(signing+"k3y") + "&sign_type=MD5"

	res := plugintest.Call(t, p, "parse_callback", epayConfig("https://pay.example.com"), map[string]any{
		"method": "GET", "content_type": "", "payload": payload,
	})
	require.Equal(t, map[string]any{
		"valid":              true,
		"reason":             "",
		"payment_id":         "pay-0001",
		"amount":             "1",
		"status":             "success",
		"gateway_payment_id": "2026010112000000001",
		"gateway_tx_id":      "2026010112000000001",
		"ack":                "success",
	}, res)
}

func TestEpayParseCallbackOutcomes(t *testing.T) {
	t.Parallel()
	p := loadEpay(t)
	base := func() map[string]string {
		return map[string]string{
			"pid": "1001", "trade_no": "2026010112000000002", "out_trade_no": "pay-0002",
			"type": "wxpay", "name": "VPS 1个月 + IPv4", "money": "12.30", "trade_status": "TRADE_SUCCESS",
		}
	}
	parse := func(method, contentType, payload string) map[string]any {
		return plugintest.Call(t, p, "parse_callback", epayConfig("https://pay.example.com"), map[string]any{
			"method": method, "content_type": contentType, "payload": payload,
		})
	}

	t.Run("percent-encoded values are verified decoded", func(t *testing.T) {
		res := parse("GET", "", callbackPayload(t, base(), "k3y"))
		require.Equal(t, true, res["valid"], res["reason"])
		require.Equal(t, "12.30", res["amount"])
	})

	t.Run("a POST form verifies the same way", func(t *testing.T) {
		res := parse("POST", "application/x-www-form-urlencoded; charset=utf-8", callbackPayload(t, base(), "k3y"))
		require.Equal(t, true, res["valid"], res["reason"])
	})

	t.Run("api_trade_no is the transaction id when present", func(t *testing.T) {
		f := base()
		f["api_trade_no"] = "4200001234"
		res := parse("GET", "", callbackPayload(t, f, "k3y"))
		require.Equal(t, true, res["valid"], res["reason"])
		require.Equal(t, "4200001234", res["gateway_tx_id"])
		require.Equal(t, "2026010112000000002", res["gateway_payment_id"])
	})

	t.Run("a tampered field fails the signature", func(t *testing.T) {
		payload := strings.Replace(callbackPayload(t, base(), "k3y"), "money=12.30", "money=0.01", 1)
		res := parse("GET", "", payload)
		require.Equal(t, false, res["valid"])
		require.Equal(t, "bad signature", res["reason"])
		require.NotContains(t, res, "ack")
		require.NotContains(t, res, "payment_id")
	})

	t.Run("a foreign merchant is refused even when its signature is right", func(t *testing.T) {
		f := base()
		f["pid"] = "1002"
		res := parse("GET", "", callbackPayload(t, f, "k3y"))
		require.Equal(t, false, res["valid"])
		require.Contains(t, res["reason"], "pid")
	})

	t.Run("the wrong key fails", func(t *testing.T) {
		res := parse("GET", "", callbackPayload(t, base(), "other"))
		require.Equal(t, false, res["valid"])
	})

	t.Run("a missing signature fails", func(t *testing.T) {
		v := url.Values{}
		for k, x := range base() {
			v.Set(k, x)
		}
		res := parse("GET", "", v.Encode())
		require.Equal(t, false, res["valid"])
	})

	t.Run("a signature type other than MD5 fails", func(t *testing.T) {
		res := parse("GET", "", strings.Replace(callbackPayload(t, base(), "k3y"), "sign_type=MD5", "sign_type=RSA", 1))
		require.Equal(t, false, res["valid"])
	})

	t.Run("WAIT_BUYER_PAY is valid but not a success", func(t *testing.T) {
		f := base()
		f["trade_status"] = "WAIT_BUYER_PAY"
		res := parse("GET", "", callbackPayload(t, f, "k3y"))
		require.Equal(t, true, res["valid"])
		require.Equal(t, "pending", res["status"])
		require.Equal(t, "success", res["ack"])
	})

	t.Run("garbage is invalid, not an error", func(t *testing.T) {
		for _, payload := range []string{"", "%%%", "sign=%zz&pid=1001", "just text"} {
			res := parse("GET", "", payload)
			require.Equal(t, false, res["valid"], payload)
		}
	})

	t.Run("a key repeated under another encoding is refused", func(t *testing.T) {
		res := parse("GET", "", callbackPayload(t, base(), "k3y")+"&mon%65y=999.00")
		require.Equal(t, false, res["valid"])
	})

	t.Run("an interface without a key verifies nothing", func(t *testing.T) {
		res := plugintest.Call(t, p, "parse_callback", map[string]any{"api_url": "https://pay.example.com", "pid": "1001", "key": ""},
			map[string]any{"method": "GET", "payload": callbackPayload(t, base(), "")})
		require.Equal(t, false, res["valid"])
	})

	t.Run("a JSON body is refused", func(t *testing.T) {
		res := parse("POST", "application/json", `{"pid":"1001"}`)
		require.Equal(t, false, res["valid"])
	})
}

// --- against the fake gateway ----------------------------------------------

func startEpay(t *testing.T, opts epay.Options) *epay.Server {
	t.Helper()
	if opts.NotifyScale == 0 {
		opts.NotifyScale = 0.0001
	}
	s := epay.New(opts)
	require.NoError(t, s.Start())
	t.Cleanup(s.Close)
	return s
}

// callbackReceiver is paymentd's /callbacks/{id} route reduced to what the
// plugin does: hand the raw query (GET) or body (POST) to parse_callback and
// answer the ack when the callback is valid, 400 otherwise.
type callbackReceiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	results []map[string]any
}

func newCallbackReceiver(t *testing.T, p *plugin.Plugin, config map[string]any) *callbackReceiver {
	t.Helper()
	cr := &callbackReceiver{}
	cr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		payload := r.URL.RawQuery
		if r.Method == http.MethodPost {
			b, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, "read", http.StatusBadRequest)
				return
			}
			payload = string(b)
		}
		out, err := plugintest.CallErr(p, "parse_callback", config, map[string]any{
			"method": r.Method, "content_type": r.Header.Get("Content-Type"), "payload": payload,
		})
		if err != nil {
			http.Error(w, "plugin failed", http.StatusInternalServerError)
			return
		}
		var res map[string]any
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			http.Error(w, "plugin answer", http.StatusInternalServerError)
			return
		}
		cr.mu.Lock()
		cr.results = append(cr.results, res)
		cr.mu.Unlock()
		if res["valid"] != true {
			http.Error(w, "rejected", http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, res["ack"].(string))
	}))
	t.Cleanup(cr.srv.Close)
	return cr
}

func (cr *callbackReceiver) seen() []map[string]any {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return append([]map[string]any(nil), cr.results...)
}

func TestEpayCreatePayNotifyFlowIsVerifiedAndAcknowledged(t *testing.T) {
	t.Parallel()
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			fake := startEpay(t, epay.Options{NotifyMethod: method})
			p := loadEpay(t)
			cfg := epayConfig(fake.URL())
			recv := newCallbackReceiver(t, p, cfg)

			created := plugintest.Call(t, p, "create_payment", cfg, map[string]any{
				"payment_id": "0b8d2c0e-5f7a-4d3e-9a51-2f4a7c9e1b01",
				"order_id":   "ord-7",
				"amount":     "1.00",
				"currency":   "CNY",
				"subject":    "VPS 1个月",
				"notify_url": recv.srv.URL + "/callbacks/gw-1",
				"return_url": recv.srv.URL + "/done",
				"client_ip":  "192.0.2.7",
			})
			tradeNo := created["gateway_payment_id"].(string)
			require.NotEmpty(t, tradeNo)

			// The buyer opens the payment page and presses Pay.
			client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			t.Cleanup(client.CloseIdleConnections)
			resp, err := client.Get(created["payment_url"].(string))
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			resp, err = client.PostForm(fake.URL()+"/submit.php/pay", url.Values{"trade_no": {tradeNo}})
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusSeeOther, resp.StatusCode)
			require.True(t, strings.HasPrefix(resp.Header.Get("Location"), recv.srv.URL+"/done?"))

			require.Eventually(t, func() bool {
				ns := fake.Notifications()
				return len(ns) == 1 && ns[0].Acked
			}, 5*time.Second, 5*time.Millisecond)
			seen := recv.seen()
			require.Len(t, seen, 1)
			require.Equal(t, true, seen[0]["valid"])
			require.Equal(t, "success", seen[0]["status"])
			require.Equal(t, "0b8d2c0e-5f7a-4d3e-9a51-2f4a7c9e1b01", seen[0]["payment_id"])
			require.Equal(t, "1.00", seen[0]["amount"])
			require.Equal(t, tradeNo, seen[0]["gateway_payment_id"])
			require.Equal(t, method, fake.Notifications()[0].Method)
		})
	}
}

func TestEpayNotifyFromAnotherMerchantIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	// The fake knows two merchants; our interface is configured for 1001
	// only. A notify signed by merchant 2002 (with its own valid key) must be
	// refused, and epay keeps retrying it to the end of its schedule.
	fake := startEpay(t, epay.Options{
		Merchants:      map[string]string{"1001": "k3y", "2002": "other-key"},
		NotifySchedule: []time.Duration{0, time.Millisecond, time.Millisecond},
		NotifyScale:    1,
	})
	p := loadEpay(t)
	recv := newCallbackReceiver(t, p, epayConfig(fake.URL()))

	foreign := epayConfig(fake.URL())
	foreign["pid"], foreign["key"] = "2002", "other-key"
	created := plugintest.Call(t, p, "create_payment", foreign, map[string]any{
		"payment_id": "pay-foreign", "amount": "5.00", "currency": "CNY", "subject": "x", "notify_url": recv.srv.URL + "/callbacks/gw-1",
	})
	require.NoError(t, fake.Pay(created["gateway_payment_id"].(string)))
	require.Eventually(t, func() bool { return len(fake.Notifications()) == 3 }, 5*time.Second, time.Millisecond)
	for _, n := range fake.Notifications() {
		require.False(t, n.Acked)
		require.Equal(t, http.StatusBadRequest, n.Status)
	}
	for _, r := range recv.seen() {
		require.Equal(t, false, r["valid"])
	}
}

func TestEpayQueryPaymentBeforeAndAfterPaying(t *testing.T) {
	t.Parallel()
	// The notify is lost: only a query can tell the service it was paid.
	fake := startEpay(t, epay.Options{APITradeNo: true})
	fake.DropNotify(true)
	p := loadEpay(t)
	cfg := epayConfig(fake.URL())
	created := plugintest.Call(t, p, "create_payment", cfg, map[string]any{
		"payment_id": "pay-q1", "amount": "1", "currency": "CNY", "subject": "x", "notify_url": "http://127.0.0.1:9/cb",
	})
	tradeNo := created["gateway_payment_id"].(string)
	query := map[string]any{"payment_id": "pay-q1", "gateway_payment_id": tradeNo, "amount": "1.00", "currency": "CNY"}

	before := plugintest.Call(t, p, "query_payment", cfg, query)
	require.Equal(t, "pending", before["status"])
	require.Equal(t, tradeNo, before["gateway_payment_id"])
	require.Equal(t, "", before["paid_at"])

	require.NoError(t, fake.Pay(tradeNo))
	after := plugintest.Call(t, p, "query_payment", cfg, query)
	require.Equal(t, "success", after["status"])
	require.Equal(t, "1", after["amount"], "the amount as the gateway holds it")
	require.Equal(t, "4200"+tradeNo, after["gateway_tx_id"])
	paidAt, err := time.Parse(time.RFC3339, after["paid_at"].(string))
	require.NoError(t, err)
	o, _ := fake.Order(tradeNo)
	require.WithinDuration(t, o.EndTime, paidAt, time.Second)
}

func TestEpayQueryPaymentRetriesAnUnavailableGateway(t *testing.T) {
	t.Parallel()
	fake := startEpay(t, epay.Options{})
	p := loadEpay(t)
	cfg := epayConfig(fake.URL())
	plugintest.Call(t, p, "create_payment", cfg, map[string]any{
		"payment_id": "pay-q2", "amount": "2.00", "currency": "CNY", "subject": "x", "notify_url": "http://127.0.0.1:9/cb",
	})
	fake.InjectFault(epay.Fault{Path: "/api.php", Act: "order", Status: http.StatusBadGateway, Times: 2})
	res := plugintest.Call(t, p, "query_payment", cfg, map[string]any{"payment_id": "pay-q2"})
	require.Equal(t, "pending", res["status"])
}

func TestEpayQueryPaymentOfAnUnknownOrderIsAnError(t *testing.T) {
	t.Parallel()
	fake := startEpay(t, epay.Options{})
	p := loadEpay(t)
	_, err := plugintest.CallErr(p, "query_payment", epayConfig(fake.URL()), map[string]any{"payment_id": "nope"})
	require.Error(t, err)
	require.Contains(t, err.Error(), "订单号不存在")
}

func TestEpayRefundOutcomes(t *testing.T) {
	t.Parallel()
	fake := startEpay(t, epay.Options{})
	fake.DropNotify(true)
	p := loadEpay(t)
	cfg := epayConfig(fake.URL())
	created := plugintest.Call(t, p, "create_payment", cfg, map[string]any{
		"payment_id": "pay-r1", "amount": "10.00", "currency": "CNY", "subject": "x", "notify_url": "http://127.0.0.1:9/cb",
	})
	tradeNo := created["gateway_payment_id"].(string)
	require.NoError(t, fake.Pay(tradeNo))
	refund := func(amount string) map[string]any {
		return plugintest.Call(t, p, "refund", cfg, map[string]any{
			"payment_id": "pay-r1", "refund_id": "ref-" + amount, "gateway_payment_id": tradeNo,
			"gateway_tx_id": tradeNo, "amount": amount, "payment_amount": "10.00", "currency": "CNY", "reason": "test",
		})
	}

	res := refund("3.00")
	require.Equal(t, "succeeded", res["status"], "code 1")

	fake.SetRefundCode(0)
	res = refund("2.00")
	require.Equal(t, "succeeded", res["status"], "code 0 means success too on some deployments")

	res = refund("5.01")
	require.Equal(t, "failed", res["status"])
	require.Equal(t, "退款金额超过可退金额", res["message"])

	// A 5xx may hide a refund that went through: the plugin says the
	// outcome is unknown, and the request is not resent.
	fake.InjectFault(epay.Fault{Path: "/api.php", Act: "refund", Status: http.StatusInternalServerError, Times: 1})
	res = refund("1.00")
	require.Equal(t, "unknown", res["status"])
	require.Contains(t, res["message"], "unknown")

	refunds := fake.Refunds()
	require.Len(t, refunds, 2, "the 500 was not retried into a third refund")
	require.Equal(t, "3.00", refunds[0].Money)
	require.Equal(t, "2.00", refunds[1].Money)
	o, _ := fake.Order(tradeNo)
	require.Equal(t, "5.00", o.Refunded)
}

func TestEpayTestConfig(t *testing.T) {
	t.Parallel()
	fake := startEpay(t, epay.Options{})
	var logs bytes.Buffer // calls run one at a time, on this goroutine
	p := plugintest.Load(t, "gateway/epay.lua", plugin.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	res := plugintest.Call(t, p, "test_config", epayConfig(fake.URL()), nil)
	require.Equal(t, true, res["ok"], res["message"])

	// The answer's words go to the log, not to whoever asked for the test.
	bad := epayConfig(fake.URL())
	bad["key"] = "wrong"
	res = plugintest.Call(t, p, "test_config", bad, nil)
	require.Equal(t, false, res["ok"])
	require.Equal(t, "epay refused the pid and key (its reason is in the service log)", res["message"])
	require.Contains(t, logs.String(), "KEY")

	res = plugintest.Call(t, p, "test_config", map[string]any{"api_url": "ftp://x", "pid": "1", "key": "k"}, nil)
	require.Equal(t, false, res["ok"])
	require.Contains(t, res["message"], "api_url")

	res = plugintest.Call(t, p, "test_config", epayConfig("http://127.0.0.1:9"), nil)
	require.Equal(t, false, res["ok"])
	require.Contains(t, res["message"], "cannot reach")
}

func TestEpayRefundOnAnOpenCircuitFailsTheCallUnsent(t *testing.T) {
	t.Parallel()
	fake := startEpay(t, epay.Options{})
	fake.DropNotify(true)
	p := loadEpay(t)
	cfg := epayConfig(fake.URL())
	created := plugintest.Call(t, p, "create_payment", cfg, map[string]any{
		"payment_id": "pay-r2", "amount": "10.00", "currency": "CNY", "subject": "x", "notify_url": "http://127.0.0.1:9/cb",
	})
	require.NoError(t, fake.Pay(created["gateway_payment_id"].(string)))

	// Five failed attempts open the host's breaker (two queries of three
	// attempts each).
	fake.InjectFault(epay.Fault{Path: "/api.php", Act: "order", Status: http.StatusInternalServerError})
	for range 2 {
		_, err := plugintest.CallErr(p, "query_payment", cfg, map[string]any{"payment_id": "pay-r2"})
		require.Error(t, err)
	}
	_, err := plugintest.CallErr(p, "refund", cfg, map[string]any{
		"payment_id": "pay-r2", "gateway_payment_id": created["gateway_payment_id"], "amount": "1.00", "currency": "CNY",
	})
	require.ErrorIs(t, err, outbound.ErrCircuitOpen, "the service can answer Unavailable")
	require.Empty(t, fake.Refunds())
}

// Some deployments answer code and status as strings ("1"), others as
// numbers; both read the same.
func TestEpayReadsCodesAsNumbersOrStrings(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("act") {
		case "order":
			_, _ = io.WriteString(w, `{"code":"1","msg":"succ","trade_no":"2026X","out_trade_no":"pay-s","money":"3.00","status":"1","endtime":"2026-01-02 03:04:05"}`)
		case "refund":
			_, _ = io.WriteString(w, `{"code":"0","msg":"退款成功"}`)
		}
	}))
	t.Cleanup(srv.Close)
	p := loadEpay(t)
	cfg := epayConfig(srv.URL)
	q := plugintest.Call(t, p, "query_payment", cfg, map[string]any{"payment_id": "pay-s"})
	require.Equal(t, "success", q["status"])
	require.Equal(t, "2026-01-02T03:04:05+08:00", q["paid_at"])
	r := plugintest.Call(t, p, "refund", cfg, map[string]any{"payment_id": "pay-s", "amount": "3.00", "currency": "CNY"})
	require.Equal(t, "succeeded", r["status"])
}

func TestEpayParseCallbackIsSafeUnderConcurrentCalls(t *testing.T) {
	t.Parallel()
	p := loadEpay(t)
	cfg := epayConfig("https://pay.example.com")
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := "pay-c" + strconv.Itoa(i)
			key := "k3y"
			if i%2 == 1 {
				key = "wrong"
			}
			payload := callbackPayload(t, map[string]string{
				"pid": "1001", "trade_no": "T" + strconv.Itoa(i), "out_trade_no": id, "type": "alipay",
				"name": "x", "money": "1.00", "trade_status": "TRADE_SUCCESS",
			}, key)
			out, err := plugintest.CallErr(p, "parse_callback", cfg, map[string]any{"method": "GET", "payload": payload})
			if err != nil {
				errs <- err.Error()
				return
			}
			var res map[string]any
			_ = json.Unmarshal([]byte(out), &res)
			if (res["valid"] == true) != (i%2 == 0) || (i%2 == 0 && res["payment_id"] != id) {
				errs <- out
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
