package gateway_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/configschema"
	"github.com/rustbill/paymentd/internal/gateway"
	"github.com/rustbill/paymentd/internal/store"
)

func loadedDemo(t *testing.T) *bundle {
	t.Helper()
	b := setup(t)
	b.write(t, "gateway/demo.lua", gatewayScript("1.0.0", "Demo", schemaPidKey))
	b.scan(t)
	return b
}

func TestConfigValidationErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	b := loadedDemo(t)
	for _, tc := range []struct {
		name   string
		config map[string]any
		want   []string
	}{
		{"missing keys", map[string]any{}, []string{"config.key: is required", "config.pid: is required"}},
		{"unknown key", map[string]any{"pid": "1", "key": "k", "extra": true}, []string{"config.extra: is not allowed"}},
		{"wrong type", map[string]any{"pid": 7.0, "key": "k"}, []string{"config.pid: got number, want string"}},
		{"out of range", map[string]any{"pid": "1", "key": "k", "port": 70000.0}, []string{"config.port: "}},
		{"empty secret", map[string]any{"pid": "1", "key": ""}, []string{"config.key: does not satisfy the minLength rule (secret value not shown)"}},
		{"the mask is not a value", map[string]any{"pid": "1", "key": configschema.Mask}, []string{"config.key: ******** is the mask, not a value"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.svc.CreateInterface(b.asAdmin, gateway.NewInterface{PluginName: "demo", DisplayName: "Demo", Config: tc.config})
			requireKind(t, err, apperr.InvalidArgument)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM gateway_interfaces`).Scan(&n))
	require.Zero(t, n)
}

func TestSecretsAreMaskedOnEveryReadAndKeptWhenTheMaskIsSentBack(t *testing.T) {
	t.Parallel()
	b := loadedDemo(t)
	ctx := context.Background()
	created, err := b.svc.CreateInterface(b.asAdmin, gateway.NewInterface{
		PluginName: "demo", DisplayName: "Demo", Config: map[string]any{"pid": "1001", "key": "s3cret"},
	})
	require.NoError(t, err)
	require.False(t, created.Enabled, "created disabled")
	require.Equal(t, map[string]any{"pid": "1001", "key": configschema.Mask}, created.Config)
	id := created.ID

	got, err := b.svc.GetInterface(b.asAdmin, id)
	require.NoError(t, err)
	require.Equal(t, configschema.Mask, got.Config["key"])
	list, _, err := b.svc.ListInterfaces(b.asAdmin, store.GatewayInterfaceFilter{}, 0, 0)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, configschema.Mask, list[0].Config["key"])

	storedKey := func() any {
		gw, err := b.reg.Get(ctx, id)
		require.NoError(t, err)
		var cfg map[string]any
		require.NoError(t, json.Unmarshal([]byte(gw.ConfigJSON), &cfg))
		return cfg["key"]
	}
	require.Equal(t, "s3cret", storedKey(), "the plugin gets the real value")

	// The mask sent back keeps the stored value; so does omitting the key.
	upd, err := b.svc.UpdateInterface(b.asAdmin, id, gateway.InterfaceUpdate{Config: map[string]any{"pid": "1002", "key": configschema.Mask}})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"pid": "1002", "key": configschema.Mask}, upd.Config)
	require.Equal(t, "s3cret", storedKey())
	_, err = b.svc.UpdateInterface(b.asAdmin, id, gateway.InterfaceUpdate{Config: map[string]any{"pid": "1003"}})
	require.NoError(t, err)
	require.Equal(t, "s3cret", storedKey())

	// A new value replaces it; a rename alone keeps the config.
	_, err = b.svc.UpdateInterface(b.asAdmin, id, gateway.InterfaceUpdate{Config: map[string]any{"pid": "1003", "key": "n3w"}})
	require.NoError(t, err)
	require.Equal(t, "n3w", storedKey())
	name := "Renamed"
	upd, err = b.svc.UpdateInterface(b.asAdmin, id, gateway.InterfaceUpdate{DisplayName: &name})
	require.NoError(t, err)
	require.Equal(t, "Renamed", upd.DisplayName)
	require.Equal(t, "n3w", storedKey())

	// A non-secret key omitted is gone (the config is replaced), and what
	// is left is validated.
	_, err = b.svc.UpdateInterface(b.asAdmin, id, gateway.InterfaceUpdate{Config: map[string]any{}})
	requireKind(t, err, apperr.InvalidArgument)
	require.ErrorContains(t, err, "config.pid: is required")

	// No secret in the audit log.
	var audit string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT string_agg(coalesce(before::text, '') || coalesce(after::text, ''), ' ') FROM audit_log WHERE entity_type = 'gateway_interface'`).Scan(&audit))
	require.NotContains(t, audit, "s3cret")
	require.NotContains(t, audit, "n3w")
	require.Contains(t, audit, configschema.Mask)
}

