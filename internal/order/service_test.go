package order_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/secretpass"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
)

func ptr[T any](v T) *T { return &v }

func TestCreateProductIsAdminOnlyAndChecksCurrencyAndProviderPlugin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := order.NewProduct{Name: "VPS small", Description: "1 vCPU", Price: money.MustParse("12.30"), Currency: "USD"}

	p, err := b.svc.CreateProduct(b.asAdmin, in)
	require.NoError(t, err)
	require.Equal(t, "VPS small", p.Name)
	require.Equal(t, "12.30", p.Price.String())
	require.Equal(t, "USD", p.Currency)
	require.True(t, p.Enabled)
	audits := b.audits(t, "product", p.ID.String())
	require.Len(t, audits, 1)
	require.Equal(t, "admin", audits[0].ActorKind)
	require.Equal(t, b.adminID.String(), audits[0].ActorID)
	require.Equal(t, order.ActionProductCreate, audits[0].Action)

	free := in
	free.Price = money.Zero()
	_, err = b.svc.CreateProduct(b.asAdmin, free)
	require.NoError(t, err, "a free product is allowed")

	_, err = b.svc.CreateProduct(b.asAlice, in)
	requireKind(t, err, apperr.PermissionDenied)
	_, err = b.svc.CreateProduct(b.anonymous, in)
	requireKind(t, err, apperr.Unauthenticated)

	eur := in
	eur.Currency = "EUR"
	_, err = b.svc.CreateProduct(b.asAdmin, eur)
	requireKind(t, err, apperr.InvalidArgument, "EUR is not in [billing].currencies")

	negative := in
	negative.Price = money.MustParse("-1.00")
	_, err = b.svc.CreateProduct(b.asAdmin, negative)
	requireKind(t, err, apperr.InvalidArgument)

	blank := in
	blank.Name = "  "
	_, err = b.svc.CreateProduct(b.asAdmin, blank)
	requireKind(t, err, apperr.InvalidArgument)

	missing := in
	missing.ProviderPlugin = ptr("nope")
	_, err = b.svc.CreateProduct(b.asAdmin, missing)
	requireKind(t, err, apperr.InvalidArgument)

	testfixture.GatewayInterface(t, b.pool, "epay") // a gateway plugin, not a provider
	gateway := in
	gateway.ProviderPlugin = ptr("epay")
	_, err = b.svc.CreateProduct(b.asAdmin, gateway)
	requireKind(t, err, apperr.InvalidArgument)

	b.exec(t, `INSERT INTO plugins (name, type, source, sha256) VALUES ('cloud', 'upstream_provider', '--', repeat('b', 64))`)
	provider := in
	provider.ProviderPlugin = ptr("cloud")
	p, err = b.svc.CreateProduct(b.asAdmin, provider)
	require.NoError(t, err)
	require.Equal(t, "cloud", *p.ProviderPlugin)
}

