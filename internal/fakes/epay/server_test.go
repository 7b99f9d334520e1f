package epay_test

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/testkit"
)

// merchant is the notify receiver: it records what arrived and answers
// whatever answer returns for the n-th call (1-based).
type merchant struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []*http.Request
	forms  []url.Values
	answer func(n int) string
}

func (m *merchant) calls() []url.Values {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]url.Values(nil), m.forms...)
}

type bundle struct {
	epay     *epay.Server
	merchant *merchant
	client   *http.Client
}

func setup(t *testing.T, opts epay.Options) *bundle {
	t.Helper()
	m := &merchant{answer: func(int) string { return "success" }}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		m.mu.Lock()
		m.got = append(m.got, r)
		m.forms = append(m.forms, r.Form)
		n := len(m.got)
		answer := m.answer
		m.mu.Unlock()
		_, _ = io.WriteString(w, answer(n))
	}))
	if opts.NotifyScale == 0 {
		opts.NotifyScale = 0.0001 // 15 s → 1.5 ms
	}
	s := epay.New(opts)
	require.NoError(t, s.Start())
	client := &http.Client{
		Transport: &http.Transport{},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	t.Cleanup(func() {
		s.Close()
		m.srv.Close()
		client.CloseIdleConnections()
	})
	return &bundle{epay: s, merchant: m, client: client}
}

func (b *bundle) createParams(out, money string) url.Values {
	p := url.Values{
		"pid":          {epay.DefaultPID},
		"type":         {"alipay"},
		"out_trade_no": {out},
		"notify_url":   {b.merchant.srv.URL + "/notify"},
		"return_url":   {b.merchant.srv.URL + "/return"},
		"name":         {"VPS 1 month"},
		"money":        {money},
		"clientip":     {"192.0.2.7"},
	}
	p.Set("sign", epay.Sign(p, epay.DefaultKey))
	p.Set("sign_type", "MD5")
	return p
}

func (b *bundle) postJSON(t *testing.T, path string, form url.Values) map[string]any {
	t.Helper()
	resp, err := b.client.PostForm(b.epay.URL()+path, form)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

func (b *bundle) getJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	resp, err := b.client.Get(b.epay.URL() + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

func (b *bundle) create(t *testing.T, out, money string) string {
	t.Helper()
	res := b.postJSON(t, "/mapi.php", b.createParams(out, money))
	require.EqualValues(t, 1, res["code"], res["msg"])
	return res["trade_no"].(string)
}

func TestSignIsMD5OfSortedNonEmptyParamsWithKeyAppended(t *testing.T) {
	t.Parallel()
	p := url.Values{
		"type":         {"alipay"},
		"pid":          {"1001"},
		"out_trade_no": {"abc"},
		"money":        {"1"},
		"name":         {"VPS 1"},
		"param":        {""},
		"sign":         {"ignored"},
		"sign_type":    {"MD5"},
	}
	want := "money=1&name=VPS 1&out_trade_no=abc&pid=1001&type=alipay"
	require.Equal(t, want, epay.SigningString(p))
	sum := md5.Sum([]byte(want + "k3y"))
	require.Equal(t, hex.EncodeToString(sum[:]), epay.Sign(p, "k3y"))
}

func TestCreateWithValidSignatureReturnsTradeNoAndPayURL(t *testing.T) {
	t.Parallel()
	b := setup(t, epay.Options{})
	res := b.postJSON(t, "/mapi.php", b.createParams("p-1", "1"))
	require.EqualValues(t, 1, res["code"])
	tradeNo := res["trade_no"].(string)
	require.True(t, strings.HasPrefix(tradeNo, "20"), tradeNo)
	require.Equal(t, b.epay.URL()+"/submit.php?trade_no="+tradeNo, res["payurl"])

	o, ok := b.epay.Order("p-1")
	require.True(t, ok)
	require.Equal(t, "1", o.Money)
	require.Equal(t, tradeNo, o.TradeNo)
	require.False(t, o.Paid)
}

func TestCreateWxpayAnswersQRCode(t *testing.T) {
	t.Parallel()
	b := setup(t, epay.Options{})
	p := b.createParams("p-wx", "2.00")
	p.Set("type", "wxpay")
	p.Set("sign", epay.Sign(p, epay.DefaultKey))
	res := b.postJSON(t, "/mapi.php", p)
	require.EqualValues(t, 1, res["code"])
	require.NotEmpty(t, res["qrcode"])
	require.Nil(t, res["payurl"])
}

func TestCreateRejectsBadSignatureUnknownPidAndBadMoney(t *testing.T) {
	t.Parallel()
	b := setup(t, epay.Options{})

	tampered := b.createParams("p-2", "1.00")
	tampered.Set("money", "0.01")
	res := b.postJSON(t, "/mapi.php", tampered)
	require.EqualValues(t, -1, res["code"])
	require.Equal(t, "签名错误", res["msg"])

	foreign := b.createParams("p-2", "1.00")
	foreign.Set("pid", "9999")
	foreign.Set("sign", epay.Sign(foreign, epay.DefaultKey))
	res = b.postJSON(t, "/mapi.php", foreign)
	require.EqualValues(t, -1, res["code"])

	bad := b.createParams("p-2", "1.001")
	res = b.postJSON(t, "/mapi.php", bad)
	require.EqualValues(t, -1, res["code"])

	require.Empty(t, b.epay.Orders())
}

func TestRepeatedCreateReturnsTheSameOrderAndDifferentMoneyIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, epay.Options{})
	first := b.create(t, "p-3", "5.00")
	require.Equal(t, first, b.create(t, "p-3", "5.00"))

	res := b.postJSON(t, "/mapi.php", b.createParams("p-3", "6.00"))
	require.EqualValues(t, -1, res["code"])
	require.Len(t, b.epay.Orders(), 1)
}

