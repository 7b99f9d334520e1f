package fulfillment_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/fakes/provider"
	"github.com/rustbill/paymentd/internal/fulfillment"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
	"github.com/rustbill/paymentd/internal/secretpass"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
)

// A product's token is stored encrypted; the provisioner decrypts it for
// the plugin call, and the provider gets the clear token. A token that does
// not decrypt (moved from another product) fails the call before the
// plugin runs: the provider never sees the ciphertext.
func TestProvisionerDecryptsTheProductsTokenForThePluginOnly(t *testing.T) {
	t.Parallel()
	api := provider.New(provider.Options{Token: "provider-t0ken-9Xc1"})
	require.NoError(t, api.Start())
	t.Cleanup(api.Close)
	keys, err := secrets.New("k1", map[string][]byte{"k1": bytes.Repeat([]byte{1}, secrets.KeySize)})
	require.NoError(t, err)
	script := plugintest.Load(t, "provider/http_provider.lua", plugin.Options{})
	prov := fulfillment.NewPluginProvisioner(plugin.PluginsFunc(func(name string) (plugin.Caller, string, bool) {
		return script, "", name == "http_provider" // no registry config: the product's settings
	}), keys)

	product := func(token string) store.Product {
		id := uuid.New()
		cfg, err := keys.SealConfig(secretpass.Products.Owner(id), [][]string{{"token"}},
			map[string]any{"api_url": api.URL() + "/", "token": token, "plan": "vps-1g"})
		require.NoError(t, err)
		raw, err := json.Marshal(cfg)
		require.NoError(t, err)
		require.NotContains(t, string(raw), token)
		name := "http_provider"
		return store.Product{ID: id, Name: "VPS 1G", ProviderPlugin: &name, ProviderConfig: raw}
	}
	request := func(p store.Product) fulfillment.ProvisionRequest {
		return fulfillment.ProvisionRequest{Order: store.Order{ID: uuid.New(), CustomerID: uuid.New()}, Product: p, Instance: store.Instance{ID: uuid.New()}}
	}

	good := product(api.Token())
	req := request(good)
	external, _, err := prov.Provision(context.Background(), req)
	require.NoError(t, err)
	require.NotEmpty(t, external)
	require.Equal(t, 1, api.InstancesFor(req.Order.ID.String()))
	require.Zero(t, api.UnauthorizedCalls())

	moved := product("another-t0ken")
	var cfg map[string]any
	require.NoError(t, json.Unmarshal(moved.ProviderConfig, &cfg))
	var goodCfg map[string]any
	require.NoError(t, json.Unmarshal(good.ProviderConfig, &goodCfg))
	cfg["token"] = goodCfg["token"]
	moved.ProviderConfig, err = json.Marshal(cfg)
	require.NoError(t, err)
	req = request(moved)
	_, _, err = prov.Provision(context.Background(), req)
	require.ErrorContains(t, err, "secrets that do not decrypt: provider_config.token")
	require.NotErrorIs(t, err, fulfillment.ErrRefused, "retried: a key configured again repairs it")
	require.Zero(t, api.ProvisionRequests(req.Order.ID.String()), "the plugin never ran")
	require.Zero(t, api.UnauthorizedCalls())
}