// A product's provider_config carries the provider's settings, checked
// against the plugin's config schema, beside the product's own attributes;
// a refused one creates nothing, and its secret is never echoed.
func TestCreateProductChecksProviderConfigAgainstThePluginSchema(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// http_provider's schema: api_url and a secret token, nothing else.
	b.exec(t, `INSERT INTO plugins (name, type, source, sha256, config_schema) VALUES ('vps', 'first_party_provider', '--', repeat('c', 64), $1)`,
		`{"type":"object","required":["api_url","token"],"additionalProperties":false,
		  "properties":{"api_url":{"type":"string","pattern":"^https?://"},"token":{"type":"string","minLength":1,"x-secret":true}}}`)
	in := order.NewProduct{Name: "VPS 1G", Price: money.MustParse("5.00"), Currency: "CNY", ProviderPlugin: ptr("vps")}
	products := func() int { return b.count(t, `SELECT count(*) FROM products`) }

	for _, tc := range []struct {
		name   string
		plugin *string
		cfg    map[string]any
		want   []string
	}{
		{"none", ptr("vps"), nil, []string{"provider_config.api_url: is required", "provider_config.token: is required"}},
		{"bad url", ptr("vps"), map[string]any{"api_url": "ftp://x", "token": "s3cr3t-t0ken"}, []string{"provider_config.api_url"}},
		{"bad token", ptr("vps"), map[string]any{"api_url": "https://p.example", "token": 42.0}, []string{"provider_config.token", "secret value not shown"}},
		{"mask", ptr("vps"), map[string]any{"api_url": "https://p.example", "token": "********"}, []string{"is the mask, not a value"}},
		{"no plugin", nil, map[string]any{"plan": "vps-1g"}, []string{"provider_config needs a provider_plugin"}},
	} {
		bad := in
		bad.ProviderPlugin, bad.ProviderConfig = tc.plugin, tc.cfg
		before := products()
		_, err := b.svc.CreateProduct(b.asAdmin, bad)
		requireKind(t, err, apperr.InvalidArgument, tc.name)
		for _, w := range tc.want {
			require.ErrorContains(t, err, w, tc.name)
		}
		require.NotContains(t, err.Error(), "s3cr3t", tc.name)
		require.Equal(t, before, products(), "%s: nothing created", tc.name)
	}

	good := in
	good.ProviderConfig = map[string]any{"api_url": "https://p.example", "token": "s3cr3t-t0ken", "plan": "vps-1g"}
	p, err := b.svc.CreateProduct(b.asAdmin, good)
	require.NoError(t, err)
	require.NotContains(t, string(p.ProviderConfig), "s3cr3t", "stored encrypted")
	require.Contains(t, string(p.ProviderConfig), `"token": "enc:v1:k1:`)
	require.JSONEq(t, `{"api_url":"https://p.example","token":"s3cr3t-t0ken","plan":"vps-1g"}`, b.providerConfig(t, p.ID))
	audits := b.audits(t, "product", p.ID.String())
	require.Len(t, audits, 1)
	raw, err := json.Marshal(audits[0].After)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "s3cr3t", "the audit trail never holds the token")

	// An order freezes the product with its provider_config: what the
	// fulfilment hands the plugin.
	o, err := b.svc.CreateOrder(b.asAlice, p.ID)
	require.NoError(t, err)
	var item struct {
		ProviderPlugin string         `json:"provider_plugin"`
		ProviderConfig map[string]any `json:"provider_config"`
	}
	require.NoError(t, json.Unmarshal(o.Item, &item))
	require.Equal(t, "vps", item.ProviderPlugin)
	require.Equal(t, "vps-1g", item.ProviderConfig["plan"])
	require.NotContains(t, string(o.Item), "s3cr3t", "the order's copy is encrypted too")
	require.Equal(t, "s3cr3t-t0ken", b.frozenConfig(t, o.ID)["token"])
}

