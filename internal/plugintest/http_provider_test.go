package plugintest_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/fakes/provider"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
)

func providerSetup(t *testing.T) (*plugin.Plugin, *provider.Server, map[string]any) {
	t.Helper()
	api := provider.New(provider.Options{})
	require.NoError(t, api.Start())
	t.Cleanup(api.Close)
	p := plugintest.Load(t, "provider/http_provider.lua", plugin.Options{})
	return p, api, map[string]any{"api_url": api.URL() + "/", "token": api.Token()}
}

func provisionInput(order string) map[string]any {
	return map[string]any{
		"order_id": order, "instance_id": "i-" + order, "customer_id": "c-1",
		"product": map[string]any{"id": "prod-1", "plan": "vps-1g", "name": "VPS"},
	}
}

func TestHTTPProviderProvisionTwiceForOneOrderMakesOneInstance(t *testing.T) {
	t.Parallel()
	p, api, cfg := providerSetup(t)
	first := plugintest.Call(t, p, "provision", cfg, provisionInput("o-1"))
	again := plugintest.Call(t, p, "provision", cfg, provisionInput("o-1"))
	require.Equal(t, "running", first["status"])
	require.NotEmpty(t, first["external_id"])
	require.Equal(t, first["external_id"], again["external_id"])
	require.Equal(t, "vps-1g", first["details"].(map[string]any)["plan"])
	require.Equal(t, 2, api.ProvisionRequests("o-1"))
	require.Equal(t, 1, api.InstancesFor("o-1"))
}

func TestHTTPProviderProvisionIsRetriedThroughA5xx(t *testing.T) {
	t.Parallel()
	p, api, cfg := providerSetup(t)
	api.InjectFault(provider.Fault{Method: http.MethodPost, Prefix: "/v1/instances", Status: http.StatusServiceUnavailable, Times: 1})
	res := plugintest.Call(t, p, "provision", cfg, provisionInput("o-2"))
	require.Equal(t, "running", res["status"])
	require.Equal(t, 1, api.InstancesFor("o-2"))
}

func TestHTTPProviderProvisionFailureIsAnError(t *testing.T) {
	t.Parallel()
	p, api, cfg := providerSetup(t)
	api.FailProvision("o-3", 0, "no capacity in region")
	_, err := plugintest.CallErr(p, "provision", cfg, provisionInput("o-3"))
	require.Error(t, err)
	require.Contains(t, err.Error(), "no capacity in region")
	require.Equal(t, 1, api.ProvisionRequests("o-3"), "a 4xx is an answer, not retried")
}

func TestHTTPProviderDrivesTheInstanceLifecycle(t *testing.T) {
	t.Parallel()
	p, api, cfg := providerSetup(t)
	created := plugintest.Call(t, p, "provision", cfg, provisionInput("o-4"))
	in := map[string]any{"instance_id": "i-o-4", "external_id": created["external_id"]}

	st := plugintest.Call(t, p, "status", cfg, in)
	require.Equal(t, "running", st["status"])

	for _, step := range []struct {
		fn     string
		ok     bool
		status string
	}{
		{"stop", true, "stopped"},
		{"start", true, "running"},
		{"reboot", true, "running"},
		{"suspend", true, "suspended"},
		{"start", false, ""},
		{"unsuspend", true, "running"},
		{"terminate", true, "terminated"},
		{"start", false, ""},
	} {
		res := plugintest.Call(t, p, step.fn, cfg, in)
		require.Equal(t, step.ok, res["ok"], step.fn)
		if step.ok {
			require.Equal(t, step.status, res["status"], step.fn)
		} else {
			require.Contains(t, res["message"], "cannot", step.fn)
		}
	}
	require.Equal(t, 1, api.ActionCalls(created["external_id"].(string), "reboot"))

	st = plugintest.Call(t, p, "status", cfg, in)
	require.Equal(t, "terminated", st["status"])

	st = plugintest.Call(t, p, "status", cfg, map[string]any{"external_id": "inst-9999"})
	require.Equal(t, "error", st["status"])

	_, err := plugintest.CallErr(p, "status", cfg, map[string]any{"external_id": "../v1/ping"})
	require.Error(t, err, "an id is never spliced into the path unchecked")
}

func TestHTTPProviderUsage(t *testing.T) {
	t.Parallel()
	p, api, cfg := providerSetup(t)
	created := plugintest.Call(t, p, "provision", cfg, provisionInput("o-5"))
	id := created["external_id"].(string)
	require.True(t, api.SetUsage(id, []provider.UsageItem{{Metric: "cpu_hours", Quantity: "12.50", Unit: "h"}}))
	in := map[string]any{"external_id": id, "from": "2026-01-01T00:00:00Z", "to": "2026-02-01T00:00:00Z"}
	res := plugintest.Call(t, p, "usage", cfg, in)
	require.Equal(t, []any{map[string]any{"metric": "cpu_hours", "quantity": "12.50", "unit": "h"}}, res["items"])

	require.True(t, api.SetUsage(id, nil))
	out, err := plugintest.CallErr(p, "usage", cfg, in)
	require.NoError(t, err)
	require.JSONEq(t, `{"items":[]}`, out)
}

func TestHTTPProviderTestConfig(t *testing.T) {
	t.Parallel()
	p, api, cfg := providerSetup(t)
	res := plugintest.Call(t, p, "test_config", cfg, nil)
	require.Equal(t, true, res["ok"], res["message"])

	cfg["token"] = "wrong"
	res = plugintest.Call(t, p, "test_config", cfg, nil)
	require.Equal(t, false, res["ok"])
	require.Contains(t, res["message"], "token")
	require.Equal(t, 1, api.UnauthorizedCalls())

	res = plugintest.Call(t, p, "test_config", map[string]any{"api_url": "nope", "token": "x"}, nil)
	require.Equal(t, false, res["ok"])

	info := plugintest.Call(t, p, "info", nil, nil)
	require.Equal(t, "first_party_provider", info["type"])
}
