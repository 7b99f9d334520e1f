package plugintest_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
)

const webhookSecret = "whsec-0123456789abcdef"

// receiver verifies deliveries the way a customer's endpoint should: HMAC
// over timestamp "." raw body, constant-time compare, a freshness window.
type receiver struct {
	srv      *httptest.Server
	status   atomic.Int32
	requests atomic.Int32
	now      func() time.Time

	mu        sync.Mutex
	verified  []map[string]any
	headers   []http.Header
	rejection string
}

func newReceiver(t *testing.T, now func() time.Time) *receiver {
	t.Helper()
	rc := &receiver{now: now}
	rc.status.Store(http.StatusNoContent)
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.requests.Add(1)
		body, _ := io.ReadAll(r.Body)
		ts := r.Header.Get("X-Paymentd-Timestamp")
		m := hmac.New(sha256.New, []byte(webhookSecret))
		m.Write([]byte(ts + "." + string(body)))
		want := "sha256=" + hex.EncodeToString(m.Sum(nil))
		sent, err := time.Parse(time.RFC3339, ts)
		var reject string
		switch {
		case !hmac.Equal([]byte(want), []byte(r.Header.Get("X-Paymentd-Signature"))):
			reject = "bad signature"
		case err != nil || rc.now().Sub(sent).Abs() > 5*time.Minute:
			reject = "stale timestamp"
		}
		var payload map[string]any
		if reject == "" && json.Unmarshal(body, &payload) != nil {
			reject = "not json"
		}
		rc.mu.Lock()
		if reject != "" {
			rc.rejection = reject
		} else {
			rc.verified = append(rc.verified, payload)
			rc.headers = append(rc.headers, r.Header.Clone())
		}
		rc.mu.Unlock()
		if reject != "" {
			http.Error(w, reject, http.StatusUnauthorized)
			return
		}
		w.WriteHeader(int(rc.status.Load()))
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func webhookSetup(t *testing.T) (*plugin.Plugin, *receiver, map[string]any, time.Time) {
	t.Helper()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	p := plugintest.Load(t, "notifier/webhook.lua", plugin.Options{Now: func() time.Time { return now }})
	rc := newReceiver(t, func() time.Time { return now })
	cfg := map[string]any{"url": rc.srv.URL + "/hooks", "secret": webhookSecret, "headers": map[string]string{"X-Tenant": "acme"}}
	return p, rc, cfg, now
}

func sendInput() map[string]any {
	return map[string]any{"notification_id": "n-1", "recipient": "ops@example.com", "subject": "Payment received", "body": `{"event_type":"order_paid"}`}
}

func TestWebhookSendIsSignedAndVerifiable(t *testing.T) {
	t.Parallel()
	p, rc, cfg, now := webhookSetup(t)
	res := plugintest.Call(t, p, "send", cfg, sendInput())
	require.Equal(t, "sent", res["status"], res["message"])

	rc.mu.Lock()
	defer rc.mu.Unlock()
	require.Empty(t, rc.rejection)
	require.Len(t, rc.verified, 1)
	require.Equal(t, map[string]any{
		"notification_id": "n-1",
		"recipient":       "ops@example.com",
		"subject":         "Payment received",
		"body":            `{"event_type":"order_paid"}`,
		"sent_at":         now.Format(time.RFC3339),
	}, rc.verified[0])
	h := rc.headers[0]
	require.Equal(t, now.Format(time.RFC3339), h.Get("X-Paymentd-Timestamp"))
	require.Equal(t, "application/json", h.Get("Content-Type"))
	require.Equal(t, "n-1", h.Get("X-Paymentd-Notification-Id"))
	require.Equal(t, "acme", h.Get("X-Tenant"))
}

func TestWebhookSignatureWithTheWrongSecretIsRejected(t *testing.T) {
	t.Parallel()
	p, rc, cfg, _ := webhookSetup(t)
	cfg["secret"] = "another-secret-of-16+"
	res := plugintest.Call(t, p, "send", cfg, sendInput())
	require.Equal(t, "failed", res["status"])
	require.Equal(t, false, res["retryable"], "a 401 will not get better by itself")
	rc.mu.Lock()
	defer rc.mu.Unlock()
	require.Equal(t, "bad signature", rc.rejection)
}

func TestWebhookFailuresSayWhetherToRetry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status    int
		retryable bool
	}{
		{http.StatusInternalServerError, true},
		{http.StatusServiceUnavailable, true},
		{http.StatusTooManyRequests, true},
		{http.StatusRequestTimeout, true},
		{http.StatusBadRequest, false},
		{http.StatusNotFound, false},
		{http.StatusGone, false},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			t.Parallel()
			p, rc, cfg, _ := webhookSetup(t)
			rc.status.Store(int32(tc.status))
			res := plugintest.Call(t, p, "send", cfg, sendInput())
			require.Equal(t, "failed", res["status"])
			require.Equal(t, tc.retryable, res["retryable"])
			require.EqualValues(t, 1, rc.requests.Load(), "one attempt per send: the notification queue retries")
		})
	}
}

func TestWebhookUnreachableReceiverIsRetryable(t *testing.T) {
	t.Parallel()
	p, _, cfg, _ := webhookSetup(t)
	cfg["url"] = "http://127.0.0.1:9/hooks"
	res := plugintest.Call(t, p, "send", cfg, sendInput())
	require.Equal(t, "failed", res["status"])
	require.Equal(t, true, res["retryable"])
}

func TestWebhookValidateConfig(t *testing.T) {
	t.Parallel()
	p, _, cfg, _ := webhookSetup(t)
	out, err := plugintest.CallErr(p, "validate_config", cfg, nil)
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":true,"errors":[]}`, out)

	res := plugintest.Call(t, p, "validate_config", map[string]any{
		"url": "ftp://example.com", "secret": "short", "headers": map[string]string{"X-Paymentd-Signature": "x"},
	}, nil)
	require.Equal(t, false, res["ok"])
	keys := map[string]bool{}
	for _, e := range res["errors"].([]any) {
		keys[e.(map[string]any)["key"].(string)] = true
	}
	require.Equal(t, map[string]bool{"url": true, "secret": true, "headers": true}, keys)
}

func TestWebhookRenderAndTestConfig(t *testing.T) {
	t.Parallel()
	p, rc, cfg, _ := webhookSetup(t)
	res := plugintest.Call(t, p, "render", cfg, map[string]any{
		"event_type": "order_paid", "recipient": "ops@example.com",
		"data": map[string]any{"order_id": "ord-1", "amount": "12.30", "currency": "CNY"},
	})
	require.Equal(t, "Payment received for order ord-1", res["subject"])
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(res["body"].(string)), &body))
	require.Equal(t, "order_paid", body["event_type"])
	require.Equal(t, "12.30", body["data"].(map[string]any)["amount"])

	res = plugintest.Call(t, p, "render", cfg, map[string]any{"event_type": "something_new", "data": map[string]any{}})
	require.Equal(t, "Event something_new", res["subject"])

	res = plugintest.Call(t, p, "test_config", cfg, nil)
	require.Equal(t, true, res["ok"], res["message"])
	require.EqualValues(t, 1, rc.requests.Load())

	info := plugintest.Call(t, p, "info", nil, nil)
	require.Equal(t, "webhook", info["channel"])
}