// An update changes the product for orders placed from then on; the
// orders already placed keep the copy they froze.
func TestUpdateProductChangesFutureOrdersOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	prod := b.product(t, "10.00", "CNY")
	placed, err := b.svc.CreateOrder(b.asAlice, prod.ID)
	require.NoError(t, err)

	_, err = b.svc.UpdateProduct(b.asAlice, prod.ID, order.ProductUpdate{Enabled: ptr(false)})
	requireKind(t, err, apperr.PermissionDenied)
	_, err = b.svc.UpdateProduct(b.asAdmin, uuid.New(), order.ProductUpdate{Enabled: ptr(false)})
	requireKind(t, err, apperr.NotFound)
	_, err = b.svc.UpdateProduct(b.asAdmin, prod.ID, order.ProductUpdate{Name: ptr(" "), Price: ptr(money.MustParse("1.00"))})
	requireKind(t, err, apperr.InvalidArgument)
	_, err = b.svc.UpdateProduct(b.asAdmin, prod.ID, order.ProductUpdate{Price: ptr(money.MustParse("-0.01"))})
	requireKind(t, err, apperr.InvalidArgument)
	_, err = b.svc.UpdateProduct(b.asAdmin, prod.ID, order.ProductUpdate{ProviderConfig: map[string]any{"plan": "x"}})
	requireKind(t, err, apperr.InvalidArgument, "no provider plugin, no provider config")
	got, err := store.Q(b.pool).GetProduct(context.Background(), prod.ID)
	require.NoError(t, err)
	require.Equal(t, prod, got, "refused updates change nothing")

	up, err := b.svc.UpdateProduct(b.asAdmin, prod.ID, order.ProductUpdate{Name: ptr("VPS L"), Price: ptr(money.MustParse("15.50"))})
	require.NoError(t, err)
	require.Equal(t, "VPS L", up.Name)
	require.Equal(t, "15.50", up.Price.String())
	require.Equal(t, prod.Description, up.Description, "absent fields stay")
	require.True(t, up.Enabled)
	require.Equal(t, "10.00", b.getOrder(t, placed.ID).TotalAmount.String(), "a placed order keeps its price")
	next, err := b.svc.CreateOrder(b.asAlice, prod.ID)
	require.NoError(t, err)
	require.Equal(t, "15.50", next.TotalAmount.String())

	_, err = b.svc.UpdateProduct(b.asAdmin, prod.ID, order.ProductUpdate{Enabled: ptr(false)})
	require.NoError(t, err)
	_, err = b.svc.CreateOrder(b.asAlice, prod.ID)
	require.Error(t, err, "a disabled product cannot be ordered")

	audits := b.audits(t, "product", prod.ID.String())
	require.Len(t, audits, 3)
	require.Equal(t, order.ActionProductUpdate, audits[1].Action)
	require.Equal(t, "10.00", audits[1].Before["price"])
	require.Equal(t, "15.50", audits[1].After["price"])
	require.Equal(t, false, audits[2].After["enabled"])

	free, err := b.svc.UpdateProduct(b.asAdmin, prod.ID, order.ProductUpdate{Price: ptr(money.MustParse("0.00"))})
	require.NoError(t, err, "a price of 0.00 is a free product, as CreateProduct takes one")
	require.True(t, free.Price.IsZero())
}

// A provider_config update replaces the config; a secret it leaves out or
// masks keeps its stored value, so rotating the API URL need not repeat the
// token.
func TestUpdateProductProviderConfigKeepsUnsaidSecrets(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `INSERT INTO plugins (name, type, source, sha256, config_schema) VALUES ('vps', 'first_party_provider', '--', repeat('c', 64), $1)`,
		`{"type":"object","required":["api_url","token"],"additionalProperties":false,
		  "properties":{"api_url":{"type":"string","pattern":"^https?://"},"token":{"type":"string","minLength":1,"x-secret":true}}}`)
	prod, err := b.svc.CreateProduct(b.asAdmin, order.NewProduct{Name: "VPS", Price: money.MustParse("5.00"), Currency: "CNY", ProviderPlugin: ptr("vps"),
		ProviderConfig: map[string]any{"api_url": "https://a.example", "token": "s3cr3t-0ne", "plan": "vps-1g"}})
	require.NoError(t, err)
	config := func() string { return b.providerConfig(t, prod.ID) }

	_, err = b.svc.UpdateProduct(b.asAdmin, prod.ID, order.ProductUpdate{ProviderConfig: map[string]any{"api_url": "gopher://b", "plan": "vps-2g"}})
	requireKind(t, err, apperr.InvalidArgument)
	require.ErrorContains(t, err, "provider_config.api_url")
	require.JSONEq(t, `{"api_url":"https://a.example","token":"s3cr3t-0ne","plan":"vps-1g"}`, config(), "a refused update changes nothing")

	_, err = b.svc.UpdateProduct(b.asAdmin, prod.ID, order.ProductUpdate{ProviderConfig: map[string]any{"api_url": "https://b.example", "plan": "vps-2g"}})
	require.NoError(t, err)
	require.JSONEq(t, `{"api_url":"https://b.example","token":"s3cr3t-0ne","plan":"vps-2g"}`, config(), "the token left out stays")

	_, err = b.svc.UpdateProduct(b.asAdmin, prod.ID, order.ProductUpdate{ProviderConfig: map[string]any{"api_url": "https://b.example", "token": "********"}})
	require.NoError(t, err)
	require.JSONEq(t, `{"api_url":"https://b.example","token":"s3cr3t-0ne"}`, config(), "the masked token stays; plan, left out, is gone")

	_, err = b.svc.UpdateProduct(b.asAdmin, prod.ID, order.ProductUpdate{ProviderConfig: map[string]any{"api_url": "https://b.example", "token": "s3cr3t-tw0"}})
	require.NoError(t, err)
	require.JSONEq(t, `{"api_url":"https://b.example","token":"s3cr3t-tw0"}`, config(), "a new token replaces the old")

	for _, a := range b.audits(t, "product", prod.ID.String()) {
		raw, err := json.Marshal(a)
		require.NoError(t, err)
		require.NotContains(t, string(raw), "s3cr3t", "the audit trail never holds the token")
	}
}

