package plugintest_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/configschema"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
)

func TestShippedScriptsCompileAgainstTheirContracts(t *testing.T) {
	t.Parallel()
	for rel, want := range map[string]struct {
		typ     plugin.Type
		version string
	}{
		// 1.0.1: repeated parameters in a notification are refused.
		// 1.2.0: declares its currency (CNY) and refuses any other.
		// 1.3.0: api_url is an endpoint ("x-endpoint"); test_config quotes
		// no answer.
		"gateway/epay.lua": {plugin.Gateway, "1.3.0"},
		// 1.0.0: WeChat Pay API v3 (issue 39); 1.1.0: refusals answer
		// {"code":"FAIL","message":"失败"} (info().callback_refusal).
		"gateway/wechatpay.lua": {plugin.Gateway, "1.1.0"},
		// 1.1.0: each interface names its account's currencies.
		"gateway/bank_transfer.lua": {plugin.Gateway, "1.1.0"},
		// 1.0.2: subjects for the service_* events of the renewal cycle;
		// 1.0.3: and for renewal_reminder.
		"notifier/webhook.lua": {plugin.Notifier, "1.0.3"},
		// 1.1.0: api_url is an endpoint ("x-endpoint").
		"provider/http_provider.lua": {plugin.FirstPartyProvider, "1.1.0"},
	} {
		sc := plugintest.Compile(t, rel)
		require.Equal(t, want.typ, sc.Type(), rel)
		require.Equal(t, want.version, sc.Version(), rel)
		require.False(t, sc.HasAdminPage(), rel)
	}
}

// Every URL a plugin sends its secrets to is an endpoint: an update that
// changes it must send the secrets again (configschema.Schema.Merge).
func TestEndpointsAreMarkedInTheConfigSchemas(t *testing.T) {
	t.Parallel()
	for rel, endpoint := range map[string]string{
		"gateway/epay.lua":           "api_url",
		"gateway/stripe.lua":         "api_base",
		"gateway/alipay.lua":         "gateway_url",
		"gateway/wechatpay.lua":      "api_base",
		"provider/http_provider.lua": "api_url",
	} {
		p := plugintest.Load(t, rel, plugin.Options{})
		raw, err := json.Marshal(plugintest.Call(t, p, "config_schema", nil, nil))
		require.NoError(t, err)
		schema, err := configschema.Parse(raw)
		require.NoError(t, err, rel)
		require.Equal(t, []string{endpoint}, schema.Endpoints(), rel)
		require.NotEmpty(t, schema.Secrets(), rel)
	}
}

// Every secret in a config schema is write-only for the admin console.
func TestSecretsAreMarkedInTheConfigSchemas(t *testing.T) {
	t.Parallel()
	for rel, secret := range map[string]string{
		"gateway/epay.lua":           "key",
		"notifier/webhook.lua":       "secret",
		"provider/http_provider.lua": "token",
	} {
		p := plugintest.Load(t, rel, plugin.Options{})
		schema := plugintest.Call(t, p, "config_schema", nil, nil)
		require.Equal(t, "https://json-schema.org/draft/2020-12/schema", schema["$schema"], rel)
		props := schema["properties"].(map[string]any)
		require.Equal(t, true, props[secret].(map[string]any)["x-secret"], rel)
		require.Contains(t, schema["required"], secret, rel)
	}
}