func TestEnableDisableAndPaymentMethods(t *testing.T) {
	t.Parallel()
	b := loadedDemo(t)
	cfg := map[string]any{"pid": "1", "key": "k"}
	on, off := b.create(t, "demo", cfg), b.create(t, "demo", cfg)
	v, err := b.svc.SetInterfaceEnabled(b.asAdmin, on, true)
	require.NoError(t, err)
	require.True(t, v.Enabled)
	_, err = b.svc.SetInterfaceEnabled(b.asAdmin, on, true)
	require.NoError(t, err, "enabling twice is fine")

	methods, err := b.svc.PaymentMethods(b.asCustomer, "")
	require.NoError(t, err)
	require.Len(t, methods, 1)
	require.Equal(t, on, methods[0].ID)
	require.Equal(t, "demo", methods[0].PluginName)
	_, err = b.svc.PaymentMethods(b.anonymous, "")
	requireKind(t, err, apperr.Unauthenticated)

	_, err = b.svc.SetInterfaceEnabled(b.asAdmin, on, false)
	require.NoError(t, err)
	methods, err = b.svc.PaymentMethods(b.asCustomer, "")
	require.NoError(t, err)
	require.Empty(t, methods)

	_, err = b.svc.SetInterfaceEnabled(b.asCustomer, off, true)
	requireKind(t, err, apperr.PermissionDenied)
	_, err = b.svc.SetInterfaceEnabled(b.asAdmin, uuid.New(), true)
	requireKind(t, err, apperr.NotFound)

	var actions []string
	rows, err := b.pool.Query(context.Background(), `SELECT action FROM audit_log WHERE entity_id = $1 ORDER BY id`, on.String())
	require.NoError(t, err)
	for rows.Next() {
		var a string
		require.NoError(t, rows.Scan(&a))
		actions = append(actions, a)
	}
	require.Equal(t, []string{gateway.ActionInterfaceCreate, gateway.ActionInterfaceEnable, gateway.ActionInterfaceDisable}, actions)
}

func TestTestInterfaceRunsTestConfig(t *testing.T) {
	t.Parallel()
	b := loadedDemo(t)
	id := b.create(t, "demo", map[string]any{"pid": "1001", "key": "k"})
	res, err := b.svc.TestInterface(b.asAdmin, id)
	require.NoError(t, err)
	require.Equal(t, gateway.TestResult{OK: true, Message: "pid 1001"}, res)
}

func TestAdminPageIsOptionalAndGetsTheInterfaceConfig(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, "gateway/plain.lua", gatewayScript("1.0.0", "Plain", schemaPidKey))
	b.write(t, "gateway/paged.lua", gatewayScript("1.0.0", "Paged", schemaPidKey)+`
function admin_page(config_json, input_json)
  local cfg, input = json_decode(config_json), json_decode(input_json)
  return "<b>merchant</b> " .. tostring(cfg.pid) .. " for " .. tostring(input.gateway_interface_id)
end
`)
	b.scan(t)
	v, err := b.svc.GetPlugin(b.asAdmin, "paged")
	require.NoError(t, err)
	require.True(t, v.Loaded.HasAdminPage)

	id := b.create(t, "paged", map[string]any{"pid": "1001", "key": "k"})
	text, err := b.svc.AdminPage(b.asAdmin, "paged", &id)
	require.NoError(t, err)
	require.Equal(t, "<b>merchant</b> 1001 for "+id.String(), text, "returned as text; the UI escapes it")
	text, err = b.svc.AdminPage(b.asAdmin, "paged", nil)
	require.NoError(t, err)
	require.Equal(t, "<b>merchant</b> nil for nil", text)

	_, err = b.svc.AdminPage(b.asAdmin, "plain", nil)
	requireKind(t, err, apperr.NotFound)
	_, err = b.svc.AdminPage(b.asAdmin, "plain", &id)
	requireKind(t, err, apperr.NotFound)
	other := b.create(t, "plain", map[string]any{"pid": "1", "key": "k"})
	_, err = b.svc.AdminPage(b.asAdmin, "paged", &other)
	requireKind(t, err, apperr.InvalidArgument)
}