// vpsSchema is http_provider's schema: api_url and a secret token.
const vpsSchema = `{"type":"object","required":["api_url","token"],"additionalProperties":false,
	"properties":{"api_url":{"type":"string","pattern":"^https?://"},"token":{"type":"string","minLength":1,"x-secret":true}}}`

// The provider's token is stored encrypted, bound to the product; an order
// keeps its own copy, bound to the order, which stays as it was placed when
// the product's token changes. Without a key no token is stored, and no
// value that looks encrypted is taken.
func TestProviderSecretsAreEncryptedForTheProductAndEachOrderKeepsItsOwnCopy(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `INSERT INTO plugins (name, type, source, sha256, config_schema) VALUES ('vps', 'first_party_provider', '--', repeat('c', 64), $1)`, vpsSchema)
	prod, err := b.svc.CreateProduct(b.asAdmin, order.NewProduct{Name: "VPS", Price: money.MustParse("5.00"), Currency: "CNY", ProviderPlugin: ptr("vps"),
		ProviderConfig: map[string]any{"api_url": "https://a.example", "token": "t0ken-0ne", "plan": "vps-1g"}})
	require.NoError(t, err)
	first, err := b.svc.CreateOrder(b.asAlice, prod.ID)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"api_url": "https://a.example", "token": "t0ken-0ne", "plan": "vps-1g"}, b.frozenConfig(t, first.ID))

	// The order's copy opens for the order only: not for the product, not
	// for another order.
	sealed := b.frozenConfig(t, first.ID, "raw")["token"].(string)
	require.NotEqual(t, b.storedConfig(t, prod.ID)["token"], sealed, "sealed again for the order")
	_, err = b.keys.Open(sealed, secretpass.Products.Owner(prod.ID).AAD([]string{"token"}))
	require.ErrorIs(t, err, secrets.ErrNotAuthentic)
	second, err := b.svc.CreateOrder(b.asAlice, prod.ID)
	require.NoError(t, err)
	_, err = b.keys.Open(sealed, secretpass.Orders.Owner(second.ID).AAD([]string{"token"}))
	require.ErrorIs(t, err, secrets.ErrNotAuthentic)

	// A new token: the placed order keeps the one it was placed with.
	_, err = b.svc.UpdateProduct(b.asAdmin, prod.ID, order.ProductUpdate{ProviderConfig: map[string]any{"api_url": "https://a.example", "token": "t0ken-tw0"}})
	require.NoError(t, err)
	require.Equal(t, "t0ken-0ne", b.frozenConfig(t, first.ID)["token"])
	third, err := b.svc.CreateOrder(b.asAlice, prod.ID)
	require.NoError(t, err)
	require.Equal(t, "t0ken-tw0", b.frozenConfig(t, third.ID)["token"])

	// A value that looks encrypted is refused, on create and on update.
	products := b.count(t, `SELECT count(*) FROM products`)
	_, err = b.svc.CreateProduct(b.asAdmin, order.NewProduct{Name: "planted", Price: money.MustParse("5.00"), Currency: "CNY", ProviderPlugin: ptr("vps"),
		ProviderConfig: map[string]any{"api_url": "https://a.example", "token": sealed}})
	requireKind(t, err, apperr.InvalidArgument)
	require.ErrorContains(t, err, `provider_config.token: a value may not start with "enc:"`)
	_, err = b.svc.UpdateProduct(b.asAdmin, prod.ID, order.ProductUpdate{ProviderConfig: map[string]any{"api_url": "https://a.example", "token": sealed}})
	requireKind(t, err, apperr.InvalidArgument)
	require.Equal(t, "t0ken-tw0", b.providerConfig(t, prod.ID, "token"))

	// Without a key: no token stored, nothing created.
	keyless := order.NewService(b.pool, currencies, nil, nil, nil)
	_, err = keyless.CreateProduct(b.asAdmin, order.NewProduct{Name: "clear", Price: money.MustParse("5.00"), Currency: "CNY", ProviderPlugin: ptr("vps"),
		ProviderConfig: map[string]any{"api_url": "https://a.example", "token": "t0ken-clear"}})
	requireKind(t, err, apperr.FailedPrecondition)
	require.ErrorContains(t, err, "provider_config.token is a secret, and the service stores secrets only encrypted")
	require.Equal(t, products, b.count(t, `SELECT count(*) FROM products`))
}

