package gateway_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/gateway"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/store"
)

// schemaWithRegion is schemaPidKey plus a required "region".
var schemaWithRegion = strings.Replace(strings.Replace(schemaPidKey,
	`"required": ["pid", "key"]`, `"required": ["pid", "key", "region"]`, 1),
	`"port":`, `"region": {"type": "string", "title": "Region"}, "port":`, 1)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func schemaOf(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m
}

func hasProperty(t *testing.T, schema []byte, prop string) bool {
	t.Helper()
	props, _ := schemaOf(t, schema)["properties"].(map[string]any)
	_, ok := props[prop]
	return ok
}

func TestFirstScanAddsAndLoadsEveryPlugin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, "gateway/demo.lua", gatewayScript("1.0.0", "Demo", schemaPidKey))
	b.write(t, "gateway/README.md", "not a plugin")
	b.write(t, "other/ignored.lua", "this folder is not a plugin type")

	rep := b.scan(t)
	require.Equal(t, 1, rep.Files)
	require.Equal(t, []gateway.Change{{Name: "demo", Kind: gateway.ChangeAdded, FileVersion: "1.0.0"}}, rep.Changes)

	p := b.plugin(t, "demo")
	require.Equal(t, store.PluginLoaded, p.Status)
	require.Equal(t, "gateway", p.Type)
	require.Equal(t, "1.0.0", p.Version)
	require.Equal(t, "gateway/demo.lua", p.Path)
	require.Equal(t, sum(gatewayScript("1.0.0", "Demo", schemaPidKey)), p.Sha256)
	require.Equal(t, "Demo", schemaOf(t, p.Info)["display_name"])
	require.True(t, hasProperty(t, p.ConfigSchema, "pid"))

	l, ok := b.reg.Loaded("demo")
	require.True(t, ok)
	require.Equal(t, plugin.Gateway, l.Type)

	// Nothing changed: the next scan reports nothing and writes nothing.
	rep = b.scan(t)
	require.Empty(t, rep.Changes)
	require.Equal(t, p.UpdatedAt, b.plugin(t, "demo").UpdatedAt)
}

func TestGreaterVersionReplacesTheDefinitionAndPushesTheSchemaToEveryInterface(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, "gateway/demo.lua", gatewayScript("1.0.0", "Demo", schemaPidKey))
	b.scan(t)
	cfg := map[string]any{"pid": "1001", "key": "s3cret"}
	first, second := b.create(t, "demo", cfg), b.create(t, "demo", cfg)
	// Another plugin's interface is not touched.
	b.write(t, "gateway/other.lua", gatewayScript("1.0.0", "Other", schemaPidKey))
	b.scan(t)
	other := b.create(t, "other", cfg)
	stored := map[uuid.UUID]string{}
	for _, id := range []uuid.UUID{first, second} {
		gi, err := store.Q(b.pool).GetGatewayInterface(context.Background(), id)
		require.NoError(t, err)
		stored[id] = string(gi.Config)
	}

	v2 := gatewayScript("1.1.0", "Demo 2", schemaWithRegion)
	b.write(t, "gateway/demo.lua", v2)
	rep := b.scan(t)
	ch, ok := changeOf(rep, "demo")
	require.True(t, ok)
	require.Equal(t, gateway.Change{Name: "demo", Kind: gateway.ChangeUpgraded, PreviousVersion: "1.0.0", FileVersion: "1.1.0", InterfacesUpdated: 2}, ch)
	require.Len(t, rep.Changes, 1)

	p := b.plugin(t, "demo")
	require.Equal(t, "1.1.0", p.Version)
	require.Equal(t, "Demo 2", schemaOf(t, p.Info)["display_name"])
	require.True(t, hasProperty(t, p.ConfigSchema, "region"))
	require.Equal(t, v2, p.Source)
	require.Equal(t, sum(v2), p.Sha256)

	for _, id := range []uuid.UUID{first, second} {
		gi, err := store.Q(b.pool).GetGatewayInterface(context.Background(), id)
		require.NoError(t, err)
		require.True(t, hasProperty(t, gi.ConfigSchema, "region"), "interface %s got the new schema", id)
		require.JSONEq(t, stored[id], string(gi.Config), "configs are not touched")
		gw, err := b.reg.Get(context.Background(), id)
		require.NoError(t, err)
		require.JSONEq(t, `{"pid":"1001","key":"s3cret"}`, gw.ConfigJSON)
	}
	gi, err := store.Q(b.pool).GetGatewayInterface(context.Background(), other)
	require.NoError(t, err)
	require.False(t, hasProperty(t, gi.ConfigSchema, "region"))

	// Both configs lack the new required key: the admins are told, by key,
	// and neither interface can be enabled until its config is fixed.
	require.Len(t, rep.Warnings, 2)
	for _, w := range rep.Warnings {
		require.Contains(t, w, "config.region: is required")
	}
	_, err = b.svc.SetInterfaceEnabled(b.asAdmin, first, true)
	requireKind(t, err, apperr.FailedPrecondition)
	require.ErrorContains(t, err, "config.region: is required")
	_, err = b.svc.UpdateInterface(b.asAdmin, first, gateway.InterfaceUpdate{Config: map[string]any{"pid": "1001", "region": "eu"}})
	require.NoError(t, err)
	_, err = b.svc.SetInterfaceEnabled(b.asAdmin, first, true)
	require.NoError(t, err)

	// Memory runs the new code.
	l, ok := b.reg.Loaded("demo")
	require.True(t, ok)
	require.Equal(t, "1.1.0", l.Version)
}

