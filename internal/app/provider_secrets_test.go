package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/provider"
	"github.com/rustbill/paymentd/internal/secretpass"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// startProvisioning is a payments env whose product http_provider
// provisions at a fake provider that takes token ("": the fake's default),
// created through the API as an admin does.
func startProvisioning(t *testing.T, token string, mutate ...func(*config.Config)) (*payBundle, *provider.Server) {
	t.Helper()
	prov := provider.New(provider.Options{Token: token})
	require.NoError(t, prov.Start())
	t.Cleanup(prov.Close)
	e := startPayments(t, append([]func(*config.Config){func(c *config.Config) {
		addProviderPlugin(t, c.Plugins.Dir)
		c.Events.PollInterval = 100 * time.Millisecond
	}}, mutate...)...)
	e.provisionWith(t, prov, "vps-1")
	return e, prov
}

// payUntilActive pays order id through the fake epay and waits until the
// worker has provisioned it at prov.
func (e *payBundle) payUntilActive(t *testing.T, prov *provider.Server, id string) {
	t.Helper()
	p := e.createPayment(t, id).GetPayment()
	require.NoError(t, e.fake.Pay(p.GetId()))
	e.waitOrderStatus(t, id, "active")
	require.Equal(t, 1, prov.InstancesFor(id), "the provider made the order's instance")
}

// storedProductToken and storedOrderToken are the token as the database
// holds it: a product's, and the copy an order keeps.
func (e *payBundle) storedProductToken(t *testing.T, id string) string {
	t.Helper()
	var v string
	require.NoError(t, e.r.app.Pool().QueryRow(context.Background(), `SELECT provider_config->>'token' FROM products WHERE id = $1`, id).Scan(&v))
	return v
}

func (e *payBundle) storedOrderToken(t *testing.T, id string) string {
	t.Helper()
	var v string
	require.NoError(t, e.r.app.Pool().QueryRow(context.Background(), `SELECT item->'provider_config'->>'token' FROM orders WHERE id = $1`, id).Scan(&v))
	return v
}

func TestPgDumpOfADatabaseWithProviderProductsAndOrdersHoldsNoProviderToken(t *testing.T) {
	t.Parallel()
	const first, second = "provider-token-alpha-5Rt8", "provider-token-beta-2Wq9"
	e, prov := startProvisioning(t, first)
	ctx := context.Background()

	// An order provisioned with the first token, then the token replaced
	// and an order placed with the second: the product, both orders'
	// copies, the audit trail, the events and the instance all have rows.
	placed := e.order(t)
	e.payUntilActive(t, prov, placed)
	_, err := e.orders.UpdateProduct(ctx, with(&orderpb.UpdateProductRequest{
		Id: e.product, ProviderConfig: mustStruct(t, map[string]any{"api_url": prov.URL(), "token": second, "plan": "vps-2"}),
	}, e.c.admin))
	require.NoError(t, err)
	later := e.order(t)

	// Neither the API nor the audit trail shows a token, encrypted or not.
	var answers []string
	products, err := e.orders.ListProducts(ctx, with(&orderpb.ListProductsRequest{Pagination: &paymentpb.PageRequest{}}, e.c.admin))
	require.NoError(t, err)
	answers = append(answers, protojson.Format(products.Msg))
	for _, id := range []string{placed, later} {
		o, err := e.orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: id}, e.c.admin))
		require.NoError(t, err)
		answers = append(answers, protojson.Format(o.Msg))
	}
	var trail string
	require.NoError(t, e.r.app.Pool().QueryRow(ctx, `SELECT string_agg(coalesce(before::text, '') || coalesce(after::text, ''), ' ') FROM audit_log`).Scan(&trail))
	for _, s := range append(answers, trail) {
		require.NotContains(t, s, first)
		require.NotContains(t, s, second)
		require.NotContains(t, s, "enc:v1:")
	}

	dump := pgDump(t, dbURLOf(e.r))
	require.Contains(t, dump, "COPY public.products", "the dump has the table")
	require.Equal(t, 3, strings.Count(dump, `"token": "enc:v1:`+testKeyID+`:`), "the product's token and each order's copy, encrypted")
	for _, secret := range []string{first, second, testKey} {
		require.NotContains(t, dump, secret)
	}
	require.True(t, strings.HasPrefix(e.storedOrderToken(t, placed), "enc:v1:"), "the order keeps the token it was placed with, encrypted")
}

