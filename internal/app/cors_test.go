package app_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	"github.com/rustbill/paymentd/internal/testdb"
)

// [server].cors_allowed_origins lets a page on an allowed origin call the
// API from a browser: its preflight is answered (and may be cached) and the
// real call's answer carries the headers the browser needs to read it. A
// page on another origin gets no CORS headers at all, and neither
// /callbacks nor the admin console ever answers cross-origin.
func TestCORSLetsAnAllowedOriginCallTheAPIAndNoOtherOrPath(t *testing.T) {
	t.Parallel()
	cfg := testConfig(testdb.URL(t))
	cfg.Server.CORSAllowedOrigins = []string{"https://shop.example"}
	r := start(t, cfg)
	register := r.baseURL + identitypbconnect.IdentityServiceRegisterProcedure

	do := func(method, url, origin string, header ...string) (*http.Response, string) {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"email":"cors@example.com","password":"long enough password","name":"cors"}`)
		}
		req, err := http.NewRequest(method, url, body)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	preflight := func(url, origin string) *http.Response {
		resp, _ := do(http.MethodOptions, url, origin,
			"Access-Control-Request-Method", "POST",
			"Access-Control-Request-Headers", "authorization,connect-protocol-version,connect-timeout-ms,content-type,x-grpc-web") // sorted, as browsers send it
		return resp
	}

	resp := preflight(register, "https://shop.example")
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	require.Equal(t, "https://shop.example", resp.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, resp.Header.Get("Access-Control-Allow-Methods"), "POST")
	allowed := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers"))
	for _, h := range []string{"content-type", "connect-protocol-version", "connect-timeout-ms", "authorization", "x-grpc-web"} {
		require.Contains(t, allowed, h)
	}
	require.Equal(t, "7200", resp.Header.Get("Access-Control-Max-Age"), "the preflight is cached")
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Credentials"), "never with cookies")

	resp, body := do(http.MethodPost, register, "https://shop.example",
		"Content-Type", "application/json", "Connect-Protocol-Version", "1")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "https://shop.example", resp.Header.Get("Access-Control-Allow-Origin"))
	exposed := strings.ToLower(resp.Header.Get("Access-Control-Expose-Headers"))
	for _, h := range []string{"grpc-status", "grpc-message", "retry-after"} {
		require.Contains(t, exposed, h)
	}

	for name, resp := range map[string]*http.Response{
		"preflight from another origin": preflight(register, "https://evil.example"),
		"preflight to /callbacks":       preflight(r.baseURL+"/callbacks/7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f", "https://shop.example"),
		"preflight to the console":      preflight(r.baseURL+cfg.Server.AdminPath+"/", "https://shop.example"),
	} {
		require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"), name)
		require.Empty(t, resp.Header.Get("Access-Control-Allow-Methods"), name)
	}
	resp, _ = do(http.MethodPost, register, "https://evil.example",
		"Content-Type", "application/json", "Connect-Protocol-Version", "1")
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"), "a real call from another origin")
	require.Empty(t, resp.Header.Get("Access-Control-Expose-Headers"))
}

// No origins configured (the default): not even an allowed-looking origin
// gets CORS headers.
func TestNoCORSWithoutConfiguredOrigins(t *testing.T) {
	t.Parallel()
	r := start(t, testConfig(testdb.URL(t)))
	req, err := http.NewRequest(http.MethodOptions, r.baseURL+identitypbconnect.IdentityServiceRegisterProcedure, nil)
	require.NoError(t, err)
	req.Header.Set("Origin", "https://shop.example")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))
}
