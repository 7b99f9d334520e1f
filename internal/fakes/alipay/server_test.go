package alipay_test

import (
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/fakes/alipay"
)

// Keys are generated once for the package: 2048-bit generation is slow on
// a shared machine.
var (
	keysOnce        sync.Once
	fakeKey, appKey *rsa.PrivateKey
	otherKey        *rsa.PrivateKey
)

func keys(t *testing.T) {
	t.Helper()
	keysOnce.Do(func() {
		var err error
		fakeKey, err = alipay.GenerateKey()
		require.NoError(t, err)
		appKey, err = alipay.GenerateKey()
		require.NoError(t, err)
		otherKey, err = alipay.GenerateKey()
		require.NoError(t, err)
	})
}

type bundle struct {
	fake *alipay.Server
	key  *rsa.PrivateKey // the app's
}

func start(t *testing.T, opts alipay.Options) bundle {
	t.Helper()
	keys(t)
	if opts.Key == nil {
		opts.Key = fakeKey
	}
	if opts.Apps == nil {
		opts.Apps = []alipay.App{{AppID: alipay.DefaultAppID, SellerID: alipay.DefaultSellerID, PublicKey: &appKey.PublicKey}}
	}
	if opts.NotifyScale == 0 {
		opts.NotifyScale = 1e-9
	}
	s, err := alipay.New(opts)
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(s.Close)
	return bundle{fake: s, key: appKey}
}

// params are the common parameters of a call of method, signed with key.
func params(t *testing.T, key *rsa.PrivateKey, method string, biz map[string]any, extra map[string]string) url.Values {
	t.Helper()
	b, err := json.Marshal(biz)
	require.NoError(t, err)
	p := url.Values{
		"app_id": {alipay.DefaultAppID}, "method": {method}, "format": {"JSON"}, "charset": {"utf-8"},
		"sign_type": {"RSA2"}, "timestamp": {time.Now().In(time.FixedZone("CST", 8*3600)).Format(time.DateTime)},
		"version": {"1.0"}, "biz_content": {string(b)},
	}
	for k, v := range extra {
		p.Set(k, v)
	}
	sig, err := alipay.SignText(key, alipay.SigningString(p, false))
	require.NoError(t, err)
	p.Set("sign", sig)
	return p
}

// call posts a signed call and returns the response node, after checking
// the answer's signature over the node's text as written.
func (e bundle) call(t *testing.T, method string, biz map[string]any) map[string]any {
	t.Helper()
	return e.post(t, params(t, e.key, method, biz, nil), strings.ReplaceAll(method, ".", "_")+"_response", true)
}

func (e bundle) post(t *testing.T, p url.Values, node string, signed bool) map[string]any {
	t.Helper()
	resp, err := http.PostForm(e.fake.GatewayURL(), p)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var whole map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &whole), string(body))
	raw, found := whole[node]
	require.True(t, found, "no %s in %s", node, body)
	if signed {
		var sig string
		require.NoError(t, json.Unmarshal(whole["sign"], &sig))
		pub, err := alipay.ParsePublicKeyPEM(e.fake.PublicKeyPEM())
		require.NoError(t, err)
		require.True(t, alipay.VerifyText(pub, string(raw), sig), "answer signature over %s", raw)
	} else {
		require.NotContains(t, whole, "sign")
	}
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

