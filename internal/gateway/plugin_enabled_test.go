package gateway_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/gateway"
	"github.com/rustbill/paymentd/internal/store"
)

func TestADisabledPluginHidesItsInterfacesButStaysLoadedForOldPayments(t *testing.T) {
	t.Parallel()
	b := loadedDemo(t)
	ctx := context.Background()
	cfg := map[string]any{"pid": "1001", "key": "k"}
	on, off := b.create(t, "demo", cfg), b.create(t, "demo", cfg)
	_, err := b.svc.SetInterfaceEnabled(b.asAdmin, on, true)
	require.NoError(t, err)

	v, err := b.svc.SetPluginEnabled(b.asAdmin, "demo", false)
	require.NoError(t, err)
	require.False(t, v.Enabled)
	require.Equal(t, store.PluginLoaded, v.Status, "the admin's choice is not the scanner's status")
	require.NotNil(t, v.Loaded, "a disabled plugin stays loaded")

	// Customers no longer see its interfaces, whose own flags stay.
	methods, err := b.svc.PaymentMethods(b.asCustomer, "")
	require.NoError(t, err)
	require.Empty(t, methods)
	iv, err := b.svc.GetInterface(b.asAdmin, on)
	require.NoError(t, err)
	require.True(t, iv.Enabled)
	require.False(t, iv.PluginEnabled)
	list, _, err := b.svc.ListInterfaces(b.asAdmin, store.GatewayInterfaceFilter{}, 0, 0)
	require.NoError(t, err)
	require.Len(t, list, 2)
	for _, l := range list {
		require.False(t, l.PluginEnabled)
	}

	// The payment domain gets the plugin, marked: no new payments, but
	// callbacks, queries and refunds can still call it.
	gw, err := b.reg.Get(ctx, on)
	require.NoError(t, err)
	require.True(t, gw.PluginDisabled)
	require.True(t, gw.Enabled)
	require.NotNil(t, gw.Plugin)
	out, err := gw.Plugin.Call(ctx, "query_payment", gw.ConfigJSON, `{"payment_id":"p"}`)
	require.NoError(t, err)
	require.JSONEq(t, `{"status":"pending"}`, out)

	// No interface of it can be created or enabled meanwhile.
	_, err = b.svc.SetInterfaceEnabled(b.asAdmin, off, true)
	requireKind(t, err, apperr.FailedPrecondition)
	require.ErrorContains(t, err, `plugin "demo" is disabled`)
	_, err = b.svc.CreateInterface(b.asAdmin, gateway.NewInterface{PluginName: "demo", DisplayName: "More", Config: cfg})
	requireKind(t, err, apperr.FailedPrecondition)
	require.ErrorContains(t, err, `plugin "demo" is disabled`)
	// Disabling an interface is still possible (and harmless).
	_, err = b.svc.SetInterfaceEnabled(b.asAdmin, off, false)
	require.NoError(t, err)

	// Enabled again: the enabled interface is offered again.
	v, err = b.svc.SetPluginEnabled(b.asAdmin, "demo", true)
	require.NoError(t, err)
	require.True(t, v.Enabled)
	methods, err = b.svc.PaymentMethods(b.asCustomer, "")
	require.NoError(t, err)
	require.Len(t, methods, 1)
	require.Equal(t, on, methods[0].ID)
	gw, err = b.reg.Get(ctx, on)
	require.NoError(t, err)
	require.False(t, gw.PluginDisabled)
}