func TestNotifyRetriesUntilTheMerchantAnswersSuccess(t *testing.T) {
	t.Parallel()
	b := setup(t, epay.Options{})
	b.merchant.answer = func(n int) string {
		if n < 3 {
			return "fail"
		}
		return "success\n"
	}
	tradeNo := b.create(t, "p-4", "1")
	require.NoError(t, b.epay.Pay("p-4"))

	// The round ends at the ack: no fourth attempt.
	require.Eventually(t, func() bool { return b.epay.NotifyRoundsEnded() == 1 }, 5*time.Second, 5*time.Millisecond)
	ns := b.epay.Notifications()
	require.Len(t, ns, 3)
	for i, n := range ns {
		require.Equal(t, i+1, n.Attempt)
		require.Equal(t, http.MethodGet, n.Method)
		require.Equal(t, http.StatusOK, n.Status)
	}
	require.False(t, ns[0].Acked)

	got := b.merchant.calls()[2]
	require.Equal(t, "1", got.Get("money"), "money travels exactly as created")
	require.Equal(t, tradeNo, got.Get("trade_no"))
	require.Equal(t, "p-4", got.Get("out_trade_no"))
	require.Equal(t, "TRADE_SUCCESS", got.Get("trade_status"))
	require.Equal(t, "MD5", got.Get("sign_type"))
	require.Equal(t, epay.Sign(got, epay.DefaultKey), got.Get("sign"))
}

func TestNotifyGivesUpWhenTheScheduleIsExhausted(t *testing.T) {
	t.Parallel()
	b := setup(t, epay.Options{NotifySchedule: []time.Duration{0, time.Millisecond, time.Millisecond}, NotifyScale: 1})
	b.merchant.answer = func(int) string { return "error" }
	b.create(t, "p-5", "1.00")
	require.NoError(t, b.epay.Pay("p-5"))
	require.Eventually(t, func() bool { return b.epay.NotifyRoundsEnded() == 1 }, 5*time.Second, time.Millisecond)
	require.Len(t, b.epay.Notifications(), 3)

	// The merchant console's re-send starts a new round.
	b.merchant.answer = func(int) string { return "success" }
	require.NoError(t, b.epay.Renotify("p-5"))
	require.Eventually(t, func() bool {
		ns := b.epay.Notifications()
		return len(ns) == 4 && ns[3].Acked && ns[3].Attempt == 1
	}, 5*time.Second, time.Millisecond)
}