func TestPrecreateQueryPayAndRefundOncePerRequestNo(t *testing.T) {
	t.Parallel()
	e := start(t, alipay.Options{})
	got := e.call(t, "alipay.trade.precreate", map[string]any{"out_trade_no": "p1", "total_amount": "12.3", "subject": "VPS 1个月"})
	require.Equal(t, "10000", got["code"])
	require.Equal(t, "p1", got["out_trade_no"])
	require.True(t, strings.HasPrefix(got["qr_code"].(string), e.fake.URL()+"/cashier?trade_no="))

	q := e.call(t, "alipay.trade.query", map[string]any{"out_trade_no": "p1"})
	require.Equal(t, "WAIT_BUYER_PAY", q["trade_status"])
	require.Equal(t, "12.30", q["total_amount"])
	require.NotContains(t, q, "send_pay_date")

	r := e.call(t, "alipay.trade.refund", map[string]any{"out_trade_no": "p1", "refund_amount": "1.00", "out_request_no": "r1"})
	require.Equal(t, "ACQ.TRADE_STATUS_ERROR", r["sub_code"], "an unpaid trade has nothing to refund")

	require.NoError(t, e.fake.Pay("p1"))
	q = e.call(t, "alipay.trade.query", map[string]any{"trade_no": q["trade_no"]})
	require.Equal(t, "TRADE_SUCCESS", q["trade_status"])
	require.NotEmpty(t, q["send_pay_date"])

	r = e.call(t, "alipay.trade.refund", map[string]any{"out_trade_no": "p1", "refund_amount": "2.30", "out_request_no": "r1"})
	require.Equal(t, "10000", r["code"])
	require.Equal(t, "Y", r["fund_change"])
	require.Equal(t, "2.30", r["refund_fee"])
	again := e.call(t, "alipay.trade.refund", map[string]any{"out_trade_no": "p1", "refund_amount": "2.30", "out_request_no": "r1"})
	require.Equal(t, "10000", again["code"])
	require.Equal(t, "N", again["fund_change"], "the same out_request_no refunds once")
	require.Equal(t, "2.30", again["refund_fee"])
	require.Len(t, e.fake.Refunds(), 1)
	d := e.call(t, "alipay.trade.refund", map[string]any{"out_trade_no": "p1", "refund_amount": "2.31", "out_request_no": "r1"})
	require.Equal(t, "ACQ.DISCORDANT_REPEAT_REQUEST", d["sub_code"])

	over := e.call(t, "alipay.trade.refund", map[string]any{"out_trade_no": "p1", "refund_amount": "10.01", "out_request_no": "r2"})
	require.Equal(t, "ACQ.REFUND_AMT_NOT_EQUAL_TOTAL", over["sub_code"])
	rq := e.call(t, "alipay.trade.fastpay.refund.query", map[string]any{"out_trade_no": "p1", "out_request_no": "r2"})
	require.Equal(t, "10000", rq["code"])
	require.NotContains(t, rq, "refund_status", "a refused refund does not exist")

	rest := e.call(t, "alipay.trade.refund", map[string]any{"out_trade_no": "p1", "refund_amount": "10.00", "out_request_no": "r2"})
	require.Equal(t, "Y", rest["fund_change"])
	require.Equal(t, "12.30", rest["refund_fee"])
	rq = e.call(t, "alipay.trade.fastpay.refund.query", map[string]any{"out_trade_no": "p1", "out_request_no": "r2"})
	require.Equal(t, "REFUND_SUCCESS", rq["refund_status"])
	require.Equal(t, "10.00", rq["refund_amount"])
	q = e.call(t, "alipay.trade.query", map[string]any{"out_trade_no": "p1"})
	require.Equal(t, "TRADE_CLOSED", q["trade_status"], "refunded in full")
	tr, _ := e.fake.Trade("p1")
	require.Equal(t, "12.30", tr.Refunded)
}