// A product whose stored token does not decrypt (moved from another
// product, altered, its key gone) cannot be ordered and cannot keep the
// token in an update; nothing is created or changed, and sending the token
// again repairs it.
func TestMovedProviderCiphertextMakesTheProductUnorderableUntilTheTokenIsSentAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, `INSERT INTO plugins (name, type, source, sha256, config_schema) VALUES ('vps', 'first_party_provider', '--', repeat('c', 64), $1)`, vpsSchema)
	create := func(token string) store.Product {
		p, err := b.svc.CreateProduct(b.asAdmin, order.NewProduct{Name: "VPS", Price: money.MustParse("5.00"), Currency: "CNY", ProviderPlugin: ptr("vps"),
			ProviderConfig: map[string]any{"api_url": "https://a.example", "token": token}})
		require.NoError(t, err)
		return p
	}
	a, victim := create("t0ken-of-a"), create("t0ken-of-b")
	b.exec(t, `UPDATE products SET provider_config = jsonb_set(provider_config, '{token}', (SELECT provider_config->'token' FROM products WHERE id = $1)) WHERE id = $2`, a.ID, victim.ID)
	orders := b.count(t, `SELECT count(*) FROM orders`)

	_, err := b.svc.CreateOrder(b.asAlice, victim.ID)
	requireKind(t, err, apperr.FailedPrecondition)
	require.ErrorContains(t, err, "cannot be ordered: its provider settings do not decrypt")
	require.NotContains(t, err.Error(), "t0ken")
	require.Equal(t, orders, b.count(t, `SELECT count(*) FROM orders`), "nothing created")
	_, err = b.svc.UpdateProduct(b.asAdmin, victim.ID, order.ProductUpdate{ProviderConfig: map[string]any{"api_url": "https://b.example"}})
	requireKind(t, err, apperr.FailedPrecondition)
	require.ErrorContains(t, err, "provider_config.token: the stored secret does not decrypt")

	_, err = b.svc.CreateOrder(b.asAlice, a.ID)
	require.NoError(t, err, "the other product is untouched")

	_, err = b.svc.UpdateProduct(b.asAdmin, victim.ID, order.ProductUpdate{ProviderConfig: map[string]any{"api_url": "https://b.example", "token": "t0ken-of-b"}})
	require.NoError(t, err)
	o, err := b.svc.CreateOrder(b.asAlice, victim.ID)
	require.NoError(t, err)
	require.Equal(t, "t0ken-of-b", b.frozenConfig(t, o.ID)["token"])
}

func TestListProductsShowsCustomersEnabledProductsOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	on := b.product(t, "1.00", "CNY")
	off := b.product(t, "2.00", "CNY")
	b.exec(t, `UPDATE products SET enabled = false WHERE id = $1`, off.ID)

	rows, page, err := b.svc.ListProducts(b.asAlice, nil, 0, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(1), page.Total)
	require.Equal(t, on.ID, rows[0].ID)

	rows, _, err = b.svc.ListProducts(b.asAlice, ptr(false), 1, 10)
	require.NoError(t, err)
	require.Empty(t, rows, "customers cannot see disabled products by asking")

	rows, page, err = b.svc.ListProducts(b.asAdmin, nil, 1, 10)
	require.NoError(t, err)
	require.Equal(t, uint64(2), page.Total)
	require.Equal(t, []uuid.UUID{off.ID, on.ID}, []uuid.UUID{rows[0].ID, rows[1].ID}, "newest first")

	rows, _, err = b.svc.ListProducts(b.asAdmin, ptr(false), 1, 10)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, off.ID, rows[0].ID)

	_, _, err = b.svc.ListProducts(b.anonymous, nil, 1, 10)
	requireKind(t, err, apperr.Unauthenticated)
	_, _, err = b.svc.ListProducts(b.asAdmin, nil, 1, 101)
	requireKind(t, err, apperr.InvalidArgument)
}

