// Package ordertest sets up the order domain for tests: a database of the
// test's own (a clone of the migrated template), the order service over it,
// two CNY customers and principals to call as, and the few writes the
// tests of the domain (internal/order) and of its transport
// (internal/order/orderrpc) both make. It is test support, imported from
// _test files only; internal/architecture holds that no production package
// imports it.
package ordertest

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// Currencies are the currencies the service is set up with.
var Currencies = []string{"CNY", "USD"}

// Bundle is a database of one's own, the service over it, two CNY customers
// and principals to call as.
type Bundle struct {
	Pool *pgxpool.Pool
	// Keys seals products' provider secrets (key "k1").
	Keys      *secrets.Keyring
	Svc       *order.Service
	Alice     uuid.UUID
	Bob       uuid.UUID
	AdminID   uuid.UUID
	AsAlice   context.Context
	AsBob     context.Context
	AsAdmin   context.Context
	Anonymous context.Context
}

// Setup is a Bundle over a database of the test's own.
func Setup(t testing.TB) *Bundle {
	t.Helper()
	return SetupWithPool(t, testdb.Pool(t))
}

// SetupWithPool is a Bundle over pool (a pool of another size, say).
func SetupWithPool(t testing.TB, pool *pgxpool.Pool) *Bundle {
	t.Helper()
	keys, err := secrets.New("k1", map[string][]byte{"k1": bytes.Repeat([]byte{1}, secrets.KeySize)})
	require.NoError(t, err)
	b := &Bundle{Pool: pool, Keys: keys, Svc: order.NewService(pool, Currencies, keys, nil, slog.New(slog.DiscardHandler))}
	b.Alice = testfixture.Customer(t, pool)
	b.Bob = testfixture.Customer(t, pool)
	b.AdminID = uuid.New()
	b.AsAlice = AsCustomer(b.Alice)
	b.AsBob = AsCustomer(b.Bob)
	b.AsAdmin = auth.WithPrincipal(context.Background(), auth.Principal{Role: auth.RoleAdmin, ID: b.AdminID, Kind: auth.KindSession})
	b.Anonymous = context.Background()
	return b
}

// AsCustomer is a context of customer id signed in with a token.
func AsCustomer(id uuid.UUID) context.Context {
	return auth.WithPrincipal(context.Background(), auth.Principal{Role: auth.RoleCustomer, ID: id, Kind: auth.KindJWT})
}

// Exec runs sql on the bundle's database.
func (b *Bundle) Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	_, err := b.Pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// SetAccount sets a customer's balance and credit limit directly.
func (b *Bundle) SetAccount(t testing.TB, customer uuid.UUID, balance, credit string) {
	t.Helper()
	b.Exec(t, `UPDATE customers SET credit_limit = $2, balance = $3 WHERE id = $1`,
		customer, money.MustParse(credit), money.MustParse(balance))
}

// Product creates an enabled product of price in currency through the
// service.
func (b *Bundle) Product(t testing.TB, price, currency string) store.Product {
	t.Helper()
	p, err := b.Svc.CreateProduct(b.AsAdmin, order.NewProduct{Name: "VPS " + price, Price: money.MustParse(price), Currency: currency})
	require.NoError(t, err)
	return p
}

// Order creates a pending order of price (CNY) for the customer of ctx.
func (b *Bundle) Order(t testing.TB, ctx context.Context, price string) store.Order {
	t.Helper()
	return b.OrderIn(t, ctx, price, "CNY")
}

// OrderIn creates a product of price in currency, and a pending order of it
// for the customer of ctx, through the service.
func (b *Bundle) OrderIn(t testing.TB, ctx context.Context, price, currency string) store.Order {
	t.Helper()
	o, err := b.Svc.CreateOrder(ctx, b.Product(t, price, currency).ID)
	require.NoError(t, err)
	return o
}

// FailEventInserts makes every insert into events fail in this test's
// database: a change and its event commit together or not at all, and the
// failure reaches a client as no more than "internal error".
func (b *Bundle) FailEventInserts(t testing.TB) {
	t.Helper()
	b.Exec(t, `CREATE FUNCTION test_fail_event() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'event queue unavailable'; END; $$`)
	b.Exec(t, `CREATE TRIGGER test_fail_event BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION test_fail_event()`)
}
