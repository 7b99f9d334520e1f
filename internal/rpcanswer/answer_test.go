package rpcanswer_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/rpcanswer"
)

// A layer's refusal reaches each client in a form it reads: an RPC error
// for gRPC, gRPC-Web and Connect calls, plain text with the HTTP status for
// anything else — a gateway's form-encoded callback or its return by GET
// included, which connect.ErrorWriter alone takes for Connect calls and
// would answer with JSON.
func TestRefusalIsPlainTextUnlessTheClientSpeaksRPC(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rpcanswer.Status(w, r, connect.CodeResourceExhausted, http.StatusRequestEntityTooLarge, "request body too large")
	}))
	t.Cleanup(srv.Close)
	cases := []struct {
		name, method, path, ctype string
		status                    int
		rpc                       bool
	}{
		{"form callback", http.MethodPost, "/callbacks/x", "application/x-www-form-urlencoded", http.StatusRequestEntityTooLarge, false},
		{"callback return by GET", http.MethodGet, "/callbacks/x?out_trade_no=1&trade_status=TRADE_SUCCESS", "", http.StatusRequestEntityTooLarge, false},
		{"XML callback", http.MethodPost, "/callbacks/x", "application/xml", http.StatusRequestEntityTooLarge, false},
		{"Connect JSON", http.MethodPost, "/billing.payment.PaymentService/GetPayment", "application/json; charset=utf-8", http.StatusTooManyRequests, true},
		{"Connect proto", http.MethodPost, "/billing.payment.PaymentService/GetPayment", "application/proto", http.StatusTooManyRequests, true},
		{"Connect GET", http.MethodGet, "/billing.payment.PaymentService/GetPayment?encoding=json&message=%7B%7D", "", http.StatusTooManyRequests, true},
		{"gRPC-Web", http.MethodPost, "/billing.payment.PaymentService/GetPayment", "application/grpc-web+proto", http.StatusOK, true},
	}
	for _, tc := range cases {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader("a=1"))
		require.NoError(t, err)
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err, tc.name)
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, tc.status, resp.StatusCode, tc.name)
		if tc.rpc {
			require.NotContains(t, resp.Header.Get("Content-Type"), "text/plain", tc.name)
			continue
		}
		require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"), tc.name)
		require.Equal(t, "request body too large\n", string(body), tc.name)
	}
}