func TestCreateOrderIsPendingWithThePriceAndCurrencyOfTheProduct(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.product(t, "12.30", "USD")

	o, err := b.svc.CreateOrder(b.asAlice, p.ID)
	require.NoError(t, err)
	require.Equal(t, string(order.StatusPending), o.Status)
	require.Equal(t, b.alice, o.CustomerID)
	require.Equal(t, p.ID, *o.ProductID)
	require.Equal(t, "12.30", o.TotalAmount.String())
	require.Equal(t, "USD", o.Currency, "the product's currency, not the customer's CNY")
	require.Equal(t, p.Name, o.Description)
	require.Nil(t, o.PaidAt)

	var item map[string]any
	require.NoError(t, json.Unmarshal(o.Item, &item))
	require.Equal(t, "12.30", item["price"])
	require.Equal(t, p.Name, item["name"])

	audits := b.audits(t, "order", o.ID.String())
	require.Len(t, audits, 1)
	require.Equal(t, order.ActionOrderCreate, audits[0].Action)
	require.Equal(t, "customer", audits[0].ActorKind)
	require.Equal(t, b.alice.String(), audits[0].ActorID)
	require.Nil(t, audits[0].Before)
	require.Equal(t, "pending", audits[0].After["status"])
}

func TestCreateOrderRefusesUnknownDisabledAndUnacceptedProducts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.product(t, "5.00", "CNY")

	_, err := b.svc.CreateOrder(b.asAlice, uuid.New())
	requireKind(t, err, apperr.NotFound)

	_, err = b.svc.CreateOrder(b.asAdmin, p.ID)
	requireKind(t, err, apperr.PermissionDenied, "orders are placed by customers")
	_, err = b.svc.CreateOrder(b.anonymous, p.ID)
	requireKind(t, err, apperr.Unauthenticated)

	b.exec(t, `UPDATE products SET enabled = false WHERE id = $1`, p.ID)
	_, err = b.svc.CreateOrder(b.asAlice, p.ID)
	requireKind(t, err, apperr.InvalidArgument)

	// A product whose currency was dropped from [billing].currencies.
	var eur uuid.UUID
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`INSERT INTO products (name, price, currency) VALUES ('euro', 1, 'EUR') RETURNING id`).Scan(&eur))
	_, err = b.svc.CreateOrder(b.asAlice, eur)
	requireKind(t, err, apperr.InvalidArgument)

	b.exec(t, `UPDATE customers SET disabled_at = now() WHERE id = $1`, b.bob)
	b.exec(t, `UPDATE products SET enabled = true WHERE id = $1`, p.ID)
	_, err = b.svc.CreateOrder(b.asBob, p.ID)
	requireKind(t, err, apperr.PermissionDenied, "a disabled customer cannot order")
	require.Zero(t, b.count(t, `SELECT count(*) FROM orders`))
}

func TestGetOrderIsScopedToItsCustomer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := b.order(t, b.asAlice, "10.00")

	got, err := b.svc.GetOrder(b.asAlice, o.ID)
	require.NoError(t, err)
	require.Equal(t, o, got)

	_, err = b.svc.GetOrder(b.asAdmin, o.ID)
	require.NoError(t, err, "admins see every order")

	_, err = b.svc.GetOrder(b.asBob, o.ID)
	requireKind(t, err, apperr.NotFound, "another customer's order reads as none")

	_, err = b.svc.GetOrder(b.asAlice, uuid.New())
	requireKind(t, err, apperr.NotFound)

	_, err = b.svc.GetOrder(b.anonymous, o.ID)
	requireKind(t, err, apperr.Unauthenticated)
}