// The rotation procedure of docs/operations.md over products and orders:
// `secrets rotate` (secretpass.Rotate) re-encrypts the product's token and
// the copy a pending order keeps; afterwards the new key alone opens every
// stored secret, an instance with only the new key takes orders, and
// orders placed before and after the rotation are provisioned at the
// provider.
func TestRotationKeepsProvisioningWorking(t *testing.T) {
	t.Parallel()
	both := map[string]string{testKeyID: testKey, testKeyID2: testKey2}
	e, prov := startProvisioning(t, "", func(c *config.Config) { c.Secrets.Keys = both })
	ctx := context.Background()
	pool := e.r.app.Pool()
	before := e.order(t)
	require.True(t, strings.HasPrefix(e.storedProductToken(t, e.product), "enc:v1:"+testKeyID+":"))
	require.True(t, strings.HasPrefix(e.storedOrderToken(t, before), "enc:v1:"+testKeyID+":"))

	rep, err := secretpass.Rotate(ctx, pool, keyring(t, testKeyID2, both), audit.System("cli:test"), time.Now())
	require.NoError(t, err)
	require.Empty(t, rep.Unreadable)
	require.Equal(t, 1, rep.Of[secretpass.Products.Kind].Resealed)
	require.Equal(t, 1, rep.Of[secretpass.Orders.Kind].Resealed)
	require.Equal(t, map[string]int{testKeyID2: rep.Total()}, rep.ByKey)
	require.True(t, strings.HasPrefix(e.storedProductToken(t, e.product), "enc:v1:"+testKeyID2+":"))
	require.True(t, strings.HasPrefix(e.storedOrderToken(t, before), "enc:v1:"+testKeyID2+":"))
	for _, tbl := range []secretpass.Table{secretpass.Products, secretpass.Orders} {
		require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = $1 AND actor_id = 'cli:test'`, tbl.RotateAction()))
	}

	// The new key alone opens everything.
	onlyNew := keyring(t, testKeyID2, map[string]string{testKeyID2: testKey2})
	check, err := secretpass.Check(ctx, pool, onlyNew)
	require.NoError(t, err)
	require.Empty(t, check.Unreadable)
	require.Equal(t, rep.Total(), check.Total())

	// Another instance on the same database, with the new key alone, takes
	// an order of the product: its copy is under the new key.
	cfg := testConfig(dbURLOf(e.r))
	cfg.Plugins.Dir = e.pluginDir
	cfg.Secrets = config.Secrets{Current: testKeyID2, Keys: map[string]string{testKeyID2: testKey2}}
	r2 := start(t, cfg)
	res, err := orderpbconnect.NewOrderServiceClient(http.DefaultClient, r2.baseURL).CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: e.product}, e.c.customer))
	require.NoError(t, err)
	after := res.Msg.GetOrder().GetId()
	require.True(t, strings.HasPrefix(e.storedOrderToken(t, after), "enc:v1:"+testKeyID2+":"))

	// Both orders are provisioned with the product's token.
	e.payUntilActive(t, prov, before)
	e.payUntilActive(t, prov, after)
	requireLedgerClean(t, e)
}

// A database from before provider secrets were encrypted: a product's token
// and an order's copy in clear. Without a key the service refuses to start
// and changes nothing; instances starting together with a key encrypt each
// value once, with one audit row each.
func TestClearProviderSecretsAreEncryptedAtTheFirstStartWithAKeyOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig(testdb.URL(t))
	cfg.Plugins.Dir = pluginDir(t)
	addProviderPlugin(t, cfg.Plugins.Dir)
	keys := cfg.Secrets
	cfg.Secrets = config.Secrets{Keys: map[string]string{}}

	first, err := app.New(ctx, cfg, logger(t))
	require.NoError(t, err)
	pool := first.Pool()
	var product, order uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO products (name, price, currency, provider_plugin, provider_config)
		VALUES ('old VPS', 5, 'CNY', 'http_provider', '{"api_url": "http://127.0.0.1:9/", "token": "clear-provider-token", "plan": "vps-1"}') RETURNING id`).Scan(&product))
	item, err := json.Marshal(map[string]any{"product_id": product, "name": "old VPS", "provider_plugin": "http_provider",
		"provider_config": map[string]string{"api_url": "http://127.0.0.1:9/", "token": "clear-provider-token", "plan": "vps-1"}})
	require.NoError(t, err)
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO orders (customer_id, product_id, total_amount, currency, item)
		VALUES ($1, $2, 5, 'CNY', $3) RETURNING id`, testfixture.Customer(t, pool), product, item).Scan(&order))
	first.Close()

	_, err = app.New(ctx, cfg, logger(t))
	require.ErrorIs(t, err, secretpass.ErrSecretsWithoutKey)
	require.ErrorContains(t, err, "the database holds 2 secret(s) (gateway interfaces 0, products 1, orders 1; 0 encrypted, 2 in clear)")

	cfg.Secrets = keys
	apps := make([]*app.App, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range apps {
		wg.Go(func() { apps[i], errs[i] = app.New(ctx, cfg, logger(t)) })
	}
	wg.Wait()
	for i := range apps {
		require.NoError(t, errs[i])
		defer apps[i].Close()
	}
	pool = apps[0].Pool()
	k := keyring(t, keys.Current, keys.Keys)
	for _, c := range []struct {
		tbl   secretpass.Table
		id    uuid.UUID
		query string
	}{
		{secretpass.Products, product, `SELECT provider_config FROM products WHERE id = $1`},
		{secretpass.Orders, order, `SELECT item->'provider_config' FROM orders WHERE id = $1`},
	} {
		// The orders' copies are sealed in the background of the start.
		var stored map[string]any
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			require.NoError(ct, pool.QueryRow(ctx, c.query, c.id).Scan(&stored))
			token, _ := stored["token"].(string)
			assert.True(ct, strings.HasPrefix(token, "enc:v1:"), "token %q", token)
		}, 10*time.Second, 10*time.Millisecond, "%s not sealed", c.tbl.Owner(c.id))
		require.True(t, strings.HasPrefix(stored["token"].(string), "enc:v1:"+testKeyID+":"), "%v", stored)
		require.Equal(t, "vps-1", stored["plan"], "only secrets are encrypted")
		opened, err := k.OpenConfig(c.tbl.Owner(c.id), stored)
		require.NoError(t, err)
		require.Equal(t, "clear-provider-token", opened["token"])

		var rows int
		var trail string
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), string_agg(before::text || after::text, ' ') FROM audit_log WHERE action = $1 AND entity_id = $2`,
			c.tbl.SealAction(), c.id.String()).Scan(&rows, &trail))
		require.Equal(t, 1, rows, "encrypted once")
		require.NotContains(t, trail, "clear-provider-token")
	}
}
