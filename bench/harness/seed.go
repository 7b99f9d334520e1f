package harness

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Seeded rows get ids that SQL and Go can compute from a number, so that
// pgbench scripts address the same rows as the service's requests:
// "<kind>0000000-0000-4000-8000-<n as 12 hex digits>".
const (
	kindOrder    = 1
	kindPayment  = 2
	kindCustomer = 3
)

// BenchID is the id of seeded row n of a kind.
func BenchID(kind int, n int64) uuid.UUID {
	return uuid.MustParse(fmt.Sprintf("%d0000000-0000-4000-8000-%012x", kind, n))
}

// sqlID is BenchID in SQL, for an integer expression.
func sqlID(kind int, expr string) string {
	return fmt.Sprintf("('%d0000000-0000-4000-8000-' || lpad(to_hex(%s), 12, '0'))::uuid", kind, expr)
}

// Seed prices: every order is of the one product, 12.30 CNY.
const (
	price         = "12.30"
	seedBalance   = "1000000.00"
	merchantPID   = "1001"
	merchantKey   = "k3y"
	providerToken = "prov-t0ken"
)

// World is what the seed made: the gateway interface, the product and the
// customers with their access tokens.
type World struct {
	GatewayID uuid.UUID
	ProductID uuid.UUID
	Customers int
	// Tokens[i] is "Bearer <jwt>" of customer i+1.
	Tokens []string
	// next is the last number used for orders and payments.
	next int64
}

// Customer is the id of customer i (1-based).
func (w *World) Customer(i int) uuid.UUID { return BenchID(kindCustomer, int64(i)) }

// SeedWorld writes the gateway interface (plugin epay, on the fake
// gateway), the product (provisioned by http_provider on the fake
// provider), and customers with a balance (and the ledger row that put it
// there), and mints their access tokens. The plugins table must have been
// filled by a first start of paymentd.
func SeedWorld(ctx context.Context, db *pgxpool.Pool, epayURL, providerURL, jwtSecret string, customers int) (*World, error) {
	w := &World{Customers: customers}
	gwConfig, _ := json.Marshal(map[string]string{"api_url": epayURL + "/", "pid": merchantPID, "key": merchantKey})
	if err := db.QueryRow(ctx, `
		INSERT INTO gateway_interfaces (plugin_name, display_name, config, config_schema, enabled)
		SELECT name, 'Alipay (bench)', $1, config_schema, true FROM plugins WHERE name = 'epay'
		RETURNING id`, gwConfig).Scan(&w.GatewayID); err != nil {
		return nil, fmt.Errorf("seed gateway interface (is the epay plugin loaded?): %w", err)
	}
	provConfig, _ := json.Marshal(map[string]string{"api_url": providerURL + "/", "token": providerToken, "plan": "vps-1g"})
	if err := db.QueryRow(ctx, `
		INSERT INTO products (name, price, currency, provider_plugin, provider_config)
		VALUES ('VPS 1G (bench)', $1::numeric, 'CNY', 'http_provider', $2) RETURNING id`, price, provConfig).Scan(&w.ProductID); err != nil {
		return nil, fmt.Errorf("seed product: %w", err)
	}
	if err := SeedCustomers(ctx, db, customers); err != nil {
		return nil, err
	}
	now := time.Now()
	for i := 1; i <= customers; i++ {
		w.Tokens = append(w.Tokens, "Bearer "+mintJWT(jwtSecret, w.Customer(i), now))
	}
	return w, nil
}

// SeedCustomers writes customers 1…n with a balance and the ledger row
// that put it there. The empty server's database gets them too: it checks
// every token's customer as paymentd does (the customer's access state),
// and a token of a customer it does not know is refused.
func SeedCustomers(ctx context.Context, db *pgxpool.Pool, n int) error {
	if _, err := db.Exec(ctx, `
		INSERT INTO customers (id, email, password_hash, name, currency, balance)
		SELECT `+sqlID(kindCustomer, "g")+`, 'bench' || g || '@example.com', 'x', 'Bench ' || g, 'CNY', $2::numeric
		FROM generate_series(1, $1::int) g`, n, seedBalance); err != nil {
		return fmt.Errorf("seed customers: %w", err)
	}
	if _, err := db.Exec(ctx, `
		INSERT INTO balance_transactions (customer_id, type, amount, balance_before, balance_after, description)
		SELECT id, 'manual_adjust', balance, 0, balance, 'bench seed' FROM customers WHERE email LIKE 'bench%@example.com'`); err != nil {
		return fmt.Errorf("seed balances: %w", err)
	}
	return nil
}

// Range is a block of seeded numbers [From, From+N).
type Range struct {
	From int64
	N    int64
}

// At is the i-th number of the range.
func (r Range) At(i int) int64 { return r.From + int64(i) }

func (w *World) take(n int64) Range {
	r := Range{From: w.next + 1, N: n}
	w.next += n
	return r
}

// customerOf spreads seeded rows over the customers: row n belongs to
// customer 1 + n mod customers.
func (w *World) customerOf(n int64) int { return 1 + int(n%int64(w.Customers)) }

// customerExpr is customerOf in SQL.
func (w *World) customerExpr(expr string) string {
	return sqlID(kindCustomer, fmt.Sprintf("1 + (%s) %% %d", expr, w.Customers))
}