func TestDroppedNotifiesNeverReachTheMerchant(t *testing.T) {
	t.Parallel()
	b := setup(t, epay.Options{NotifySchedule: []time.Duration{0, time.Millisecond}, NotifyScale: 1})
	b.epay.DropNotify(true)
	b.create(t, "p-6", "1.00")
	require.NoError(t, b.epay.Pay("p-6"))
	require.Eventually(t, func() bool { return len(b.epay.Notifications()) == 2 }, 5*time.Second, time.Millisecond)
	for _, n := range b.epay.Notifications() {
		require.True(t, n.Dropped)
	}
	require.Empty(t, b.merchant.calls())
	o, _ := b.epay.Order("p-6")
	require.True(t, o.Paid, "the order is paid even though the merchant never heard")
}

func TestNotifyByPOSTSendsAForm(t *testing.T) {
	t.Parallel()
	b := setup(t, epay.Options{NotifyMethod: "post"})
	b.create(t, "p-7", "3.50")
	require.NoError(t, b.epay.Pay("p-7"))
	require.Eventually(t, func() bool { return len(b.merchant.calls()) == 1 }, 5*time.Second, time.Millisecond)
	b.merchant.mu.Lock()
	r := b.merchant.got[0]
	b.merchant.mu.Unlock()
	require.Equal(t, http.MethodPost, r.Method)
	require.Empty(t, r.URL.RawQuery)
	require.Equal(t, "3.50", b.merchant.calls()[0].Get("money"))
}

func TestCloseCancelsPendingNotifyRetries(t *testing.T) {
	t.Parallel()
	b := setup(t, epay.Options{NotifySchedule: []time.Duration{0, time.Hour}, NotifyScale: 1})
	b.merchant.answer = func(int) string { return "no" }
	b.create(t, "p-8", "1.00")
	require.NoError(t, b.epay.Pay("p-8"))
	require.Eventually(t, func() bool { return len(b.epay.Notifications()) == 1 }, 5*time.Second, time.Millisecond)
	done := make(chan struct{})
	go func() {
		b.epay.Close()
		close(done)
	}()
	testkit.WaitOrTimeout(t, done, "Close, without waiting for the hour-long retry")
	require.ErrorIs(t, b.epay.Renotify("p-8"), epay.ErrClosed)
}

func TestQueryReportsStatusBeforeAndAfterPaying(t *testing.T) {
	t.Parallel()
	b := setup(t, epay.Options{APITradeNo: true})
	tradeNo := b.create(t, "p-9", "1")
	q := "/api.php?act=order&pid=" + epay.DefaultPID + "&key=" + epay.DefaultKey + "&out_trade_no=p-9"

	res := b.getJSON(t, q)
	require.EqualValues(t, 1, res["code"])
	require.EqualValues(t, 0, res["status"])
	require.Nil(t, res["endtime"])
	require.Equal(t, "1", res["money"])
	require.Equal(t, tradeNo, res["trade_no"])

	require.NoError(t, b.epay.Pay(tradeNo))
	res = b.getJSON(t, "/api.php?act=order&pid="+epay.DefaultPID+"&key="+epay.DefaultKey+"&trade_no="+tradeNo)
	require.EqualValues(t, 1, res["status"])
	require.NotEmpty(t, res["endtime"])
	require.Equal(t, "4200"+tradeNo, res["api_trade_no"])

	res = b.getJSON(t, "/api.php?act=order&pid="+epay.DefaultPID+"&key=wrong&out_trade_no=p-9")
	require.EqualValues(t, -1, res["code"])
	require.Nil(t, res["trade_no"])

	res = b.getJSON(t, "/api.php?act=order&pid="+epay.DefaultPID+"&key="+epay.DefaultKey+"&out_trade_no=nope")
	require.EqualValues(t, -1, res["code"])
}

