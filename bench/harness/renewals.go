package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/fakes/provider"
)

// SeedDueServices writes n monthly services (10.00 CNY a month) of n
// customers of their own, each with a paid period ending at end; the even
// ones' customers have a balance that covers the renewal (credited through
// the ledger), so a billing run at end minus a day issues n renewal
// invoices and pays n/2 of them from the balance.
func SeedDueServices(ctx context.Context, db *pgxpool.Pool, n int, end time.Time) error {
	if _, err := db.Exec(ctx, `
WITH c AS (
    INSERT INTO customers (email, password_hash, currency, balance)
    SELECT 'renewal' || i || '-' || gen_random_uuid() || '@example.com', 'x', 'CNY', CASE WHEN i % 2 = 0 THEN 25.00 ELSE 0 END
    FROM generate_series(1, $1) AS i
    RETURNING id, balance
), bt AS (
    INSERT INTO balance_transactions (customer_id, type, amount, balance_before, balance_after, description)
    SELECT id, 'manual_adjust', balance, 0, balance, 'seed' FROM c WHERE balance > 0
), o AS (
    INSERT INTO orders (customer_id, total_amount, currency, status, billing_cycle, renewal_price, description, paid_until)
    SELECT id, 0, 'CNY', 'active', 'monthly', 10.00, 'VPS', $2 FROM c
    RETURNING id, paid_until
)
INSERT INTO service_periods (order_id, seq, starts_at, ends_at, anchor_at, anchor_months, status, paid_at)
SELECT id, 1, paid_until - interval '1 month', paid_until, paid_until - interval '1 month', 1, 'paid', paid_until - interval '1 month'
FROM o`, n, end); err != nil {
		return fmt.Errorf("seed due services: %w", err)
	}
	if _, err := db.Exec(ctx, `ANALYZE customers; ANALYZE orders; ANALYZE service_periods; ANALYZE invoices`); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}

// PostmasterOf is the PostgreSQL server's main process when it runs on
// this machine (a backend's parent), else 0: its TreeCPU is the server's
// CPU.
func PostmasterOf(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) int {
	var backend int
	if err := db.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return 0
	}
	if st, err := readStat(backend); err == nil && st.ppid > 1 {
		return st.ppid
	}
	return 0
}

// Fakes are the fake epay gateway and the fake provider, with the merchant
// and token SeedWorld's gateway interface and product use, started in this
// process.
type Fakes struct {
	EpayURL, ProviderURL string
	gw                   *epay.Server
	prov                 *provider.Server
}

// StartFakes starts the fakes on loopback ports.
func StartFakes() (*Fakes, error) { return StartFakesAs(merchantPID, merchantKey, providerToken) }

// StartFakesAs starts the fakes for epay merchant pid with key, and the
// provider's API token.
func StartFakesAs(pid, key, token string) (*Fakes, error) {
	gw := epay.New(epay.Options{Merchants: map[string]string{pid: key}})
	if err := gw.Start(); err != nil {
		return nil, err
	}
	prov := provider.New(provider.Options{Token: token})
	if err := prov.Start(); err != nil {
		gw.Close()
		return nil, err
	}
	return &Fakes{EpayURL: gw.URL(), ProviderURL: prov.URL(), gw: gw, prov: prov}, nil
}

// Close stops both.
func (f *Fakes) Close() {
	f.gw.Close()
	f.prov.Close()
}
