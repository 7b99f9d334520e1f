package wechatpay_test

import (
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/fakes/wechatpay"
)

var (
	keysOnce            sync.Once
	platformKey, merKey *rsa.PrivateKey
)

func start(t *testing.T, opts wechatpay.Options) *wechatpay.Server {
	t.Helper()
	keysOnce.Do(func() {
		var err error
		platformKey, err = wechatpay.GenerateKey()
		require.NoError(t, err)
		merKey, err = wechatpay.GenerateKey()
		require.NoError(t, err)
	})
	opts.Key = platformKey
	opts.Merchants = []wechatpay.Merchant{{MchID: wechatpay.DefaultMchID, AppID: wechatpay.DefaultAppID,
		SerialNo: wechatpay.DefaultSerialNo, PublicKey: &merKey.PublicKey, APIv3Key: wechatpay.DefaultAPIv3Key}}
	s, err := wechatpay.New(opts)
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(s.Close)
	return s
}

// call sends a request signed as a merchant signs it (Go's crypto/rsa), with
// edit changing the Authorization's parts first.
func call(t *testing.T, s *wechatpay.Server, method, uri, body string, edit func(a *wechatpay.Authorization)) (*http.Response, string) {
	t.Helper()
	a := wechatpay.Authorization{MchID: wechatpay.DefaultMchID, NonceStr: wechatpay.Nonce(), Timestamp: strconv.FormatInt(time.Now().Unix(), 10), SerialNo: wechatpay.DefaultSerialNo}
	sig, err := wechatpay.SignText(merKey, wechatpay.RequestText(method, uri, a.Timestamp, a.NonceStr, body))
	require.NoError(t, err)
	a.Signature = sig
	if edit != nil {
		edit(&a)
	}
	req, err := http.NewRequest(method, s.URL()+uri, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", wechatpay.Scheme+` mchid="`+a.MchID+`",nonce_str="`+a.NonceStr+`",signature="`+a.Signature+`",timestamp="`+a.Timestamp+`",serial_no="`+a.SerialNo+`"`)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// Every answer is signed by the fake's key.
	require.Equal(t, s.KeySerial(), resp.Header.Get("Wechatpay-Serial"))
	require.True(t, wechatpay.VerifyText(&platformKey.PublicKey, wechatpay.AnswerText(resp.Header.Get("Wechatpay-Timestamp"),
		resp.Header.Get("Wechatpay-Nonce"), string(b)), resp.Header.Get("Wechatpay-Signature")), "answer signed")
	return resp, string(b)
}

const order = `{"appid":"wxd678efh567hg6787","mchid":"1900000109","description":"VPS","out_trade_no":"o1","notify_url":"NOTIFY","amount":{"total":1230,"currency":"CNY"}}`

func TestRequestsAreRefusedWithoutTheMerchantsSignatureSerialOrAFreshTimestamp(t *testing.T) {
	t.Parallel()
	s := start(t, wechatpay.Options{})
	defer http.DefaultClient.CloseIdleConnections()
	body := strings.Replace(order, "NOTIFY", "https://shop.example/n", 1)
	for name, edit := range map[string]func(a *wechatpay.Authorization){
		"another serial": func(a *wechatpay.Authorization) { a.SerialNo = "0000" },
		"a stale timestamp": func(a *wechatpay.Authorization) {
			a.Timestamp = strconv.FormatInt(time.Now().Add(-6*time.Minute).Unix(), 10)
		},
		"another nonce":    func(a *wechatpay.Authorization) { a.NonceStr = "X" },
		"another merchant": func(a *wechatpay.Authorization) { a.MchID = "1900000110" },
	} {
		resp, answer := call(t, s, http.MethodPost, "/v3/pay/transactions/native", body, edit)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode, name)
		require.Contains(t, answer, "SIGN_ERROR", name)
	}
	require.Empty(t, s.Orders())
	resp, answer := call(t, s, http.MethodPost, "/v3/pay/transactions/native", body, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, answer)
	require.Contains(t, answer, `"code_url":"weixin://wxpay/bizpayurl?pr=o1"`)
	resp, answer = call(t, s, http.MethodGet, "/v3/pay/transactions/out-trade-no/nope?mchid="+wechatpay.DefaultMchID, "", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Contains(t, answer, "ORDER_NOT_EXIST")
}

// A notification not answered with a 2xx is sent again; the resource opens
// with the APIv3 key and the associated data "transaction".
func TestNotificationsAreSealedSignedAndRetriedUntilA2xx(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	merchant := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"code":"FAIL","message":"busy"}`)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer merchant.Close()
	s := start(t, wechatpay.Options{NotifyScale: 1e-9})
	defer http.DefaultClient.CloseIdleConnections()
	resp, answer := call(t, s, http.MethodPost, "/v3/pay/transactions/native", strings.Replace(order, "NOTIFY", merchant.URL, 1), nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, answer)
	require.NoError(t, s.Pay("o1"))
	require.Eventually(t, func() bool { n := s.Notifications(); return len(n) == 2 && n[1].Acked }, 5*time.Second, 5*time.Millisecond)
	n := s.Notifications()
	require.False(t, n[0].Acked)
	require.Equal(t, http.StatusInternalServerError, n[0].Status)
	require.Equal(t, "TRANSACTION.SUCCESS", n[1].EventType)
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(n[1].Body), &raw))
	var res map[string]string
	require.NoError(t, json.Unmarshal(raw["resource"], &res))
	plain, err := wechatpay.Open(wechatpay.DefaultAPIv3Key, res["nonce"], res["associated_data"], res["ciphertext"])
	require.NoError(t, err)
	require.Equal(t, "transaction", res["associated_data"])
	require.Contains(t, string(plain), `"trade_state":"SUCCESS"`)
	require.True(t, wechatpay.VerifyText(&platformKey.PublicKey, wechatpay.AnswerText(n[1].Header.Get("Wechatpay-Timestamp"),
		n[1].Header.Get("Wechatpay-Nonce"), n[1].Body), n[1].Header.Get("Wechatpay-Signature")))
}
