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

func TestDevFakeAlipayServesUntilCancelledAndPrintsTheApp(t *testing.T) {
	t.Parallel()
	keyDir := filepath.Join(t.TempDir(), "keys")
	run := func() (cfg map[string]any) {
		cfgRE := regexp.MustCompile(`config:\s+(\{.*\})`)
		out, stop := runDev(t, cfgRE, "fake-alipay", "--addr", "127.0.0.1:0", "--key-dir", keyDir)
		require.Contains(t, out, "-----BEGIN PRIVATE KEY-----")
		require.Contains(t, out, "-----BEGIN PUBLIC KEY-----")
		require.NoError(t, json.Unmarshal([]byte(cfgRE.FindStringSubmatch(out)[1]), &cfg))

		// The gateway answers: an unsigned call is refused at the gateway.
		resp, err := http.Get(cfg["gateway_url"].(string) + "?method=alipay.trade.query&app_id=" + cfg["app_id"].(string))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Contains(t, string(body), "isv.missing-signature")
		http.DefaultClient.CloseIdleConnections()
		stop()
		return cfg
	}
	first := run()
	second := run()
	require.Equal(t, first["app_private_key"], second["app_private_key"], "--key-dir keeps the keys")
	require.Equal(t, first["alipay_public_key"], second["alipay_public_key"])
}
