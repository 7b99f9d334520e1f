package deploy_test

import (
	"context"
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/pgcluster"
	"github.com/rustbill/paymentd/internal/testdb"
)

// deploy/export-pre-release.sql, as CHANGELOG.md (v0.1.0) tells the operator
// of a pre-release installation to run it: psql in an empty folder. It
// writes the three files with what the database holds, reads only, and
// prints the totals.
func TestThePreReleaseExportWritesCustomersOpenInvoicesAndLiveOrders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bin, err := pgcluster.FindBinaries()
	require.NoError(t, err)
	pool := testdb.Pool(t)
	url := pool.Config().ConnString()
	var alice, bob, order string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO customers (email, name, currency, password_hash, balance, credit_limit)
		VALUES ('alice@example.com', 'Alice', 'CNY', 'x', 12.50, 100) RETURNING id`).Scan(&alice))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO customers (email, currency, password_hash)
		VALUES ('bob@example.com', 'CNY', 'x') RETURNING id`).Scan(&bob))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO orders (customer_id, currency, total_amount, status, paid_at)
		VALUES ($1, 'CNY', 30.00, 'active', now()) RETURNING id`, alice).Scan(&order))
	_, err = pool.Exec(ctx, `INSERT INTO orders (customer_id, currency, total_amount) VALUES ($1, 'CNY', 5.00)`, bob)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `WITH i AS (INSERT INTO invoices (customer_id, order_id, currency, amount, paid_amount, status, issued_at, due_at)
		VALUES ($1, $2, 'CNY', 30.00, 10.00, 'overdue', now(), now()), ($1, $2, 'CNY', 30.00, 30.00, 'paid', now(), now()) RETURNING *),
		l AS (INSERT INTO invoice_lines (invoice_id, position, description, unit_amount, amount) SELECT id, 1, description, amount, amount FROM i) SELECT count(*) FROM i`, alice, order)
	require.NoError(t, err)

	dir := t.TempDir()
	script, err := filepath.Abs("export-pre-release.sql")
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(bin, "psql"), url, "-X", "-v", "ON_ERROR_STOP=1", "-f", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "customers | balances | open_invoices | owed  | live_orders")
	require.Contains(t, string(out), "2 |    12.50 |             1 | 20.00 |           1")

	read := func(name string) [][]string {
		f, err := os.Open(filepath.Join(dir, name))
		require.NoError(t, err)
		defer f.Close()
		rows, err := csv.NewReader(f).ReadAll()
		require.NoError(t, err)
		return rows
	}
	customers := read("customers.csv")
	require.Equal(t, []string{"id", "email", "name", "currency", "balance", "credit_limit", "created_at", "disabled_at"}, customers[0])
	require.Len(t, customers, 3)
	require.Equal(t, []string{alice, "alice@example.com", "Alice", "CNY", "12.50", "100.00"}, customers[1][:6])
	invoices := read("open-invoices.csv")
	require.Len(t, invoices, 2, "the paid invoice is not owed")
	require.Equal(t, []string{"alice@example.com", order, "overdue", "CNY", "30.00", "10.00", "20.00"}, invoices[1][2:9])
	orders := read("live-orders.csv")
	require.Len(t, orders, 2, "bob's pending order gives no service")
	require.Equal(t, []string{order, "alice@example.com"}, orders[1][:2])
}