func TestEqualOrLowerVersionStoresOnlySourceAndHash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, version string }{
		{"equal", "2.0.0"},
		{"lower", "1.9.9"},
		{"lower pre-release", "2.0.0-rc.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.write(t, "gateway/demo.lua", gatewayScript("2.0.0", "Stored", schemaPidKey))
			b.scan(t)
			id := b.create(t, "demo", map[string]any{"pid": "1001", "key": "s3cret"})
			before := b.plugin(t, "demo")
			giBefore, err := store.Q(b.pool).GetGatewayInterface(context.Background(), id)
			require.NoError(t, err)

			file := gatewayScript(tc.version, "File", schemaWithRegion)
			b.write(t, "gateway/demo.lua", file)
			rep := b.scan(t)
			require.Equal(t, []gateway.Change{{Name: "demo", Kind: gateway.ChangeSourceUpdated, PreviousVersion: "2.0.0", FileVersion: tc.version}}, rep.Changes)
			require.Empty(t, rep.Warnings, "no schema was pushed, so nothing to warn about")

			after := b.plugin(t, "demo")
			require.Equal(t, file, after.Source)
			require.Equal(t, sum(file), after.Sha256)
			require.Equal(t, "2.0.0", after.Version, "the stored definition stays")
			require.JSONEq(t, string(before.Info), string(after.Info))
			require.JSONEq(t, string(before.ConfigSchema), string(after.ConfigSchema))
			require.Equal(t, store.PluginLoaded, after.Status)

			giAfter, err := store.Q(b.pool).GetGatewayInterface(context.Background(), id)
			require.NoError(t, err)
			require.JSONEq(t, string(giBefore.ConfigSchema), string(giAfter.ConfigSchema), "interface schemas untouched")
			require.Equal(t, giBefore.UpdatedAt, giAfter.UpdatedAt)

			// Memory runs the file's code (doc.go: stored source, disk and
			// memory agree).
			l, ok := b.reg.Loaded("demo")
			require.True(t, ok)
			require.Equal(t, tc.version, l.Version)
			require.Equal(t, sum(file), l.SHA256)
			gw, err := b.reg.Get(context.Background(), id)
			require.NoError(t, err)
			out, err := gw.Plugin.Call(context.Background(), "info", gw.ConfigJSON, "{}")
			require.NoError(t, err)
			require.Contains(t, out, `"File"`)

			// GetPlugin shows both versions.
			v, err := b.svc.GetPlugin(b.asAdmin, "demo")
			require.NoError(t, err)
			require.Equal(t, "2.0.0", v.Version)
			require.Equal(t, tc.version, v.Loaded.Version)
		})
	}
}

