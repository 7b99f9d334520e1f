package gateway_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/gateway"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/store"
)

// withCurrencies is gatewayScript with info().currencies set to the Lua
// expression lua ("" leaves the key out; a Lua string literal is spliced
// into the JSON as it is, for what json_encode cannot write, such as [])
// and schema as config_schema().
func withCurrencies(lua, schema string) string {
	src := gatewayScript("1.0.0", "Demo", schema)
	switch {
	case lua == "":
		return strings.Replace(src, `, currencies = { "CNY" }`, "", 1)
	case strings.HasPrefix(lua, `"`):
		return strings.Replace(src, `return json_encode({ display_name = "Demo", supports_query = false, supports_refund = false, currencies = { "CNY" } })`,
			`return '{"display_name": "Demo", "currencies": `+strings.Trim(lua, `"`)+`}'`, 1)
	}
	return strings.Replace(src, `currencies = { "CNY" }`, "currencies = "+lua, 1)
}

// schemaWithCurrencies is schemaPidKey with a "currencies" array property.
const schemaWithCurrencies = `{
  "type": "object",
  "required": ["pid", "key"],
  "additionalProperties": false,
  "properties": {
    "pid": {"type": "string", "minLength": 1},
    "key": {"type": "string", "minLength": 1, "x-secret": true},
    "currencies": {"type": "array", "items": {"type": "string"}}
  }
}`

// A plugin whose currency list is wrong would send money in a currency the
// gateway does not book: it does not load, and says why.
func TestBrokenCurrencyDeclarationDisablesThePlugin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, lua, schema, want string
	}{
		{"lowercase", `{ "usd" }`, schemaPidKey, `info().currencies: "usd" is not an ISO 4217 code`},
		{"two letters", `{ "US" }`, schemaPidKey, `"US" is not an ISO 4217 code`},
		{"a number", `{ 840 }`, schemaPidKey, `840 is not an ISO 4217 code`},
		{"a string, not an array", `'CNY'`, schemaPidKey, "info().currencies must be an array"},
		{"empty (Lua encodes {} as an object)", `{}`, schemaPidKey, "info().currencies must be an array"},
		{"an empty array", `"[]"`, schemaPidKey, "info().currencies must not be empty"},
		{"null in the array", `"[null]"`, schemaPidKey, "null is not an ISO 4217 code"},
		{"twice", `{ "CNY", "CNY" }`, schemaPidKey, "info().currencies names CNY twice"},
		{"star beside codes", `{ "*", "CNY" }`, schemaWithCurrencies, `"*" stands alone`},
		{"star without a config property", `{ "*" }`, schemaPidKey, `config_schema() declares no "currencies" property`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := withCurrencies(tc.lua, tc.schema)
			_, err := gateway.Inspect(context.Background(), plugin.NewRuntime(plugin.Options{}), "demo", "gateway", []byte(src))
			require.ErrorContains(t, err, tc.want, "paymentd plugin check refuses it")

			b := setup(t)
			b.write(t, "gateway/demo.lua", src)
			rep := b.scan(t)
			require.Len(t, rep.Changes, 1)
			require.Equal(t, gateway.ChangeError, rep.Changes[0].Kind)
			p := b.plugin(t, "demo")
			require.Equal(t, store.PluginError, p.Status)
			require.Contains(t, p.LastError, tc.want)
		})
	}
}

// multiCurrency is a bundle with the plugin "multi" scanned: it takes USD
// and CNY, and its config may narrow them (schemaWithCurrencies).
func multiCurrency(t *testing.T) *bundle {
	t.Helper()
	b := setup(t)
	b.write(t, "gateway/multi.lua", withCurrencies(`{ "USD", "CNY" }`, schemaWithCurrencies))
	b.scan(t)
	return b
}

func TestInterfaceTakesItsPluginsCurrenciesNarrowedByItsConfig(t *testing.T) {
	t.Parallel()
	b := multiCurrency(t)
	both := b.create(t, "multi", map[string]any{"pid": "1", "key": "k"})
	usd := b.create(t, "multi", map[string]any{"pid": "1", "key": "k", "currencies": []any{"USD"}})
	b.enable(t, both, usd)

	gw := b.get(t, both)
	require.Equal(t, []string{"CNY", "USD"}, gw.Currencies, "sorted")
	require.True(t, gw.Takes("USD"))
	gw = b.get(t, usd)
	require.Equal(t, []string{"USD"}, gw.Currencies)
	require.False(t, gw.Takes("CNY"))

	ids := func(currency string) []uuid.UUID {
		t.Helper()
		methods, err := b.svc.PaymentMethods(b.asCustomer, currency)
		require.NoError(t, err)
		var out []uuid.UUID
		for _, m := range methods {
			out = append(out, m.ID)
		}
		return out
	}
	require.ElementsMatch(t, []uuid.UUID{both, usd}, ids(""))
	require.ElementsMatch(t, []uuid.UUID{both, usd}, ids("USD"))
	require.Equal(t, []uuid.UUID{both}, ids("CNY"))
	require.Empty(t, ids("EUR"))

	// A config may only narrow: a currency the plugin does not take, or
	// something that is no code, is refused when saved.
	_, err := b.svc.CreateInterface(b.asAdmin, gateway.NewInterface{PluginName: "multi", DisplayName: "eur",
		Config: map[string]any{"pid": "1", "key": "k", "currencies": []any{"EUR", "USD"}}})
	requireKind(t, err, apperr.InvalidArgument)
	require.ErrorContains(t, err, "currencies: the plugin does not take EUR (it takes CNY, USD)")
	_, err = b.svc.UpdateInterface(b.asAdmin, usd, gateway.InterfaceUpdate{Config: map[string]any{"pid": "1", "currencies": []any{"usd"}}})
	requireKind(t, err, apperr.InvalidArgument)
	require.ErrorContains(t, err, `"usd" is not an ISO 4217 code`)
	require.Equal(t, []string{"USD"}, b.get(t, usd).Currencies, "unchanged")
}

