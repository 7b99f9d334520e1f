package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/rustbill/paymentd/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPluginCheckAcceptsTheShippedPlugins(t *testing.T) {
	t.Parallel()
	for _, rel := range []string{"gateway/epay.lua", "gateway/alipay.lua", "gateway/wechatpay.lua", "gateway/bank_transfer.lua", "gateway/stripe.lua", "notifier/webhook.lua", "provider/http_provider.lua"} {
		code, stdout, stderr := runCLI(t, "plugin", "check", filepath.Join("..", "..", "plugins", rel))
		require.Equal(t, 0, code, stderr)
		require.Contains(t, stdout, ": ok")
		require.Regexp(t, `(?m)^  version:     \d+\.\d+\.\d+$`, stdout, "the version() of the file")
	}
	_, stdout, _ := runCLI(t, "plugin", "check", filepath.Join("..", "..", "plugins", "gateway", "epay.lua"))
	require.Contains(t, stdout, "type:        gateway (7 functions")
	require.Contains(t, stdout, "secret keys: key")
	require.Contains(t, stdout, "currencies:  CNY\n")
	_, stdout, _ = runCLI(t, "plugin", "check", filepath.Join("..", "..", "plugins", "gateway", "alipay.lua"))
	require.Contains(t, stdout, "secret keys: app_private_key\n", "the Alipay public key is no secret")
	require.Contains(t, stdout, "currencies:  CNY\n")
	_, stdout, _ = runCLI(t, "plugin", "check", filepath.Join("..", "..", "plugins", "gateway", "bank_transfer.lua"))
	require.Contains(t, stdout, `currencies:  each interface names its own (config "currencies")`)
	_, stdout, _ = runCLI(t, "plugin", "check", filepath.Join("..", "..", "plugins", "gateway", "stripe.lua"))
	require.Contains(t, stdout, "secret keys: secret_key, webhook_secret")
	require.Contains(t, stdout, "admin_page:  true")
	require.Regexp(t, `currencies:  .*\bJPY\b.*\bUSD\b`, stdout)
}

func TestPluginCheckRefusesAMalformedCurrencyList(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "gateway")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	src, err := os.ReadFile(filepath.Join("..", "..", "plugins", "gateway", "epay.lua"))
	require.NoError(t, err)
	bad := filepath.Join(dir, "bad.lua")
	require.NoError(t, os.WriteFile(bad, bytes.Replace(src, []byte(`local CURRENCY = "CNY"`), []byte(`local CURRENCY = "yuan"`), 1), 0o644))
	code, _, stderr := runCLI(t, "plugin", "check", bad)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `info().currencies: "yuan" is not an ISO 4217 code`)
}

func TestPluginCheckFailsNamingTheLine(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "gateway")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	bad := filepath.Join(dir, "bad.lua")
	require.NoError(t, os.WriteFile(bad, []byte("function version()\n  return \"1.0.0\"\nend\nfunction info(a, b\n  return \"{}\"\nend\n"), 0o644))
	code, _, stderr := runCLI(t, "plugin", "check", bad)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "line 5")

	// A runtime error of the dry run names its line too.
	src, err := os.ReadFile(filepath.Join("..", "..", "plugins", "gateway", "bank_transfer.lua"))
	require.NoError(t, err)
	broken := regexp.MustCompile(`(?m)^function config_schema\(config_json, input_json\)\n`).ReplaceAll(src, []byte("function config_schema(config_json, input_json)\n  error(\"no schema today\")\n"))
	require.NoError(t, os.WriteFile(bad, broken, 0o644))
	code, _, stderr = runCLI(t, "plugin", "check", bad)
	require.Equal(t, 1, code)
	require.Regexp(t, `line \d+: config_schema\(\) failed`, stderr)
	require.Contains(t, stderr, "no schema today")

	code, _, stderr = runCLI(t, "plugin", "check")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "exactly one FILE")
	code, _, _ = runCLI(t, "plugin", "check", filepath.Join(t.TempDir(), "gateway", "none.lua"))
	require.Equal(t, 1, code)
}

// runDev runs `paymentd dev args...` in the background until its output
// matches printed, and returns that output and stop: stop cancels the
// command (Ctrl-C) and requires it to end without error, promptly.
func runDev(t *testing.T, printed *regexp.Regexp, args ...string) (out string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // a test that fails half way still ends the command
	var stdout, stderr testkit.Logs
	done := make(chan error, 1)
	go func() { done <- cmdDev(ctx, args, &stdout, &stderr) }()
	stop = func() {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not stop on cancel", args[0])
		}
	}
	// Generous: fake-alipay makes two RSA keys first.
	if !assert.Eventually(t, func() bool { return printed.MatchString(stdout.String()) }, 20*time.Second, 10*time.Millisecond) {
		stop()
		t.FailNow()
	}
	return stdout.String(), stop
}

func TestDevFakeEpayServesUntilCancelledAndPrintsTheMerchant(t *testing.T) {
	t.Parallel()
	apiURL := regexp.MustCompile(`api_url: (\S+)`)
	out, stop := runDev(t, apiURL, "fake-epay", "--addr", "127.0.0.1:0", "--pid", "2002", "--key", "demo-key")
	require.Contains(t, out, "pid:     2002")
	require.Contains(t, out, "key:     demo-key")
	require.Contains(t, out, `"pid":"2002"`)

	// The merchant API answers (an unknown order of a known merchant).
	u := apiURL.FindStringSubmatch(out)[1] + "api.php?act=order&pid=2002&key=demo-key&out_trade_no=none"
	resp, err := http.Get(u)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	http.DefaultClient.CloseIdleConnections()
	stop()
}