func TestBrokenFileDisablesOnlyItselfAndTheErrorIsVisible(t *testing.T) {
	t.Parallel()
	b := setup(t)
	good := gatewayScript("1.0.0", "Beta", schemaPidKey)
	b.write(t, "gateway/alpha.lua", gatewayScript("1.0.0", "Alpha", schemaPidKey))
	b.write(t, "gateway/beta.lua", good)
	b.scan(t)
	cfg := map[string]any{"pid": "1001", "key": "s3cret"}
	alpha, beta := b.create(t, "alpha", cfg), b.create(t, "beta", cfg)
	b.enable(t, alpha, beta)

	// A syntax error on line 3.
	b.write(t, "gateway/beta.lua", "function version()\n  return \"1.1.0\"\nend end\n")
	rep := b.scan(t)
	require.Len(t, rep.Changes, 1)
	require.Equal(t, gateway.ChangeError, rep.Changes[0].Kind)
	require.Equal(t, "beta", rep.Changes[0].Name)
	require.Contains(t, rep.Changes[0].Error, "line 3")

	// Visible to admins; the definition and the last good source stay.
	v, err := b.svc.GetPlugin(b.asAdmin, "beta")
	require.NoError(t, err)
	require.Equal(t, store.PluginError, v.Status)
	require.Contains(t, v.LastError, "line 3")
	require.Equal(t, "1.0.0", v.Version)
	require.Equal(t, good, v.Source)
	require.Nil(t, v.Loaded, "nothing of beta runs")
	require.Contains(t, b.logs.String(), "plugin disabled")

	// beta hands out no plugin; alpha keeps working.
	gw, err := b.reg.Get(context.Background(), beta)
	require.NoError(t, err)
	require.Nil(t, gw.Plugin)
	gw, err = b.reg.Get(context.Background(), alpha)
	require.NoError(t, err)
	require.NotNil(t, gw.Plugin)
	out, err := gw.Plugin.Call(context.Background(), "create_payment", gw.ConfigJSON, `{"payment_id":"p"}`)
	require.NoError(t, err)
	require.Contains(t, out, "pay 1001")

	// Customers no longer see beta's interface; admins cannot test it.
	methods, err := b.svc.PaymentMethods(b.asCustomer, "")
	require.NoError(t, err)
	require.Len(t, methods, 1)
	require.Equal(t, alpha, methods[0].ID)
	_, err = b.svc.TestInterface(b.asAdmin, beta)
	requireKind(t, err, apperr.FailedPrecondition)
	require.ErrorContains(t, err, "line 3")

	// The same broken file again: nothing to report, nothing written.
	errorRow := b.plugin(t, "beta")
	require.Empty(t, b.scan(t).Changes)
	require.Equal(t, errorRow.UpdatedAt, b.plugin(t, "beta").UpdatedAt)

	// The good file back: the stored bytes, so "recovered".
	b.write(t, "gateway/beta.lua", good)
	rep = b.scan(t)
	require.Equal(t, []gateway.Change{{Name: "beta", Kind: gateway.ChangeRecovered, PreviousVersion: "1.0.0", FileVersion: "1.0.0"}}, rep.Changes)
	require.Equal(t, store.PluginLoaded, b.plugin(t, "beta").Status)
	require.Empty(t, b.plugin(t, "beta").LastError)
	methods, err = b.svc.PaymentMethods(b.asCustomer, "")
	require.NoError(t, err)
	require.Len(t, methods, 2)
}