// The currencies an interface takes are the loaded plugin's: a scan that
// loads a version taking fewer narrows them at once, though Get had the
// interface in its cache.
func TestAnUpgradedPluginsCurrenciesHoldAtOnce(t *testing.T) {
	t.Parallel()
	b := multiCurrency(t)
	id := b.create(t, "multi", map[string]any{"pid": "1", "key": "k"})
	b.enable(t, id)
	require.Equal(t, []string{"CNY", "USD"}, b.get(t, id).Currencies)

	b.write(t, "gateway/multi.lua", strings.Replace(withCurrencies(`{ "USD" }`, schemaWithCurrencies), `"1.0.0"`, `"1.1.0"`, 1))
	rep := b.scan(t)
	require.Equal(t, gateway.ChangeUpgraded, rep.Changes[0].Kind)
	gw := b.get(t, id)
	require.Equal(t, []string{"USD"}, gw.Currencies)
	require.False(t, gw.Takes("CNY"))
}

// bank_transfer: the merchant account decides, so the interface names its
// currencies; one that names none takes nothing.
func TestPluginWhoseAccountDecidesTakesWhatItsInterfaceNames(t *testing.T) {
	t.Parallel()
	b := setup(t)
	src, err := os.ReadFile(filepath.Join("..", "..", "plugins", "gateway", "bank_transfer.lua"))
	require.NoError(t, err)
	b.write(t, "gateway/bank_transfer.lua", string(src))
	b.scan(t)
	cfg := map[string]any{"bank_name": "B", "account_name": "A", "account_number": "1", "currencies": []any{"EUR"}}
	eur := b.create(t, "bank_transfer", cfg)
	b.enable(t, eur)
	require.Equal(t, []string{"EUR"}, b.get(t, eur).Currencies)

	delete(cfg, "currencies")
	_, err = b.svc.CreateInterface(b.asAdmin, gateway.NewInterface{PluginName: "bank_transfer", DisplayName: "x", Config: cfg})
	requireKind(t, err, apperr.InvalidArgument)
	require.ErrorContains(t, err, "currencies", "its schema requires them")

	// An interface saved before the plugin asked for currencies.
	_, err = b.pool.Exec(context.Background(), `UPDATE gateway_interfaces SET config = config - 'currencies' WHERE id = $1`, eur)
	require.NoError(t, err)
	b.reg.Invalidate()
	require.Empty(t, b.get(t, eur).Currencies)
	methods, err := b.svc.PaymentMethods(b.asCustomer, "")
	require.NoError(t, err)
	require.Empty(t, methods, "an interface that takes nothing is no payment method")
}

// A third-party plugin written before currencies were declared still loads
// (the payments made through it settle and refund), but takes no new
// payment until it declares its currencies; the log says so.
func TestPluginThatDeclaresNoCurrencyLoadsButTakesNoNewPayment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.write(t, "gateway/old.lua", withCurrencies("", schemaPidKey))
	rep := b.scan(t)
	require.Equal(t, gateway.ChangeAdded, rep.Changes[0].Kind)
	require.Equal(t, store.PluginLoaded, b.plugin(t, "old").Status)
	require.Contains(t, b.logs.String(), "gateway plugin declares no currencies")
	id := b.create(t, "old", map[string]any{"pid": "1", "key": "k"})
	_, err := b.svc.SetInterfaceEnabled(b.asAdmin, id, true)
	requireKind(t, err, apperr.FailedPrecondition)
	require.ErrorContains(t, err, `takes no currency: plugin "old" declares none in info().currencies`)

	// One enabled before the plugin's currencies were checked.
	_, err = b.pool.Exec(context.Background(), `UPDATE gateway_interfaces SET enabled = true WHERE id = $1`, id)
	require.NoError(t, err)
	b.reg.Invalidate()

	gw := b.get(t, id)
	require.NotNil(t, gw.Plugin, "loaded: old payments settle and refund")
	require.Empty(t, gw.Currencies)
	methods, err := b.svc.PaymentMethods(b.asCustomer, "")
	require.NoError(t, err)
	require.Empty(t, methods)
}