func TestRefundAnswersTheConfiguredSuccessCodeAndRefusesTooMuch(t *testing.T) {
	t.Parallel()
	b := setup(t, epay.Options{})
	refund := func(money string) map[string]any {
		return b.postJSON(t, "/api.php?act=refund", url.Values{
			"pid": {epay.DefaultPID}, "key": {epay.DefaultKey}, "out_trade_no": {"p-10"}, "money": {money},
		})
	}
	b.create(t, "p-10", "10")

	res := refund("1.00")
	require.EqualValues(t, -1, res["code"], "an unpaid order cannot be refunded")

	require.NoError(t, b.epay.Pay("p-10"))
	res = refund("4.00")
	require.EqualValues(t, 1, res["code"])

	b.epay.SetRefundCode(0)
	res = refund("6")
	require.EqualValues(t, 0, res["code"])
	require.Equal(t, "退款成功", res["msg"])

	res = refund("0.01")
	require.EqualValues(t, -1, res["code"], "everything is refunded already")

	res = b.postJSON(t, "/api.php?act=refund", url.Values{
		"pid": {epay.DefaultPID}, "key": {"wrong"}, "out_trade_no": {"p-10"}, "money": {"1"},
	})
	require.EqualValues(t, -1, res["code"])

	rs := b.epay.Refunds()
	require.Len(t, rs, 2)
	require.Equal(t, "6", rs[1].Money)
	o, _ := b.epay.Order("p-10")
	require.Equal(t, "10.00", o.Refunded)
}

func TestInjectedFaultsAnswerErrorsThenRecover(t *testing.T) {
	t.Parallel()
	b := setup(t, epay.Options{})
	b.create(t, "p-11", "1.00")
	b.epay.InjectFault(epay.Fault{Path: "/api.php", Act: "order", Status: http.StatusBadGateway, Times: 2})
	q := b.epay.URL() + "/api.php?act=order&pid=" + epay.DefaultPID + "&key=" + epay.DefaultKey + "&out_trade_no=p-11"
	for range 2 {
		resp, err := b.client.Get(q)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	}
	require.EqualValues(t, 1, b.getJSON(t, "/api.php?act=order&pid="+epay.DefaultPID+"&key="+epay.DefaultKey+"&out_trade_no=p-11")["code"])

	b.epay.InjectFault(epay.Fault{Path: "/mapi.php", Delay: 50 * time.Millisecond})
	start := time.Now()
	b.create(t, "p-12", "1.00")
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	b.epay.ClearFaults()
}

func TestCashierPagePaysAndSendsTheBuyerBackSigned(t *testing.T) {
	t.Parallel()
	b := setup(t, epay.Options{})
	tradeNo := b.create(t, "p-13", "12.30")

	resp, err := b.client.Get(b.epay.URL() + "/submit.php?trade_no=" + tradeNo)
	require.NoError(t, err)
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(page), "12.30")
	require.Contains(t, string(page), `action="/submit.php/pay"`)

	resp, err = b.client.PostForm(b.epay.URL()+"/submit.php/pay", url.Values{"trade_no": {tradeNo}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	loc, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, "/return", loc.Path)
	q := loc.Query()
	require.Equal(t, epay.Sign(q, epay.DefaultKey), q.Get("sign"))
	require.Equal(t, "12.30", q.Get("money"))

	o, _ := b.epay.Order(tradeNo)
	require.True(t, o.Paid)
	require.Eventually(t, func() bool { return len(b.merchant.calls()) == 1 }, 5*time.Second, time.Millisecond)
}

func TestSubmitCreatesAnOrderFromASignedRedirect(t *testing.T) {
	t.Parallel()
	b := setup(t, epay.Options{})
	p := b.createParams("p-14", "8.88")
	resp, err := b.client.Get(b.epay.URL() + "/submit.php?" + p.Encode())
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	o, ok := b.epay.Order("p-14")
	require.True(t, ok)
	require.Equal(t, "/submit.php?trade_no="+o.TradeNo, resp.Header.Get("Location"))
}
