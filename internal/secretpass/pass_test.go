package secretpass_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/secretpass"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// vpsWorld is a database with the provider plugin "vps", whose token is
// secret, and a keyring whose current key is k1.
func vpsWorld(t *testing.T) (*pgxpool.Pool, *secrets.Keyring) {
	pool := testdb.Pool(t)
	k1, err := secrets.New("k1", map[string][]byte{"k1": bytes.Repeat([]byte{1}, secrets.KeySize)})
	require.NoError(t, err)
	_, err = pool.Exec(context.Background(), `INSERT INTO plugins (name, type, source, sha256, config_schema) VALUES ('vps', 'first_party_provider', '--', repeat('c', 64),
		'{"type":"object","properties":{"api_url":{"type":"string"},"token":{"type":"string","x-secret":true}}}')`)
	require.NoError(t, err)
	return pool, k1
}

// More orders than a page, their copies of a provider token in clear (a
// database from before encryption): one pass seals every one, bound to its
// order, and leaves the rest of each item, and the orders without provider
// settings, as they were; a second pass writes nothing; rotation reaches
// every page too.
func TestThePassesWalkEveryPageOfOrders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, k1 := vpsWorld(t)
	var err error
	var product uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO products (name, price, currency, provider_plugin, provider_config)
		VALUES ('VPS', 5, 'CNY', 'vps', '{"api_url": "https://p.example", "token": "clear-t0ken"}') RETURNING id`).Scan(&product))
	customer := testfixture.Customer(t, pool)
	const n = 1201 // two full pages of 500 and one more
	_, err = pool.Exec(ctx, `INSERT INTO orders (customer_id, product_id, total_amount, currency, item)
		SELECT $1, $2, 5, 'CNY', jsonb_build_object('name', 'VPS', 'provider_plugin', 'vps',
			'provider_config', jsonb_build_object('api_url', 'https://p.example', 'token', 'clear-t0ken-' || g))
		FROM generate_series(1, $3::int) g`, customer, product, n)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO orders (customer_id, total_amount, currency) SELECT $1, 1, 'CNY' FROM generate_series(1, 20)`, customer)
	require.NoError(t, err)

	start := time.Now()
	rep, err := secretpass.Seal(ctx, pool, k1, audit.System("test"), time.Now())
	took := time.Since(start)
	require.NoError(t, err)
	t.Logf("sealed %d values (order copies and a product) in %s", rep.Sealed, took)
	require.Equal(t, n, rep.Of[secretpass.Orders.Kind].Sealed)
	require.Equal(t, n, rep.Of[secretpass.Orders.Kind].Owners)
	require.Equal(t, 1, rep.Of[secretpass.Products.Kind].Sealed)
	require.Equal(t, map[string]int{"k1": n + 1}, rep.ByKey)

	rows, err := pool.Query(ctx, `SELECT id, item->>'name', item->'provider_config' FROM orders WHERE item ? 'provider_config'`)
	require.NoError(t, err)
	seen := map[string]bool{}
	for rows.Next() {
		var id uuid.UUID
		var name string
		var cfg map[string]any
		require.NoError(t, rows.Scan(&id, &name, &cfg))
		require.Equal(t, "VPS", name, "the rest of the item stays")
		require.True(t, secrets.IsSealed(cfg["token"].(string)))
		opened, err := k1.OpenConfig(secretpass.Orders.Owner(id), cfg)
		require.NoError(t, err)
		seen[opened["token"].(string)] = true
	}
	require.NoError(t, rows.Err())
	require.Len(t, seen, n, "every copy opens, for its own order, to its own value")
	require.True(t, seen[fmt.Sprintf("clear-t0ken-%d", n)])

	start = time.Now()
	again, err := secretpass.Seal(ctx, pool, k1, audit.System("test"), time.Now())
	require.NoError(t, err)
	t.Logf("a pass with nothing to write over the same rows took %s", time.Since(start))
	require.Zero(t, again.Changed())
	var audits int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = $1`, secretpass.Orders.SealAction()).Scan(&audits))
	require.Equal(t, n, audits)

	k2, err := secrets.New("k2", map[string][]byte{"k1": bytes.Repeat([]byte{1}, secrets.KeySize), "k2": bytes.Repeat([]byte{2}, secrets.KeySize)})
	require.NoError(t, err)
	rotated, err := secretpass.Rotate(ctx, pool, k2, audit.System("test"), time.Now())
	require.NoError(t, err)
	require.Equal(t, n+1, rotated.Resealed)
	require.Equal(t, map[string]int{"k2": n + 1}, rotated.ByKey)

	// Without a key, the same database is refused, naming each table.
	_, err = secretpass.Check(ctx, pool, nil)
	require.ErrorIs(t, err, secretpass.ErrSecretsWithoutKey)
	require.ErrorContains(t, err, fmt.Sprintf("the database holds %d secret(s) (gateway interfaces 0, products 1, orders %d; %d encrypted, 0 in clear)", n+1, n, n+1))
}

// At a serving instance's start, what the service uses (interfaces,
// products) is sealed at once and the orders' copies only by the pass it
// hands back, so the start does not read every order ever placed. Without
// a key, orders alone never refuse a start (nothing reads their copies),
// and a refusal still counts them.
func TestAtStartSealsWhatTheServiceUsesAndLeavesTheOrdersToLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, k1 := vpsWorld(t)
	var err error
	customer := testfixture.Customer(t, pool)
	_, err = pool.Exec(ctx, `INSERT INTO orders (customer_id, total_amount, currency, item)
		SELECT $1, 5, 'CNY', jsonb_build_object('name', 'VPS', 'provider_plugin', 'vps',
			'provider_config', jsonb_build_object('api_url', 'https://p.example', 'token', 'clear-t0ken-' || g))
		FROM generate_series(1, 3) g`, customer)
	require.NoError(t, err)
	clear := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM orders WHERE item->'provider_config'->>'token' LIKE 'clear-%'`).Scan(&n))
		return n
	}

	rep, orders, err := secretpass.AtStart(ctx, pool, nil, audit.System("test"), time.Now())
	require.NoError(t, err, "only orders' copies hold secrets: no refusal")
	require.Nil(t, orders)
	require.Zero(t, rep.Total())

	var product uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO products (name, price, currency, provider_plugin, provider_config)
		VALUES ('VPS', 5, 'CNY', 'vps', '{"api_url": "https://p.example", "token": "clear-t0ken"}') RETURNING id`).Scan(&product))
	_, _, err = secretpass.AtStart(ctx, pool, nil, audit.System("test"), time.Now())
	require.ErrorIs(t, err, secretpass.ErrSecretsWithoutKey)
	require.ErrorContains(t, err, "the database holds 4 secret(s) (gateway interfaces 0, products 1, orders 3; 0 encrypted, 4 in clear)")

	rep, orders, err = secretpass.AtStart(ctx, pool, k1, audit.System("test"), time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, rep.Of[secretpass.Products.Kind].Sealed)
	require.Zero(t, rep.Of[secretpass.Orders.Kind].Total(), "the orders are not read at start")
	require.Equal(t, 3, clear())
	require.NotNil(t, orders)
	later, err := orders(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, later.Of[secretpass.Orders.Kind].Sealed)
	require.Zero(t, clear())

	// A finished pass is marked: the next starts do not read the orders
	// again, every order placed since holding its copy sealed.
	_, orders, err = secretpass.AtStart(ctx, pool, k1, audit.System("test"), time.Now())
	require.NoError(t, err)
	require.Nil(t, orders, "a pass has finished, and nothing was in clear")

	// Unless this start found something in clear elsewhere (a database
	// written without a key meanwhile): the orders may hold some too.
	_, err = pool.Exec(ctx, `UPDATE products SET provider_config = '{"api_url": "https://p.example", "token": "clear-again"}' WHERE id = $1`, product)
	require.NoError(t, err)
	rep, orders, err = secretpass.AtStart(ctx, pool, k1, audit.System("test"), time.Now())
	require.NoError(t, err)
	require.Equal(t, 1, rep.Sealed)
	require.NotNil(t, orders)
}
