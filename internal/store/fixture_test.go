package store_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// bundle is what a schema or query test needs: a pool on its own migrated
// database and a small world of rows to hang payments on.
type bundle struct {
	pool *pgxpool.Pool
	q    *dbsqlc.Queries

	customerID uuid.UUID // currency CNY
	otherID    uuid.UUID // a second customer, also CNY
	orderID    uuid.UUID // customerID's pending order, 100.00 CNY
	invoiceID  uuid.UUID // customerID's issued invoice for orderID, 100.00 CNY
	gatewayA   uuid.UUID // gateway interfaces of plugin "epay"
	gatewayB   uuid.UUID
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := context.Background()
	pool := migratedPool(t)
	b := &bundle{pool: pool, q: dbsqlc.New(pool)}

	// No queries exist yet for these tables; the fixture writes them directly.
	row := func(sql string, args ...any) uuid.UUID {
		t.Helper()
		var id uuid.UUID
		require.NoError(t, pool.QueryRow(ctx, sql, args...).Scan(&id))
		return id
	}
	b.customerID = row(`INSERT INTO customers (email, password_hash, currency) VALUES ('a@example.com', 'h', 'CNY') RETURNING id`)
	b.otherID = row(`INSERT INTO customers (email, password_hash, currency) VALUES ('b@example.com', 'h', 'CNY') RETURNING id`)
	b.orderID = row(`INSERT INTO orders (customer_id, total_amount, currency) VALUES ($1, 100.00, 'CNY') RETURNING id`, b.customerID)
	b.invoiceID = row(`WITH i AS (INSERT INTO invoices (customer_id, order_id, amount, currency, status)
		VALUES ($1, $2, 100.00, 'CNY', 'issued') RETURNING *),
		l AS (INSERT INTO invoice_lines (invoice_id, position, description, unit_amount, amount) SELECT id, 1, description, amount, amount FROM i) SELECT id FROM i`, b.customerID, b.orderID)
	_, err := pool.Exec(ctx, `INSERT INTO plugins (name, type, source, sha256) VALUES ('epay', 'gateway', '-- lua', repeat('a', 64))`)
	require.NoError(t, err)
	b.gatewayA = row(`INSERT INTO gateway_interfaces (plugin_name, display_name, enabled) VALUES ('epay', 'Epay A', true) RETURNING id`)
	b.gatewayB = row(`INSERT INTO gateway_interfaces (plugin_name, display_name, enabled) VALUES ('epay', 'Epay B', true) RETURNING id`)
	return b
}

// pendingPayment is a valid pending gateway payment of the whole order.
func (b *bundle) pendingPayment() dbsqlc.InsertPaymentParams {
	return dbsqlc.InsertPaymentParams{
		OrderID:            ptr(b.orderID),
		CustomerID:         b.customerID,
		Method:             "gateway",
		GatewayInterfaceID: ptr(b.gatewayA),
		Amount:             money.MustParse("100.00"),
		Currency:           "CNY",
		Status:             "pending",
	}
}

// rolledBack runs fn in a transaction that is always rolled back, so table
// cases on one database do not see each other.
func (b *bundle) rolledBack(t *testing.T, fn func(tx pgx.Tx) error) error {
	t.Helper()
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, tx.Rollback(ctx)) }()
	return store.MapError(fn(tx))
}

func ptr[T any](v T) *T { return &v }