func TestListOrdersScopesCustomersPagesNewestFirstAndFilters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var alices []uuid.UUID
	for range 3 {
		alices = append(alices, b.order(t, b.asAlice, "1.00").ID)
	}
	bobs := b.order(t, b.asBob, "2.00")
	_, err := b.svc.CancelOrder(b.asAlice, alices[0])
	require.NoError(t, err)

	rows, page, err := b.svc.ListOrders(b.asAlice, store.OrderFilter{}, 1, 2)
	require.NoError(t, err)
	require.Equal(t, uint64(3), page.Total)
	require.Equal(t, uint32(2), page.TotalPages())
	require.Equal(t, []uuid.UUID{alices[2], alices[1]}, []uuid.UUID{rows[0].ID, rows[1].ID})
	rows, _, err = b.svc.ListOrders(b.asAlice, store.OrderFilter{}, 2, 2)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, alices[0], rows[0].ID)

	_, page, err = b.svc.ListOrders(b.asAlice, store.OrderFilter{CustomerID: &b.alice}, 1, 10)
	require.NoError(t, err)
	require.Equal(t, uint64(3), page.Total, "naming oneself is fine")

	_, _, err = b.svc.ListOrders(b.asAlice, store.OrderFilter{CustomerID: &b.bob}, 1, 10)
	requireKind(t, err, apperr.PermissionDenied, "a customer cannot list another's orders")

	_, page, err = b.svc.ListOrders(b.asAdmin, store.OrderFilter{}, 1, 10)
	require.NoError(t, err)
	require.Equal(t, uint64(4), page.Total, "admins see all")

	rows, _, err = b.svc.ListOrders(b.asAdmin, store.OrderFilter{CustomerID: &b.bob}, 1, 10)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, bobs.ID, rows[0].ID)

	rows, _, err = b.svc.ListOrders(b.asAdmin, store.OrderFilter{Status: ptr("cancelled")}, 1, 10)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, alices[0], rows[0].ID)

	_, _, err = b.svc.ListOrders(b.asAdmin, store.OrderFilter{Status: ptr("bogus")}, 1, 10)
	requireKind(t, err, apperr.InvalidArgument)
	_, _, err = b.svc.ListOrders(b.asAdmin, store.OrderFilter{}, 1, 101)
	requireKind(t, err, apperr.InvalidArgument)
	_, _, err = b.svc.ListOrders(b.anonymous, store.OrderFilter{}, 1, 10)
	requireKind(t, err, apperr.Unauthenticated)
}

func TestCancelOrderCancelsFailsPendingPaymentsAndQueuesTheEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := b.order(t, b.asAlice, "10.00")
	gw := testfixture.GatewayInterface(t, b.pool, "epay")
	pending := testfixture.InsertPayment(t, b.pool, testfixture.Payment{Customer: b.alice, Order: o.ID, Gateway: gw, Amount: "10.00"})

	c, err := b.svc.CancelOrder(b.asAlice, o.ID)
	require.NoError(t, err)
	require.Equal(t, "cancelled", c.Status)
	require.Equal(t, order.CancelReasonCustomer, c.CancelReason)
	require.NotNil(t, c.CancelledAt)
	require.Equal(t, c, b.getOrder(t, o.ID))

	pay, err := store.Q(b.pool).GetPayment(context.Background(), pending)
	require.NoError(t, err)
	require.Equal(t, "failed", pay.Status)
	require.Equal(t, "order cancelled", pay.FailureReason)

	events := b.events(t, o.ID)
	require.Len(t, events, 1)
	require.Equal(t, order.EventOrderCancelled, events[0].EventType)
	require.Equal(t, "pending", events[0].Status)
	require.JSONEq(t, `{"order_id":"`+o.ID.String()+`","reason":"customer","refund_due":false}`, string(events[0].Payload))

	orderAudits := b.audits(t, "order", o.ID.String())
	require.Len(t, orderAudits, 2) // create, cancel
	require.Equal(t, order.ActionOrderCancel, orderAudits[1].Action)
	require.Equal(t, "pending", orderAudits[1].Before["status"])
	require.Equal(t, "cancelled", orderAudits[1].After["status"])
	payAudits := b.audits(t, "payment", pending.String())
	require.Len(t, payAudits, 1)
	require.Equal(t, audit.ActionPaymentFail, payAudits[0].Action)
	require.Equal(t, "failed", payAudits[0].After["status"])
}