func TestAnAdminsDisableSurvivesRescansUpgradesAndBreakage(t *testing.T) {
	t.Parallel()
	b := loadedDemo(t)
	id := b.create(t, "demo", map[string]any{"pid": "1001", "key": "k"})
	_, err := b.svc.SetPluginEnabled(b.asAdmin, "demo", false)
	require.NoError(t, err)

	// Same file, an upgrade, a broken file, a vanished file, the file back:
	// the scanner changes the status every time, never the admin's choice.
	steps := []struct {
		name   string
		change func()
		status string
	}{
		{"rescan", func() {}, store.PluginLoaded},
		{"upgrade", func() { b.write(t, "gateway/demo.lua", gatewayScript("2.0.0", "Demo 2", schemaPidKey)) }, store.PluginLoaded},
		{"broken", func() { b.write(t, "gateway/demo.lua", "function version() end end") }, store.PluginError},
		{"gone", func() { b.remove(t, "gateway/demo.lua") }, store.PluginMissing},
		{"back", func() { b.write(t, "gateway/demo.lua", gatewayScript("2.0.0", "Demo 2", schemaPidKey)) }, store.PluginLoaded},
	}
	for _, s := range steps {
		s.change()
		b.scan(t)
		p := b.plugin(t, "demo")
		require.Equal(t, s.status, p.Status, s.name)
		require.False(t, p.Enabled, "%s: still disabled", s.name)
		// Whatever loads stays loaded: old payments still need it.
		_, loaded := b.reg.Loaded("demo")
		require.Equal(t, s.status == store.PluginLoaded, loaded, s.name)
		gw, err := b.reg.Get(context.Background(), id)
		require.NoError(t, err)
		require.True(t, gw.PluginDisabled, s.name)
		require.Equal(t, loaded, gw.Plugin != nil, s.name)
	}
	require.Equal(t, "2.0.0", b.plugin(t, "demo").Version)

	// A reload by an admin (another instance's start would do the same).
	_, err = b.svc.Reload(b.asAdmin)
	require.NoError(t, err)
	require.False(t, b.plugin(t, "demo").Enabled)
}

func TestPluginEnableAndDisableAreAuditedAndIdempotent(t *testing.T) {
	t.Parallel()
	b := loadedDemo(t)
	for _, enabled := range []bool{false, false, true, true} {
		v, err := b.svc.SetPluginEnabled(b.asAdmin, "demo", enabled)
		require.NoError(t, err)
		require.Equal(t, enabled, v.Enabled)
	}

	rows, err := b.pool.Query(context.Background(),
		`SELECT actor_kind, actor_id, action, before, after FROM audit_log WHERE entity_type = 'plugin' AND entity_id = 'demo' AND action LIKE 'plugin.%able' ORDER BY id`)
	require.NoError(t, err)
	type entry struct {
		kind, id, action string
		before, after    map[string]any
	}
	var got []entry
	for rows.Next() {
		var e entry
		var before, after []byte
		require.NoError(t, rows.Scan(&e.kind, &e.id, &e.action, &before, &after))
		require.NoError(t, json.Unmarshal(before, &e.before))
		require.NoError(t, json.Unmarshal(after, &e.after))
		got = append(got, e)
	}
	require.NoError(t, rows.Err())
	require.Len(t, got, 2, "a repeat changes nothing and writes nothing")
	require.Equal(t, gateway.ActionPluginDisable, got[0].action)
	require.Equal(t, gateway.ActionPluginEnable, got[1].action)
	for _, e := range got {
		require.Equal(t, "admin", e.kind)
		require.Equal(t, b.adminID.String(), e.id)
	}
	require.Equal(t, true, got[0].before["enabled"])
	require.Equal(t, false, got[0].after["enabled"])
	require.Equal(t, false, got[1].before["enabled"])
	require.Equal(t, true, got[1].after["enabled"])
	require.Contains(t, b.logs.String(), "plugin disabled by an admin")
}

func TestPluginEnableAndDisableRefuseWhatTheyCannotDo(t *testing.T) {
	t.Parallel()
	b := loadedDemo(t)
	b.write(t, "notifier/hook.lua", notifierScript("1.0.0"))
	b.scan(t)

	_, err := b.svc.SetPluginEnabled(b.asCustomer, "demo", false)
	requireKind(t, err, apperr.PermissionDenied)
	_, err = b.svc.SetPluginEnabled(b.anonymous, "demo", false)
	requireKind(t, err, apperr.Unauthenticated)
	_, err = b.svc.SetPluginEnabled(b.asAdmin, "nope", false)
	requireKind(t, err, apperr.NotFound)
	_, err = b.svc.SetPluginEnabled(b.asAdmin, "nope", true)
	requireKind(t, err, apperr.NotFound)

	// A notifier cannot be disabled here; enabling it changes nothing.
	_, err = b.svc.SetPluginEnabled(b.asAdmin, "hook", false)
	requireKind(t, err, apperr.FailedPrecondition)
	require.ErrorContains(t, err, "only gateway plugins can be disabled")
	require.True(t, b.plugin(t, "hook").Enabled)
	v, err := b.svc.SetPluginEnabled(b.asAdmin, "hook", true)
	require.NoError(t, err)
	require.True(t, v.Enabled)
	require.True(t, b.plugin(t, "demo").Enabled, "nothing changed")
}