func TestGatewayRefusesBadCallsUnsigned(t *testing.T) {
	t.Parallel()
	e := start(t, alipay.Options{})
	biz := map[string]any{"out_trade_no": "p1", "total_amount": "1.00", "subject": "x"}
	cases := []struct {
		name    string
		p       url.Values
		subCode string
	}{
		{"signed by another key", params(t, otherKey, "alipay.trade.precreate", biz, nil), "isv.invalid-signature"},
		{"unknown app", params(t, appKey, "alipay.trade.precreate", biz, map[string]string{"app_id": "2021999999999999"}), "isv.invalid-app-id"},
		{"RSA (SHA1) sign type", params(t, appKey, "alipay.trade.precreate", biz, map[string]string{"sign_type": "RSA"}), "isv.invalid-signature-type"},
		{"a UTC timestamp", params(t, appKey, "alipay.trade.precreate", biz, map[string]string{"timestamp": time.Now().UTC().Format(time.DateTime)}), "isv.invalid-timestamp"},
		{"unknown method", params(t, appKey, "alipay.trade.pay.now", biz, nil), "isv.invalid-method"},
	}
	tampered := params(t, appKey, "alipay.trade.precreate", biz, nil)
	tampered.Set("biz_content", `{"out_trade_no":"p1","total_amount":"0.01","subject":"x"}`)
	cases = append(cases, struct {
		name    string
		p       url.Values
		subCode string
	}{"a changed amount", tampered, "isv.invalid-signature"})
	for _, c := range cases {
		got := e.post(t, c.p, "error_response", false)
		require.Equal(t, c.subCode, got["sub_code"], c.name)
	}
	require.Empty(t, e.fake.Trades())

	bad := e.call(t, "alipay.trade.precreate", map[string]any{"out_trade_no": "a-uuid-with-hyphens", "total_amount": "1.00", "subject": "x"})
	require.Equal(t, "ACQ.INVALID_PARAMETER", bad["sub_code"], "out_trade_no takes letters, digits and _ only")
	bad = e.call(t, "alipay.trade.precreate", map[string]any{"out_trade_no": "p2", "total_amount": "1.001", "subject": "x"})
	require.Equal(t, "ACQ.INVALID_PARAMETER", bad["sub_code"])
	require.Empty(t, e.fake.Trades())
}

// The fake's verification is Go's crypto/rsa; a request signed by OpenSSL,
// a third implementation, must pass it too.
func TestGatewayVerifiesARequestSignedByOpenSSL(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	e := start(t, alipay.Options{})
	p := params(t, appKey, "alipay.trade.precreate", map[string]any{"out_trade_no": "ossl", "total_amount": "0.01", "subject": "x"}, nil)
	p.Del("sign")
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "app.pem")
	require.NoError(t, os.WriteFile(keyFile, []byte(alipay.PrivateKeyPEM(appKey)), 0o600))
	msg := filepath.Join(dir, "msg")
	require.NoError(t, os.WriteFile(msg, []byte(alipay.SigningString(p, false)), 0o600))
	sig, err := exec.Command("openssl", "dgst", "-sha256", "-sign", keyFile, msg).Output()
	require.NoError(t, err)
	b64, err := exec.Command("openssl", "base64", "-A", "-in", writeTemp(t, dir, sig)).Output()
	require.NoError(t, err)
	p.Set("sign", strings.TrimSpace(string(b64)))
	got := e.post(t, p, "alipay_trade_precreate_response", true)
	require.Equal(t, "10000", got["code"])
}

func writeTemp(t *testing.T, dir string, b []byte) string {
	t.Helper()
	f := filepath.Join(dir, "sig.bin")
	require.NoError(t, os.WriteFile(f, b, 0o600))
	return f
}