// SeedPendingOrders writes n pending orders of the product, without
// payments (CreatePayment, PayWithBalance), created over the last hour.
func (w *World) SeedPendingOrders(ctx context.Context, db *pgxpool.Pool, n int64) (Range, error) {
	r := w.take(n)
	_, err := db.Exec(ctx, `
		INSERT INTO orders (id, customer_id, product_id, total_amount, currency, description, created_at, updated_at)
		SELECT `+sqlID(kindOrder, "g")+`, `+w.customerExpr("g")+`, $3, $4::numeric, 'CNY', 'bench',
		       now() - (g % 3600) * interval '1 second', now() - (g % 3600) * interval '1 second'
		FROM generate_series($1::bigint, $2::bigint) g`, r.From, r.From+r.N-1, w.ProductID, price)
	if err != nil {
		return r, fmt.Errorf("seed pending orders: %w", err)
	}
	return r, nil
}

// SeedPendingPayments writes n pending orders, each with a pending gateway
// payment of the epay interface (the payment has the order's number): what
// a customer leaves behind after CreatePayment, waiting for the gateway's
// callback.
func (w *World) SeedPendingPayments(ctx context.Context, db *pgxpool.Pool, n int64) (Range, error) {
	r, err := w.SeedPendingOrders(ctx, db, n)
	if err != nil {
		return r, err
	}
	_, err = db.Exec(ctx, `
		INSERT INTO payments (id, order_id, customer_id, method, gateway_interface_id, amount, currency, status,
		                      payment_url, return_url, created_at, updated_at)
		SELECT `+sqlID(kindPayment, "g")+`, `+sqlID(kindOrder, "g")+`, `+w.customerExpr("g")+`, 'gateway', $3, $4::numeric, 'CNY', 'pending',
		       'http://epay.example/submit.php?trade_no=' || g, 'https://shop.example/done',
		       now() - (g % 3600) * interval '1 second', now() - (g % 3600) * interval '1 second'
		FROM generate_series($1::bigint, $2::bigint) g`, r.From, r.From+r.N-1, w.GatewayID, price)
	if err != nil {
		return r, fmt.Errorf("seed pending payments: %w", err)
	}
	return r, nil
}

// SeedPaidOrders writes n orders that a callback has paid (order paid,
// payment success) whose order_paid event is still to be written: the
// event worker's backlog, queued by QueueOrderPaid.
func (w *World) SeedPaidOrders(ctx context.Context, db *pgxpool.Pool, n int64) (Range, error) {
	r := w.take(n)
	tx, err := db.Begin(ctx)
	if err != nil {
		return r, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `
		INSERT INTO orders (id, customer_id, product_id, status, total_amount, currency, description, paid_at, created_at, updated_at)
		SELECT `+sqlID(kindOrder, "g")+`, `+w.customerExpr("g")+`, $3, 'paid', $4::numeric, 'CNY', 'bench backlog', now(), now(), now()
		FROM generate_series($1::bigint, $2::bigint) g`, r.From, r.From+r.N-1, w.ProductID, price); err != nil {
		return r, fmt.Errorf("seed paid orders: %w", err)
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO payments (id, order_id, customer_id, method, gateway_interface_id, amount, currency, status,
		                      gateway_payment_id, gateway_tx_id, paid_at, created_at, updated_at)
		SELECT `+sqlID(kindPayment, "g")+`, `+sqlID(kindOrder, "g")+`, `+w.customerExpr("g")+`, 'gateway', $3, $4::numeric, 'CNY', 'success',
		       'BACKLOG' || g, 'BACKLOG' || g, now(), now(), now()
		FROM generate_series($1::bigint, $2::bigint) g`, r.From, r.From+r.N-1, w.GatewayID, price); err != nil {
		return r, fmt.Errorf("seed paid payments: %w", err)
	}
	return r, tx.Commit(ctx)
}

// QueueOrderPaid writes the order_paid events of a SeedPaidOrders range in
// one transaction, and returns when it committed: the worker sees the whole
// backlog at once (the insert trigger's NOTIFYs are delivered at commit).
func (w *World) QueueOrderPaid(ctx context.Context, db *pgxpool.Pool, r Range) (time.Time, error) {
	_, err := db.Exec(ctx, `
		INSERT INTO events (event_type, payload, order_id)
		SELECT 'order_paid',
		       jsonb_build_object('order_id', `+sqlID(kindOrder, "g")+`, 'payment_id', `+sqlID(kindPayment, "g")+`,
		                          'amount', $3::text, 'currency', 'CNY', 'method', 'gateway'),
		       `+sqlID(kindOrder, "g")+`
		FROM generate_series($1::bigint, $2::bigint) g`, r.From, r.From+r.N-1, price)
	return time.Now(), err
}

// mintJWT signs an access token exactly as identity issues them: HS256
// over sub, iss, iat, exp, jti and gen (the customer's token generation: 0
// for a customer seeded fresh, whose access was never ended).
func mintJWT(secret string, customer uuid.UUID, now time.Time) string {
	enc := base64.RawURLEncoding
	head := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	claims, _ := json.Marshal(map[string]any{
		"sub": customer.String(), "iss": "paymentd", "iat": now.Unix(),
		"exp": now.Add(24 * time.Hour).Unix(), "jti": uuid.NewString(), "gen": 0,
	})
	msg := head + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(msg))
	return msg + "." + enc.EncodeToString(mac.Sum(nil))
}
