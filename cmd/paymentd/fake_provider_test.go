package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/rustbill/paymentd/internal/testkit"
	"github.com/stretchr/testify/require"
)

func TestDevFakeProviderServesUntilCancelledAndPrintsItsSettings(t *testing.T) {
	t.Parallel()
	apiURL := regexp.MustCompile(`api_url: (\S+)`)
	out, stop := runDev(t, apiURL, "fake-provider", "--addr", "127.0.0.1:0", "--token", "demo-token")
	base := apiURL.FindStringSubmatch(out)[1]
	require.Contains(t, out, "token:   demo-token")
	var cfg map[string]string
	require.NoError(t, json.Unmarshal([]byte(regexp.MustCompile(`providerConfig: (\{.*\})`).FindStringSubmatch(out)[1]), &cfg))
	require.Equal(t, map[string]string{"api_url": base, "token": "demo-token", "plan": "vps-1g"}, cfg,
		"the printed providerConfig is what http_provider needs")

	call := func(method, path, token, body string) (int, string) {
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// What http_provider's test_config and provision call, with the token
	// it printed; another token is refused.
	code, body := call(http.MethodGet, "/v1/ping", "demo-token", "")
	require.Equal(t, http.StatusOK, code, body)
	code, _ = call(http.MethodGet, "/v1/ping", "prov-t0ken", "")
	require.Equal(t, http.StatusUnauthorized, code)
	code, body = call(http.MethodPost, "/v1/instances", "demo-token", `{"order_id": "o-1", "plan": "vps-1g", "customer_id": "c-1"}`)
	require.Equal(t, http.StatusCreated, code, body)
	var inst map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &inst))
	require.Equal(t, "running", inst["status"], "no --provision-delay: running at once")
	http.DefaultClient.CloseIdleConnections()
	stop()
}

func TestDevFakeProviderRefusesBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"fake-provider", "--token", ""},
		{"fake-provider", "--provision-delay", "-1s"},
		{"fake-provider", "extra"},
	} {
		var stdout, stderr testkit.Logs
		err := cmdDev(context.Background(), args, &stdout, &stderr)
		var ue usageError
		require.ErrorAs(t, err, &ue, "%v", args)
	}
}