// The browser flow: page.pay opens the cashier, Pay sends the buyer back
// signed and notifies until "success".
func TestPagePayCashierNotifyAndReturn(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		forms []url.Values
		cts   []string
		n     int
	)
	merchant := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		v, err := url.ParseQuery(string(b))
		if !assert.NoError(t, err) { // not require: this is the server's goroutine
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		forms = append(forms, v)
		cts = append(cts, r.Header.Get("Content-Type"))
		n++
		if n == 1 {
			_, _ = io.WriteString(w, "fail") // not acknowledged: retried
			return
		}
		_, _ = io.WriteString(w, "success")
	}))
	t.Cleanup(merchant.Close)
	e := start(t, alipay.Options{})
	p := params(t, appKey, "alipay.trade.page.pay",
		map[string]any{"out_trade_no": "web1", "total_amount": "88.8", "subject": "VPS", "product_code": "FAST_INSTANT_TRADE_PAY"},
		map[string]string{"notify_url": merchant.URL + "/notify", "return_url": merchant.URL + "/done"})

	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Get(e.fake.GatewayURL() + "?" + p.Encode())
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	cashier := e.fake.URL() + resp.Header.Get("Location")
	tr, ok := e.fake.Trade("web1")
	require.True(t, ok)
	require.Equal(t, "WAIT_BUYER_PAY", tr.Status)
	resp, err = client.Get(cashier)
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(page), "¥88.8")

	resp, err = client.PostForm(e.fake.URL()+"/cashier/pay", url.Values{"trade_no": {tr.TradeNo}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	back, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "/done", back.Path)
	pub := &fakeKey.PublicKey
	ret := back.Query()
	require.Equal(t, "alipay.trade.page.pay.return", ret.Get("method"))
	require.True(t, alipay.VerifyText(pub, alipay.SigningString(ret, true), ret.Get("sign")))

	require.Eventually(t, func() bool {
		ns := e.fake.Notifications()
		return len(ns) == 2 && ns[1].Acked
	}, 5*time.Second, 5*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.False(t, e.fake.Notifications()[0].Acked)
	require.Equal(t, "application/x-www-form-urlencoded; charset=utf-8", cts[0])
	f := forms[1]
	require.Equal(t, "TRADE_SUCCESS", f.Get("trade_status"))
	require.Equal(t, "88.80", f.Get("total_amount"), "Alipay notifies two decimals")
	require.Equal(t, alipay.DefaultAppID, f.Get("app_id"))
	require.Equal(t, alipay.DefaultSellerID, f.Get("seller_id"))
	require.Equal(t, "RSA2", f.Get("sign_type"))
	require.Equal(t, tr.TradeNo, f.Get("trade_no"))
	require.True(t, alipay.VerifyText(pub, alipay.SigningString(f, true), f.Get("sign")), "notify signed without sign_type")
	require.False(t, alipay.VerifyText(pub, alipay.SigningString(f, false), f.Get("sign")))
	require.Empty(t, f.Get("refund_fee"))
	mu.Unlock()

	// A refund is notified too: refunded in full, the trade is closed.
	r := e.call(t, "alipay.trade.refund", map[string]any{"out_trade_no": "web1", "refund_amount": "88.80", "out_request_no": "back1"})
	require.Equal(t, "Y", r["fund_change"])
	require.Eventually(t, func() bool {
		ns := e.fake.Notifications()
		return len(ns) == 3 && ns[2].Acked
	}, 5*time.Second, 5*time.Millisecond)
	mu.Lock()
	f = forms[2]
	require.Equal(t, "TRADE_CLOSED", f.Get("trade_status"))
	require.Equal(t, "88.80", f.Get("refund_fee"))
	require.Equal(t, "back1", f.Get("out_biz_no"))
	require.NotEmpty(t, f.Get("gmt_refund"))
	require.True(t, alipay.VerifyText(pub, alipay.SigningString(f, true), f.Get("sign")))
	// The same refund again moves nothing and notifies nothing.
	mu.Unlock()
	again := e.call(t, "alipay.trade.refund", map[string]any{"out_trade_no": "web1", "refund_amount": "88.80", "out_request_no": "back1"})
	require.Equal(t, "N", again["fund_change"])
	require.Never(t, func() bool { return len(e.fake.Notifications()) > 3 }, 100*time.Millisecond, 10*time.Millisecond)
	mu.Lock()
}

func TestPagePayWithABadSignatureShowsAnErrorAndCreatesNothing(t *testing.T) {
	t.Parallel()
	e := start(t, alipay.Options{})
	p := params(t, otherKey, "alipay.trade.page.pay",
		map[string]any{"out_trade_no": "web2", "total_amount": "1.00", "subject": "VPS", "product_code": "FAST_INSTANT_TRADE_PAY"}, nil)
	resp, err := http.Get(e.fake.GatewayURL() + "?" + p.Encode())
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(page), "isv.invalid-signature")
	require.Empty(t, e.fake.Trades())
}

func TestNewGeneratesTheDefaultAppAndItsKeys(t *testing.T) {
	t.Parallel()
	s, err := alipay.New(alipay.Options{})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	require.NotNil(t, s.AppKey())
	pub, err := alipay.ParsePublicKeyPEM(s.PublicKeyPEM())
	require.NoError(t, err)
	require.True(t, pub.Equal(&s.Key().PublicKey))
	require.Contains(t, alipay.PrivateKeyPEM(s.AppKey()), "-----BEGIN PRIVATE KEY-----")
}