func TestCancelOrderByAnAdminRecordsReasonAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := b.order(t, b.asAlice, "10.00")
	c, err := b.svc.CancelOrder(b.asAdmin, o.ID)
	require.NoError(t, err)
	require.Equal(t, order.CancelReasonAdmin, c.CancelReason)
	require.JSONEq(t, `{"order_id":"`+o.ID.String()+`","reason":"admin","refund_due":false}`, string(b.events(t, o.ID)[0].Payload))
}

func TestCancelOrderRefusesOrdersThatAreNotPendingOrNotTheCallers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := b.order(t, b.asAlice, "10.00")

	_, err := b.svc.CancelOrder(b.asBob, o.ID)
	requireKind(t, err, apperr.NotFound, "another customer's order reads as none")
	_, err = b.svc.CancelOrder(b.asAlice, uuid.New())
	requireKind(t, err, apperr.NotFound)
	_, err = b.svc.CancelOrder(b.anonymous, o.ID)
	requireKind(t, err, apperr.Unauthenticated)

	_, err = b.svc.CancelOrder(b.asAlice, o.ID)
	require.NoError(t, err)
	_, err = b.svc.CancelOrder(b.asAlice, o.ID)
	requireKind(t, err, apperr.InvalidArgument, "already cancelled")

	paid := b.order(t, b.asAlice, "0.00")
	_, err = b.svc.PayWithBalance(b.asAlice, paid.ID)
	require.NoError(t, err)
	for _, ctx := range []context.Context{b.asAlice, b.asAdmin} {
		_, err = b.svc.CancelOrder(ctx, paid.ID)
		requireKind(t, err, apperr.InvalidArgument, "a provisioning order is not cancelled by callers")
	}
	for _, st := range []order.Status{order.StatusPaid, order.StatusActive, order.StatusSuspended} {
		b.exec(t, `UPDATE orders SET status = $2, suspend_reason = CASE WHEN $2 = 'suspended' THEN 'admin' ELSE '' END WHERE id = $1`, paid.ID, st)
		_, err = b.svc.CancelOrder(b.asAdmin, paid.ID)
		requireKind(t, err, apperr.InvalidArgument, st)
	}
	require.Len(t, b.events(t, o.ID), 1, "only the one successful cancel queued an event")
}

func TestCancelOrderAndItsEventCommitTogetherOrNotAtAll(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := b.order(t, b.asAlice, "10.00")
	gw := testfixture.GatewayInterface(t, b.pool, "epay")
	pending := testfixture.InsertPayment(t, b.pool, testfixture.Payment{Customer: b.alice, Order: o.ID, Gateway: gw, Amount: "10.00"})
	b.failEventInserts(t)

	_, err := b.svc.CancelOrder(b.asAlice, o.ID)
	require.Error(t, err)
	require.Equal(t, o, b.getOrder(t, o.ID), "the order is untouched when its event cannot be queued")
	pay, err := store.Q(b.pool).GetPayment(context.Background(), pending)
	require.NoError(t, err)
	require.Equal(t, "pending", pay.Status)
	require.Len(t, b.audits(t, "order", o.ID.String()), 1, "only the create")
	require.Empty(t, b.audits(t, "payment", pending.String()))
}

func TestAuditNamesTheAPIKeyACustomerCalledWith(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.product(t, "1.00", "CNY")
	ctx := auth.WithPrincipal(context.Background(), auth.Principal{
		Role: auth.RoleCustomer, ID: b.alice, Kind: auth.KindAPIKey, CredentialID: "key-123",
	})
	o, err := b.svc.CreateOrder(ctx, p.ID)
	require.NoError(t, err)
	audits := b.audits(t, "order", o.ID.String())
	require.Len(t, audits, 1)
	require.Equal(t, "api_key", audits[0].ActorKind)
	require.Equal(t, "key-123", audits[0].ActorID)
}
