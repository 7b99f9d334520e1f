package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDevFakeWechatpayServesUntilCancelledAndPrintsTheMerchant(t *testing.T) {
	t.Parallel()
	keyDir := filepath.Join(t.TempDir(), "keys")
	run := func() (cfg map[string]any) {
		cfgRE := regexp.MustCompile(`config:\s+(\{.*\})`)
		out, stop := runDev(t, cfgRE, "fake-wechatpay", "--addr", "127.0.0.1:0", "--key-dir", keyDir)
		require.Contains(t, out, "-----BEGIN PRIVATE KEY-----")
		require.Contains(t, out, "-----BEGIN PUBLIC KEY-----")
		require.NoError(t, json.Unmarshal([]byte(cfgRE.FindStringSubmatch(out)[1]), &cfg))

		// The API answers: an unsigned call is refused, and the refusal is signed.
		resp, err := http.Get(cfg["api_base"].(string) + "/v3/pay/transactions/out-trade-no/x?mchid=" + cfg["mchid"].(string))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.Contains(t, string(body), "SIGN_ERROR")
		require.Equal(t, cfg["wechatpay_serial"], resp.Header.Get("Wechatpay-Serial"))
		http.DefaultClient.CloseIdleConnections()
		stop()
		return cfg
	}
	first := run()
	second := run()
	require.Equal(t, first["merchant_private_key"], second["merchant_private_key"], "--key-dir keeps the keys")
	require.Equal(t, first["wechatpay_public_key"], second["wechatpay_public_key"])
}
