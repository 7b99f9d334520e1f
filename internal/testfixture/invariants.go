package testfixture

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
)

// moneyColumns are every money column of the schema (docs/api.md, "Money and
// records", plus refunds and invoice lines). key names a row in a failure
// ("" is id).
var moneyColumns = []struct{ table, column, key string }{
	{"products", "price", ""},
	{"orders", "total_amount", ""},
	{"orders", "renewal_price", ""},
	{"invoices", "amount", ""},
	{"invoices", "paid_amount", ""},
	{"payments", "amount", ""},
	{"payments", "refunded_amount", ""},
	{"payments", "captured_amount", ""},
	{"refunds", "amount", ""},
	{"disputes", "amount", ""},
	{"customers", "balance", ""},
	{"customers", "credit_limit", ""},
	{"balance_transactions", "amount", ""},
	{"balance_transactions", "balance_before", ""},
	{"balance_transactions", "balance_after", ""},
	{"invoice_lines", "unit_amount", "invoice_id::text || '/' || position"},
	{"invoice_lines", "amount", "invoice_id::text || '/' || position"},
	{"plan_changes", "from_price", ""},
	{"plan_changes", "to_price", ""},
	{"plan_changes", "amount", ""},
	{"plan_changes", "credited", ""},
}

// violations runs a query that lists rows breaking a rule, one text per
// row, and fails the test naming the rule and the rows.
func violations(t testing.TB, db store.DB, rule, sql string) {
	t.Helper()
	rows, err := db.Query(context.Background(), sql)
	require.NoError(t, err, rule)
	defer rows.Close()
	var bad []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		bad = append(bad, s)
	}
	require.NoError(t, rows.Err(), rule)
	require.Empty(t, bad, "money invariant broken: %s", rule)
}

// CheckMoneyInvariants checks, over the whole database, that no money was
// created, lost or rounded away:
//
//   - every numeric column is one of the money columns, each NUMERIC(12,2),
//     and no amount has more than two decimals;
//   - every balance transaction has balance_after = balance_before + amount;
//   - per payment, the succeeded refunds sum to refunded_amount, and the
//     succeeded and pending ones together never exceed the amount;
//   - a paid payment is refunded exactly when refunded_amount = amount, and
//     a payment has paid_at exactly when it was paid; captured money (all
//     of the amount) only on a failed payment, never returned beyond what
//     was captured;
//   - an invoice's paid_amount is the sum of its settled payments, never
//     above its amount, and its amount is the sum of its lines;
//   - no order has more than one order_paid event, and a paid order's
//     settled payments (without invoice) cover its total exactly once.
func CheckMoneyInvariants(t testing.TB, db store.DB) {
	t.Helper()
	// A NUMERIC(12,2) column rounds what is written to it, so the values
	// alone cannot show a third decimal that was rounded away: the columns
	// must be exactly the money columns, each NUMERIC(12,2), and nothing
	// else numeric may hold money unseen.
	var declared []string
	for _, c := range moneyColumns {
		declared = append(declared, c.table+"."+c.column+" numeric(12,2)")
	}
	rows, err := db.Query(context.Background(), `SELECT c.table_name || '.' || c.column_name || ' ' || format_type(a.atttypid, a.atttypmod)
		FROM information_schema.columns c
		JOIN pg_attribute a ON a.attrelid = (quote_ident(c.table_schema) || '.' || quote_ident(c.table_name))::regclass
		                   AND a.attname = c.column_name
		WHERE c.table_schema = current_schema() AND c.data_type = 'numeric'
		ORDER BY 1`)
	require.NoError(t, err)
	var numeric []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		numeric = append(numeric, s)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	require.ElementsMatch(t, declared, numeric, "money invariant broken: every numeric column is a money column of NUMERIC(12,2)")
	for _, c := range moneyColumns {
		key := c.key
		if key == "" {
			key = "id::text"
		}
		violations(t, db, c.table+"."+c.column+" has at most two decimals",
			`SELECT `+key+` || ': ' || `+c.column+`::text FROM `+c.table+
				` WHERE `+c.column+` <> round(`+c.column+`, 2) OR scale(`+c.column+`) > 2`)
	}
	violations(t, db, "an invoice's amount is the sum of its lines",
		`SELECT i.id::text || ': ' || i.amount::text || ', lines ' || coalesce(sum(l.amount)::text, 'none')
		FROM invoices i LEFT JOIN invoice_lines l ON l.invoice_id = i.id
		GROUP BY i.id HAVING i.amount IS DISTINCT FROM sum(l.amount)`)
	violations(t, db, "balance_after = balance_before + amount",
		`SELECT id::text FROM balance_transactions WHERE balance_after <> balance_before + amount`)
	violations(t, db, "succeeded refunds = refunded_amount <= amount",
		`SELECT p.id::text || ': refunded ' || p.refunded_amount::text || ', succeeded ' || coalesce(r.ok, 0)::text
		   || ', reserved ' || coalesce(r.reserved, 0)::text || ' of ' || p.amount::text
		 FROM payments p
		 LEFT JOIN (SELECT payment_id,
		                   sum(amount) FILTER (WHERE status = 'succeeded') AS ok,
		                   sum(amount) FILTER (WHERE status IN ('succeeded', 'pending')) AS reserved
		            FROM refunds GROUP BY payment_id) r ON r.payment_id = p.id
		 WHERE coalesce(r.ok, 0) <> p.refunded_amount
		    OR coalesce(r.ok, 0) > p.amount
		    OR coalesce(r.reserved, 0) > p.amount`)
	violations(t, db, "status refunded exactly when refunded_amount = amount; paid_at exactly when paid",
		`SELECT id::text FROM payments
		 WHERE (status = 'refunded') <> (refunded_amount = amount AND status <> 'failed')
		    OR (status IN ('success', 'refunded')) <> (paid_at IS NOT NULL)`)
	violations(t, db, "captured money only on a failed payment, all of it, returned at most once",
		`SELECT id::text FROM payments
		 WHERE (captured_amount <> 0 AND (status <> 'failed' OR captured_amount <> amount))
		    OR (status = 'failed' AND refunded_amount > captured_amount)`)
	violations(t, db, "invoice paid_amount = sum of its settled payments",
		`SELECT i.id::text || ': paid ' || i.paid_amount::text || ', payments ' || coalesce(s.total, 0)::text
		 FROM invoices i
		 LEFT JOIN (SELECT invoice_id, sum(amount) AS total FROM payments
		            WHERE status IN ('success', 'refunded') GROUP BY invoice_id) s ON s.invoice_id = i.id
		 WHERE i.paid_amount <> coalesce(s.total, 0) OR i.paid_amount > i.amount`)
	violations(t, db, "at most one order_paid event per order",
		`SELECT order_id::text FROM events WHERE event_type = 'order_paid' GROUP BY order_id HAVING count(*) > 1`)
	violations(t, db, "an order is paid by at most one settled payment of its own",
		`SELECT order_id::text FROM payments
		 WHERE invoice_id IS NULL AND order_id IS NOT NULL AND status IN ('success', 'refunded')
		 GROUP BY order_id HAVING count(*) > 1`)
}
