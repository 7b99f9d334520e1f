package payment_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/payment/paymentrpc"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

func TestCallbackHeadersAreLowerCasedFirstValuedBoundedAndNeverCredentials(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("Stripe-Signature", "t=1,v1=abc")
	h.Add("X-Multi", "first")
	h.Add("X-Multi", "second")
	h.Set("Cookie", "session=secret")
	h.Set("Authorization", "Bearer secret")
	h.Set("Proxy-Authorization", "Basic secret")
	h.Set("X-Huge", strings.Repeat("a", 5000))
	h["x-empty"] = []string{}
	got := payment.CallbackHeaders(h)
	require.Equal(t, map[string]string{"stripe-signature": "t=1,v1=abc", "x-multi": "first"}, got)

	many := http.Header{}
	for i := range 100 {
		many.Set(fmt.Sprintf("X-H%03d", i), "v")
	}
	got = payment.CallbackHeaders(many)
	require.Len(t, got, payment.MaxCallbackHeaders)
	require.Contains(t, got, "x-h000", "the first names in order are kept")
	require.NotContains(t, got, "x-h099")

	big := http.Header{}
	for i := range 20 {
		big.Set(fmt.Sprintf("X-B%02d", i), strings.Repeat("b", 3000))
	}
	total := 0
	for k, v := range payment.CallbackHeaders(big) {
		total += len(k) + len(v)
	}
	require.LessOrEqual(t, total, 32<<10)
	require.Greater(t, total, 28<<10)
}

// recording is a gateway plugin that keeps the input of its last call and
// answers it with answer, or, when that is empty, parse_callback's
// verified notification about nothing ("ignored").
type recording struct {
	mu     sync.Mutex
	input  string
	answer string
}

func (r *recording) Call(_ context.Context, fn, _, input string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.input = input
	if r.answer != "" {
		return r.answer, nil
	}
	return `{"valid":true,"status":"ignored","reason":"event type customer.created","ack":"{\"received\":true}"}`, nil
}

func TestCallbackRouteHandsThePluginTheExactBodyAndTheHeaders(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	gws := &gateways{m: map[uuid.UUID]payment.Gateway{}}
	svc := payment.NewService(pool, slog.New(slog.DiscardHandler), payment.WithGateways(gws), payment.WithPublicURL("http://127.0.0.1:1"))
	id := testfixture.GatewayInterface(t, pool, "recording")
	rec := &recording{}
	gws.set(payment.Gateway{InterfaceID: id, PluginName: "recording", Enabled: true, ConfigJSON: "{}", Plugin: rec, Currencies: []string{"USD"}})
	h := paymentrpc.NewCallbackHandler(svc, slog.New(slog.DiscardHandler))

	for name, body := range map[string][]byte{
		"json with CR LF and trailing space": []byte("{\"id\": \"evt_1\",\r\n  \"amount\": 1230 }\n \t"),
		"bytes that are not UTF-8":           {'{', 0xff, 0xfe, '"', 0x00, 0xc3, '}'},
	} {
		req := httptest.NewRequest(http.MethodPost, payment.CallbackPath+id.String(), bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json; charset=utf-8")
		req.Header.Set("Stripe-Signature", "t=1700000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd,v0=x")
		req.Header.Set("Cookie", "admin_session=secret")
		req.Header.Set("Authorization", "Bearer secret")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		require.Equal(t, http.StatusOK, w.Code, name)
		require.Equal(t, `{"received":true}`, w.Body.String(), "an ignored event is acknowledged with the plugin's ack")

		var in struct {
			Method, ContentType string            `json:"-"`
			Payload             string            `json:"payload"`
			PayloadBase64       *string           `json:"payload_base64"`
			Headers             map[string]string `json:"headers"`
		}
		rec.mu.Lock()
		require.NoError(t, json.Unmarshal([]byte(rec.input), &in), rec.input)
		rec.mu.Unlock()
		require.Equal(t, "t=1700000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd,v0=x", in.Headers["stripe-signature"], name)
		require.Equal(t, "application/json; charset=utf-8", in.Headers["content-type"], name)
		require.NotContains(t, in.Headers, "cookie")
		require.NotContains(t, in.Headers, "authorization")
		if in.PayloadBase64 == nil {
			require.Equal(t, string(body), in.Payload, name)
		} else {
			raw, err := base64.StdEncoding.DecodeString(*in.PayloadBase64)
			require.NoError(t, err)
			require.Equal(t, body, raw, name)
		}
	}
	// The gRPC HandleCallback has no headers: the plugin gets an empty
	// object; an ignored notification answers OK without a payment.
	res, err := paymentrpc.NewHandler(svc).HandleCallback(context.Background(), connect.NewRequest(&paymentpb.PaymentCallbackRequest{
		GatewayInterfaceId: id.String(), Payload: "{}",
	}))
	require.NoError(t, err)
	require.Nil(t, res.Msg.GetPayment())
	require.Contains(t, rec.input, `"headers":{}`)
}

// The bounds are inclusive: a header of exactly 4 KiB (name and value) is
// kept and one byte more is not; headers of exactly 32 KiB in all are kept
// and the next one is not.
func TestCallbackHeadersKeepExactlyTheirBounds(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("X-A", strings.Repeat("a", 4<<10-len("x-a")))
	h.Set("X-B", strings.Repeat("b", 4<<10-len("x-b")+1))
	got := payment.CallbackHeaders(h)
	require.Contains(t, got, "x-a", "4 KiB exactly")
	require.NotContains(t, got, "x-b", "a byte over 4 KiB")

	full := http.Header{}
	for i := range 9 {
		name := fmt.Sprintf("X-E%d", i)
		full.Set(name, strings.Repeat("e", 4<<10-len(name)))
	}
	got = payment.CallbackHeaders(full)
	require.Len(t, got, 8, "eight of 4 KiB fill the 32 KiB exactly; the ninth is left out")
	require.NotContains(t, got, "x-e8")

	// 100 bytes left: a header of a 60-byte name and a 50-byte value does
	// not fit, though its value alone would (the mutation run's survivor:
	// the total counted with the name subtracted).
	near := http.Header{}
	for i := range 8 {
		name := fmt.Sprintf("X-E%d", i)
		n := 4<<10 - len(name)
		if i == 7 {
			n -= 100
		}
		near.Set(name, strings.Repeat("e", n))
	}
	long := "X-Z" + strings.Repeat("z", 57)
	near.Set(long, strings.Repeat("v", 50))
	got = payment.CallbackHeaders(near)
	require.Len(t, got, 8)
	require.NotContains(t, got, strings.ToLower(long), "110 bytes where 100 are left")
}