func TestContractViolationsDisableThePlugin(t *testing.T) {
	t.Parallel()
	full := gatewayScript("1.0.0", "Demo", schemaPidKey)
	for _, tc := range []struct {
		name, src, want string
	}{
		{"missing function", strings.Replace(full, "function refund(", "function not_refund(", 1), `"refund" is missing`},
		{"three parameters", strings.Replace(full, "function refund(config_json, input_json)", "function refund(a, b, c)", 1), "takes 3 parameters"},
		{"bad version", strings.Replace(full, `return "1.0.0"`, `return "one"`, 1), "not a semantic version"},
		{"info fails", strings.Replace(full, "return json_encode({ display_name", "error(\"no info\")\n  return json_encode({ display_name", 1), "info() failed"},
		{"schema not an object", gatewayScript("1.0.0", "Demo", `[1]`), "config_schema() must return a JSON object"},
		{"schema reads a file", gatewayScript("1.0.0", "Demo", `{"$ref": "file:///etc/passwd"}`), "references outside the schema are not allowed"},
		{"saves methods without charge_saved", strings.Replace(full, "supports_refund = false,", "supports_refund = false, saves_payment_methods = true,", 1),
			"saves_payment_methods is true but the script does not define charge_saved and remove_saved"},
		{"charge_saved with one parameter", strings.Replace(full, "supports_refund = false,", "supports_refund = false, saves_payment_methods = true,", 1) +
			"\nfunction charge_saved(x) return \"{}\" end\nfunction remove_saved(a, b) return \"{}\" end\n", `"charge_saved" takes 1 parameters`},
		{"callback_refusal without a media type", strings.Replace(full, "supports_refund = false,", `supports_refund = false, callback_refusal = { content_type = "json", body = "FAIL" },`, 1),
			"info().callback_refusal.content_type must be a media type"},
		{"callback_refusal with no body", strings.Replace(full, "supports_refund = false,", `supports_refund = false, callback_refusal = { content_type = "application/json", body = "" },`, 1),
			"info().callback_refusal.body must be 1 to 1024 bytes of UTF-8"},
		{"callback_refusal with another field", strings.Replace(full, "supports_refund = false,", `supports_refund = false, callback_refusal = { content_type = "text/plain", body = "FAIL", status = 200 },`, 1),
			`info().callback_refusal must be {"content_type", "body"}`},
		{"secret in an array", gatewayScript("1.0.0", "Demo", `{"type":"object","properties":{"keys":{"type":"array","items":{"type":"string","x-secret":true}}}}`), "x-secret is supported only on properties"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.write(t, "gateway/demo.lua", tc.src)
			rep := b.scan(t)
			require.Len(t, rep.Changes, 1)
			require.Equal(t, gateway.ChangeError, rep.Changes[0].Kind)
			p := b.plugin(t, "demo")
			require.Equal(t, store.PluginError, p.Status)
			require.Contains(t, p.LastError, tc.want)
			require.Empty(t, p.Version, "never loaded: no definition yet")
			_, ok := b.reg.Loaded("demo")
			require.False(t, ok)

			// The first file that loads defines it, whatever its version.
			b.write(t, "gateway/demo.lua", gatewayScript("0.0.1", "Fixed", schemaPidKey))
			rep = b.scan(t)
			require.Equal(t, gateway.ChangeUpgraded, rep.Changes[0].Kind)
			p = b.plugin(t, "demo")
			require.Equal(t, "0.0.1", p.Version)
			require.Equal(t, "Fixed", schemaOf(t, p.Info)["display_name"])
		})
	}
}

func TestDeletedFileIsMarkedMissingAndUnloaded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := gatewayScript("1.0.0", "Demo", schemaPidKey)
	b.write(t, "gateway/demo.lua", src)
	b.scan(t)
	id := b.create(t, "demo", map[string]any{"pid": "1", "key": "k"})

	b.remove(t, "gateway/demo.lua")
	rep := b.scan(t)
	require.Equal(t, 0, rep.Files)
	require.Len(t, rep.Changes, 1)
	require.Equal(t, gateway.ChangeMissing, rep.Changes[0].Kind)
	p := b.plugin(t, "demo")
	require.Equal(t, store.PluginMissing, p.Status)
	require.Contains(t, p.LastError, "gateway/demo.lua is no longer in the plugin directory")
	require.Equal(t, src, p.Source, "the row keeps the last source")
	_, ok := b.reg.Loaded("demo")
	require.False(t, ok)
	gw, err := b.reg.Get(context.Background(), id)
	require.NoError(t, err)
	require.Nil(t, gw.Plugin)
	require.Empty(t, b.scan(t).Changes, "still gone: nothing new")

	b.write(t, "gateway/demo.lua", src)
	rep = b.scan(t)
	require.Equal(t, gateway.ChangeRecovered, rep.Changes[0].Kind)
	gw, err = b.reg.Get(context.Background(), id)
	require.NoError(t, err)
	require.NotNil(t, gw.Plugin)
}

func TestUnreadableDirectoryChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, "gateway/demo.lua", gatewayScript("1.0.0", "Demo", schemaPidKey))
	b.scan(t)
	reg := gateway.NewRegistry(gateway.RegistryOptions{DB: b.pool, Dir: b.dir + "/does-not-exist", ScanInterval: time.Hour, Logger: quiet})
	_, err := reg.Scan(context.Background())
	require.ErrorIs(t, err, gateway.ErrPluginDir)
	require.Equal(t, store.PluginLoaded, b.plugin(t, "demo").Status, "an unmounted directory does not mark plugins missing")
}

func TestAPluginsKindCannotChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, "gateway/demo.lua", gatewayScript("1.0.0", "Demo", schemaPidKey))
	b.scan(t)
	b.remove(t, "gateway/demo.lua")
	b.write(t, "notifier/demo.lua", notifierScript("2.0.0"))
	rep := b.scan(t)
	require.Equal(t, gateway.ChangeError, rep.Changes[0].Kind)
	require.Contains(t, rep.Changes[0].Error, "a plugin's kind cannot change")
	p := b.plugin(t, "demo")
	require.Equal(t, "gateway", p.Type)
	require.Equal(t, "1.0.0", p.Version)
}

func TestANameInTwoFoldersDisablesBoth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, "gateway/demo.lua", gatewayScript("1.0.0", "Demo", schemaPidKey))
	b.write(t, "notifier/demo.lua", notifierScript("1.0.0"))
	rep := b.scan(t)
	require.Equal(t, gateway.ChangeError, rep.Changes[0].Kind)
	require.Contains(t, rep.Changes[0].Error, "used by both gateway/demo.lua and notifier/demo.lua")
}

func TestOnlyGatewayPluginsBackAnInterface(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, "notifier/hook.lua", notifierScript("1.0.0"))
	b.scan(t)
	require.Equal(t, "notifier", b.plugin(t, "hook").Type)
	_, err := b.svc.CreateInterface(b.asAdmin, gateway.NewInterface{PluginName: "hook", DisplayName: "Hook"})
	requireKind(t, err, apperr.InvalidArgument)
	require.ErrorContains(t, err, "only gateway plugins")
	_, err = b.svc.CreateInterface(b.asAdmin, gateway.NewInterface{PluginName: "nope", DisplayName: "Nope"})
	requireKind(t, err, apperr.NotFound)
}

func TestGetOfAnUnknownInterfaceIsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.reg.Get(context.Background(), uuid.New())
	requireKind(t, err, apperr.NotFound)
}

func TestAFailedCallBecomesThePluginsLastError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src := strings.Replace(gatewayScript("1.0.0", "Demo", schemaPidKey),
		"function query_payment(config_json, input_json)\n", "function query_payment(config_json, input_json)\n  error(\"gateway said no\")\n", 1)
	b.write(t, "gateway/demo.lua", src)
	b.scan(t)
	id := b.create(t, "demo", map[string]any{"pid": "1", "key": "k"})
	gw, err := b.reg.Get(context.Background(), id)
	require.NoError(t, err)
	_, err = gw.Plugin.Call(context.Background(), "query_payment", gw.ConfigJSON, "{}")
	var ce *plugin.CallError
	require.ErrorAs(t, err, &ce)
	p := b.plugin(t, "demo")
	require.Equal(t, store.PluginLoaded, p.Status, "a failed call does not unload the plugin")
	require.Contains(t, p.LastError, "gateway said no")
	require.Contains(t, p.LastError, "query_payment")
}

func TestReloadPicksUpAChangeAndIsAudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, "gateway/demo.lua", gatewayScript("1.0.0", "Demo", schemaPidKey))
	require.NoError(t, b.reg.Start(context.Background()))
	t.Cleanup(b.reg.Stop)
	_, ok := b.reg.Loaded("demo")
	require.True(t, ok, "Start scans once")

	b.write(t, "gateway/demo.lua", gatewayScript("1.2.0", "Demo", schemaPidKey))
	b.write(t, "gateway/new.lua", gatewayScript("0.1.0", "New", schemaPidKey))
	_, err := b.svc.Reload(b.asCustomer)
	requireKind(t, err, apperr.PermissionDenied)
	rep, err := b.svc.Reload(b.asAdmin)
	require.NoError(t, err)
	require.Equal(t, 2, rep.Files)
	require.Len(t, rep.Changes, 2)
	got := map[string]string{}
	for _, c := range rep.Changes {
		got[c.Name] = c.Kind
	}
	require.Equal(t, map[string]string{"demo": gateway.ChangeUpgraded, "new": gateway.ChangeAdded}, got)
	l, _ := b.reg.Loaded("demo")
	require.Equal(t, "1.2.0", l.Version)

	rows, err := b.pool.Query(context.Background(), `SELECT actor_kind, actor_id, action, entity_id FROM audit_log ORDER BY id`)
	require.NoError(t, err)
	var audit []string
	for rows.Next() {
		var kind, id, action, entity string
		require.NoError(t, rows.Scan(&kind, &id, &action, &entity))
		if kind == "admin" {
			require.Equal(t, b.adminID.String(), id)
		}
		audit = append(audit, kind+" "+action+" "+entity)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{
		"system plugin.add demo",
		"admin plugin.upgrade demo",
		"admin plugin.add new",
		"admin plugin.reload " + b.dir,
	}, audit)
}

