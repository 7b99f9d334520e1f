package order_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/ordertest"
	"github.com/rustbill/paymentd/internal/secretpass"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// bundle is ordertest's (a database of one's own, the service over it, two
// CNY customers and principals to call as) under the names these tests use;
// its helpers are ordertest's, which orderrpc's tests share.
type bundle struct {
	o         *ordertest.Bundle
	pool      *pgxpool.Pool
	keys      *secrets.Keyring
	svc       *order.Service
	alice     uuid.UUID
	bob       uuid.UUID
	adminID   uuid.UUID
	asAlice   context.Context
	asBob     context.Context
	asAdmin   context.Context
	anonymous context.Context
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupWithPool(t, testdb.Pool(t))
}

func setupWithPool(t *testing.T, pool *pgxpool.Pool) *bundle {
	t.Helper()
	o := ordertest.SetupWithPool(t, pool)
	return &bundle{o: o, pool: o.Pool, keys: o.Keys, svc: o.Svc, alice: o.Alice, bob: o.Bob, adminID: o.AdminID,
		asAlice: o.AsAlice, asBob: o.AsBob, asAdmin: o.AsAdmin, anonymous: o.Anonymous}
}

var (
	currencies = ordertest.Currencies
	asCustomer = ordertest.AsCustomer
)

func (b *bundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	b.o.Exec(t, sql, args...)
}

// setAccount sets a customer's balance and credit limit directly.
func (b *bundle) setAccount(t *testing.T, customer uuid.UUID, balance, credit string) {
	t.Helper()
	b.o.SetAccount(t, customer, balance, credit)
}

// product creates an enabled product through the service.
func (b *bundle) product(t *testing.T, price, currency string) store.Product {
	t.Helper()
	return b.o.Product(t, price, currency)
}

// order creates a pending order of price (CNY) for the customer of ctx.
func (b *bundle) order(t *testing.T, ctx context.Context, price string) store.Order {
	t.Helper()
	return b.o.Order(t, ctx, price)
}

func (b *bundle) orderIn(t *testing.T, ctx context.Context, price, currency string) store.Order {
	t.Helper()
	return b.o.OrderIn(t, ctx, price, currency)
}

// failEventInserts makes every insert into events fail in this test's
// database, to show that a change and its event commit together or not at all.
func (b *bundle) failEventInserts(t *testing.T) {
	t.Helper()
	b.o.FailEventInserts(t)
}

// bigPool is a pool with room for n concurrent transactions.
func bigPool(t *testing.T, n int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testdb.URL(t))
	require.NoError(t, err)
	cfg.MaxConns = n
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// count runs a count(*) query; t may be an EventuallyWithT condition's
// collector.
func (b *bundle) count(t testkit.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func (b *bundle) account(t *testing.T, customer uuid.UUID) store.BalanceAccount {
	t.Helper()
	a, err := store.GetBalanceAccount(context.Background(), b.pool, customer)
	require.NoError(t, err)
	return a
}

func (b *bundle) getOrder(t *testing.T, id uuid.UUID) store.Order {
	t.Helper()
	o, err := store.Q(b.pool).GetOrder(context.Background(), id)
	require.NoError(t, err)
	return o
}

func (b *bundle) events(t *testing.T, orderID uuid.UUID) []store.Event {
	t.Helper()
	ev, err := store.Q(b.pool).ListOrderEvents(context.Background(), orderID)
	require.NoError(t, err)
	return ev
}

// auditRow is one audit_log row as the tests read it.
type auditRow struct {
	ActorKind, ActorID, Action, EntityType, EntityID string
	Before, After                                    map[string]any
}

func (b *bundle) audits(t *testing.T, entityType, entityID string) []auditRow {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT actor_kind, actor_id, action, entity_type, entity_id, before, after
		FROM audit_log WHERE entity_type = $1 AND entity_id = $2 ORDER BY id`, entityType, entityID)
	require.NoError(t, err)
	defer rows.Close()
	var out []auditRow
	for rows.Next() {
		var r auditRow
		var before, after []byte
		require.NoError(t, rows.Scan(&r.ActorKind, &r.ActorID, &r.Action, &r.EntityType, &r.EntityID, &before, &after))
		if before != nil {
			require.NoError(t, json.Unmarshal(before, &r.Before))
		}
		if after != nil {
			require.NoError(t, json.Unmarshal(after, &r.After))
		}
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

func requireKind(t *testing.T, err error, kind apperr.Kind, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	k, ok := apperr.KindOf(err)
	require.True(t, ok, "not a domain error: %v", err)
	require.Equal(t, kind.String(), k.String(), "%v", err)
}

func future() time.Time { return time.Now().Add(30 * 24 * time.Hour) }

// storedConfig is product id's provider_config as the database holds it.
func (b *bundle) storedConfig(t *testing.T, id uuid.UUID) map[string]any {
	t.Helper()
	p, err := store.Q(b.pool).GetProduct(context.Background(), id)
	require.NoError(t, err)
	cfg, err := secrets.DecodeConfig(p.ProviderConfig)
	require.NoError(t, err)
	return cfg
}

// providerConfig is product id's provider_config opened, as JSON, or the
// value of key when one is given.
func (b *bundle) providerConfig(t *testing.T, id uuid.UUID, key ...string) string {
	t.Helper()
	opened, err := b.keys.OpenConfig(secretpass.Products.Owner(id), b.storedConfig(t, id))
	require.NoError(t, err)
	if len(key) > 0 {
		return opened[key[0]].(string)
	}
	raw, err := json.Marshal(opened)
	require.NoError(t, err)
	return string(raw)
}

// frozenConfig is the provider_config order id froze, opened ("raw": as
// stored).
func (b *bundle) frozenConfig(t *testing.T, id uuid.UUID, raw ...string) map[string]any {
	t.Helper()
	var item struct {
		ProviderConfig map[string]any `json:"provider_config"`
	}
	require.NoError(t, json.Unmarshal(b.getOrder(t, id).Item, &item))
	if len(raw) > 0 {
		return item.ProviderConfig
	}
	opened, err := b.keys.OpenConfig(secretpass.Orders.Owner(id), item.ProviderConfig)
	require.NoError(t, err)
	return opened
}
