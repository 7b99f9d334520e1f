// Package testfixture writes rows for tests that need a world to act in:
// customers, orders, gateway interfaces and payments in given states. It is
// test support only (imported from _test files); it writes rows directly so a
// test can set up states that the domain would need many steps to reach.
package testfixture

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
)

var seq atomic.Int64

func id(t testing.TB, db store.DB, sql string, args ...any) uuid.UUID {
	t.Helper()
	var out uuid.UUID
	require.NoError(t, db.QueryRow(context.Background(), sql, args...).Scan(&out))
	return out
}

// Customer inserts a customer with currency CNY and returns its id.
func Customer(t testing.TB, db store.DB) uuid.UUID {
	t.Helper()
	email := fmt.Sprintf("customer%d-%s@example.com", seq.Add(1), uuid.NewString()[:8])
	return id(t, db, `INSERT INTO customers (email, password_hash, currency) VALUES ($1, 'x', 'CNY') RETURNING id`, email)
}

// Order inserts a pending order of customer for amount (CNY).
func Order(t testing.TB, db store.DB, customer uuid.UUID, amount string) uuid.UUID {
	t.Helper()
	return OrderIn(t, db, customer, amount, "CNY")
}

// OrderIn is Order in currency.
func OrderIn(t testing.TB, db store.DB, customer uuid.UUID, amount, currency string) uuid.UUID {
	t.Helper()
	return id(t, db, `INSERT INTO orders (customer_id, total_amount, currency) VALUES ($1, $2, $3) RETURNING id`,
		customer, money.MustParse(amount), currency)
}

// GatewayInterface inserts an enabled gateway interface of plugin (the
// plugin row is created when missing) and returns its id.
func GatewayInterface(t testing.TB, db store.DB, plugin string) uuid.UUID {
	t.Helper()
	_, err := db.Exec(context.Background(), `INSERT INTO plugins (name, type, source, sha256)
		VALUES ($1, 'gateway', '-- test', repeat('a', 64)) ON CONFLICT (name) DO NOTHING`, plugin)
	require.NoError(t, err)
	return id(t, db, `INSERT INTO gateway_interfaces (plugin_name, display_name, enabled) VALUES ($1, $1, true) RETURNING id`, plugin)
}

// Payment describes a payment row to insert; zero fields take defaults.
type Payment struct {
	Customer  uuid.UUID
	Order     uuid.UUID
	Gateway   uuid.UUID
	Amount    string // default "100.00"
	Currency  string // default "CNY"
	Status    string // default "pending"
	CreatedAt time.Time
	// SettledAt is when a success (paid_at) or a failure (failed_at)
	// happened; default CreatedAt.
	SettledAt time.Time
}

// InsertPayment inserts p (creating the order when p.Order is zero) and
// returns the payment id.
func InsertPayment(t testing.TB, db store.DB, p Payment) uuid.UUID {
	t.Helper()
	if p.Amount == "" {
		p.Amount = "100.00"
	}
	if p.Status == "" {
		p.Status = "pending"
	}
	if p.Currency == "" {
		p.Currency = "CNY"
	}
	if p.Order == uuid.Nil {
		p.Order = OrderIn(t, db, p.Customer, p.Amount, p.Currency)
	}
	if p.CreatedAt.IsZero() {
		p.CreatedAt = time.Now()
	}
	if p.SettledAt.IsZero() {
		p.SettledAt = p.CreatedAt
	}
	var paidAt *time.Time
	if p.Status == "success" || p.Status == "refunded" {
		paidAt = &p.SettledAt
	}
	var failedAt *time.Time
	if p.Status == "failed" {
		failedAt = &p.SettledAt
	}
	refunded := money.Zero()
	if p.Status == "refunded" {
		refunded = money.MustParse(p.Amount)
	}
	return id(t, db, `INSERT INTO payments (order_id, customer_id, method, gateway_interface_id, amount, currency, status, paid_at, failed_at,
			refunded_amount, created_at, updated_at)
		VALUES ($1, $2, 'gateway', $3, $4, $5, $6, $7, $8, $9, $10, $10) RETURNING id`,
		p.Order, p.Customer, p.Gateway, money.MustParse(p.Amount), p.Currency, p.Status, paidAt, failedAt, refunded, p.CreatedAt)
}

// InsertRefund records a succeeded refund of amount of a paid payment at
// the time at (created and completed then), and adds it to the payment's
// refunded_amount (the payment is refunded when that reaches its amount).
func InsertRefund(t testing.TB, db store.DB, payment uuid.UUID, amount string, at time.Time) uuid.UUID {
	t.Helper()
	a := money.MustParse(amount)
	_, err := db.Exec(context.Background(), `UPDATE payments SET refunded_amount = refunded_amount + $2,
			status = CASE WHEN refunded_amount + $2 = amount THEN 'refunded' ELSE status END
		WHERE id = $1`, payment, a)
	require.NoError(t, err)
	return id(t, db, `INSERT INTO refunds (payment_id, amount, status, created_at, updated_at)
		VALUES ($1, $2, 'succeeded', $3, $3) RETURNING id`, payment, a, at)
}