func TestPeriodicScanPicksUpANewFile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := gateway.NewRegistry(gateway.RegistryOptions{DB: b.pool, Dir: b.dir, ScanInterval: 20 * time.Millisecond, Logger: quiet})
	require.NoError(t, reg.Start(context.Background()))
	require.Error(t, reg.Start(context.Background()), "started twice")
	b.write(t, "gateway/late.lua", gatewayScript("1.0.0", "Late", schemaPidKey))
	require.Eventually(t, func() bool {
		_, ok := reg.Loaded("late")
		return ok
	}, 5*time.Second, 10*time.Millisecond)
	reg.Stop()
	reg.Stop() // twice is fine
}

var quiet = slog.New(slog.DiscardHandler)

func notifierScript(version string) string {
	return `function version() return "` + version + `" end
function info(c, i) return json_encode({ display_name = "Hook", channel = "webhook" }) end
function config_schema(c, i) return '{"type":"object"}' end
function validate_config(c, i) return json_encode({ ok = true, errors = {} }) end
function render(c, i) return json_encode({ subject = "s", body = "b" }) end
function send(c, i) return json_encode({ status = "sent", message = "", retryable = false }) end
function test_config(c, i) return json_encode({ ok = true, message = "" }) end
`
}

func TestAProviderDeclaresUpstreamThroughInfo(t *testing.T) {
	t.Parallel()
	common := `function version() return "1.0.0" end
function config_schema(c, i) return '{"type":"object"}' end
`
	for _, fn := range []string{"test_config", "provision", "status", "start", "stop", "reboot", "suspend", "unsuspend", "terminate", "usage"} {
		common += "function " + fn + "(c, i) return '{}' end\n"
	}
	upstreamInfo := `function info(c, i) return json_encode({ display_name = "Up", type = "upstream_provider" }) end
`
	extra := "function list_plans(c, i) return '{}' end\nfunction get_balance(c, i) return '{}' end\nfunction renew(c, i) return '{}' end\n"

	b := setup(t)
	b.write(t, "provider/first.lua", common+`function info(c, i) return json_encode({ display_name = "First" }) end
`)
	b.write(t, "provider/up.lua", common+upstreamInfo+extra)
	b.write(t, "provider/half.lua", common+upstreamInfo)
	b.scan(t)
	require.Equal(t, "first_party_provider", b.plugin(t, "first").Type)
	require.Equal(t, "upstream_provider", b.plugin(t, "up").Type)
	half := b.plugin(t, "half")
	require.Equal(t, store.PluginError, half.Status)
	require.Contains(t, half.LastError, `upstream_provider function "list_plans" is missing`)
}

// Get serves an interface it read less than a second ago from memory; a
// change through this process is seen at once, one made elsewhere (here:
// behind the registry's back, in SQL) within the second.
func TestGetCachesAnInterfaceBrieflyAndForgetsItOnAChange(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, "gateway/demo.lua", gatewayScript("1.0.0", "Demo", schemaPidKey))
	b.scan(t)
	id := b.create(t, "demo", map[string]any{"pid": "1001", "key": "s3cret"})
	ctx := context.Background()
	get := func() payment.Gateway {
		t.Helper()
		g, err := b.reg.Get(ctx, id)
		require.NoError(t, err)
		return g
	}
	name := get().DisplayName

	_, err := b.pool.Exec(ctx, `UPDATE gateway_interfaces SET display_name = 'renamed elsewhere' WHERE id = $1`, id)
	require.NoError(t, err)
	require.Equal(t, name, get().DisplayName, "read less than a second ago: from memory")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		g, err := b.reg.Get(ctx, id)
		require.NoError(c, err)
		assert.Equal(c, "renamed elsewhere", g.DisplayName)
	}, 3*time.Second, 50*time.Millisecond, "another instance's change is seen within the TTL")

	require.False(t, get().Enabled)
	_, err = b.svc.SetInterfaceEnabled(b.asAdmin, id, true)
	require.NoError(t, err)
	require.True(t, get().Enabled, "a change through this process is seen at once")
}
