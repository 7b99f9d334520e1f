package orderrpc_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// bundle is a database of one's own, the order domain over it, two CNY
// customers and an admin to call as.
type bundle struct {
	pool    *pgxpool.Pool
	svc     *order.Service
	alice   uuid.UUID
	bob     uuid.UUID
	adminID uuid.UUID
	asAlice context.Context
	asAdmin context.Context
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool := testdb.Pool(t)
	b := &bundle{pool: pool, svc: order.NewService(pool, []string{"CNY", "USD"}, nil, nil, slog.New(slog.DiscardHandler))}
	b.alice = testfixture.Customer(t, pool)
	b.bob = testfixture.Customer(t, pool)
	b.adminID = uuid.New()
	b.asAlice = auth.WithPrincipal(context.Background(), auth.Principal{Role: auth.RoleCustomer, ID: b.alice, Kind: auth.KindJWT})
	b.asAdmin = auth.WithPrincipal(context.Background(), auth.Principal{Role: auth.RoleAdmin, ID: b.adminID, Kind: auth.KindSession})
	return b
}

func (b *bundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

// setAccount sets a customer's balance and credit limit directly.
func (b *bundle) setAccount(t *testing.T, customer uuid.UUID, balance, credit string) {
	t.Helper()
	b.exec(t, `UPDATE customers SET credit_limit = $2, balance = $3 WHERE id = $1`,
		customer, money.MustParse(credit), money.MustParse(balance))
}

// order creates a pending order of price (CNY) for the customer of ctx.
func (b *bundle) order(t *testing.T, ctx context.Context, price string) store.Order {
	t.Helper()
	return b.orderIn(t, ctx, price, "CNY")
}

// orderIn creates a product of price in currency through the domain, and a
// pending order of it for the customer of ctx.
func (b *bundle) orderIn(t *testing.T, ctx context.Context, price, currency string) store.Order {
	t.Helper()
	p, err := b.svc.CreateProduct(b.asAdmin, order.NewProduct{Name: "VPS " + price, Price: money.MustParse(price), Currency: currency})
	require.NoError(t, err)
	o, err := b.svc.CreateOrder(ctx, p.ID)
	require.NoError(t, err)
	return o
}

// failEventInserts makes every insert into events fail in this test's
// database, to show that an internal failure reaches the client as no more
// than "internal error".
func (b *bundle) failEventInserts(t *testing.T) {
	t.Helper()
	b.exec(t, `CREATE FUNCTION test_fail_event() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'event queue unavailable'; END; $$`)
	b.exec(t, `CREATE TRIGGER test_fail_event BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION test_fail_event()`)
}

func ptr[T any](v T) *T { return &v }
