package ledger_test

import (
	"context"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testdb.Main(m)) }

// bundle is a consistent set of rows covering every path money takes: a
// gateway payment with a partial refund, a balance payment refunded in part
// to the balance, a zero-amount order, an order paid through its invoice in
// two payments, a standalone invoice paid in part, pending and failed
// payments, a chained balance ledger.
type bundle struct {
	pool *pgxpool.Pool
	// customer and their orders, payments, refunds, invoices.
	customer                          uuid.UUID
	gw                                uuid.UUID
	active, balancePaid, zero, unpaid uuid.UUID // orders
	invoiced                          uuid.UUID // order paid through invoice orderInvoice
	gatewayPay, balancePay            uuid.UUID
	balanceRefund                     uuid.UUID // of balancePay, credited to the balance
	pendingPay, failedPay             uuid.UUID
	capturedPay                       uuid.UUID // failed, its money captured, partly returned
	invoicePay1, invoicePay2          uuid.UUID
	orderInvoice, looseInvoice        uuid.UUID
	product                           uuid.UUID
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool := testdb.Pool(t)
	w := &bundle{pool: pool}
	w.customer = testfixture.Customer(t, pool)
	w.gw = testfixture.GatewayInterface(t, pool, "epay")
	ctx := context.Background()
	q := func(sql string, args ...any) uuid.UUID {
		t.Helper()
		var id uuid.UUID
		require.NoError(t, pool.QueryRow(ctx, sql, args...).Scan(&id), sql)
		return id
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, sql, args...)
		require.NoError(t, err, sql)
	}
	order := func(status, total string, paid bool) uuid.UUID {
		return q(`INSERT INTO orders (customer_id, status, total_amount, currency, paid_at)
			VALUES ($1, $2, $3, 'CNY', CASE WHEN $4 THEN now() END) RETURNING id`, w.customer, status, total, paid)
	}
	payment := func(orderID, invoiceID *uuid.UUID, method, status, amount, refunded string) uuid.UUID {
		var gw *uuid.UUID
		if method == "gateway" {
			gw = &w.gw
		}
		return q(`INSERT INTO payments (order_id, invoice_id, customer_id, method, gateway_interface_id, amount, refunded_amount,
				currency, status, paid_at, failed_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 'CNY', $8, CASE WHEN $8 IN ('success', 'refunded') THEN now() END,
			        CASE WHEN $8 = 'failed' THEN now() END) RETURNING id`,
			orderID, invoiceID, w.customer, method, gw, amount, refunded, status)
	}
	event := func(orderID uuid.UUID, typ, status, payload string) {
		exec(`INSERT INTO events (event_type, order_id, status, payload, locked_by, locked_until)
			VALUES ($1, $2, $3, $4, CASE WHEN $3 = 'processing' THEN 'node-a' END,
			        CASE WHEN $3 = 'processing' THEN now() + interval '1 minute' END)`, typ, orderID, status, payload)
	}
	refund := func(pay uuid.UUID, amount, status string) uuid.UUID {
		// A balance payment's refund goes to the balance, the others' to
		// their gateway.
		return q(`INSERT INTO refunds (payment_id, amount, status, destination)
			VALUES ($1, $2, $3, (SELECT CASE method WHEN 'balance' THEN 'balance' ELSE 'gateway' END FROM payments WHERE id = $1))
			RETURNING id`, pay, amount, status)
	}
	ledgerRow := func(typ, amount, before, after string, pay, ref *uuid.UUID) {
		exec(`INSERT INTO balance_transactions (customer_id, type, amount, balance_before, balance_after, payment_id, refund_id, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, clock_timestamp())`, w.customer, typ, amount, before, after, pay, ref)
	}

	w.product = q(`INSERT INTO products (name, price, currency) VALUES ('VPS', 12.30, 'CNY') RETURNING id`)

	// A gateway payment, refunded in part; the order went all the way.
	w.active = order("active", "12.30", true)
	w.gatewayPay = payment(&w.active, nil, "gateway", "success", "12.30", "2.30")
	refund(w.gatewayPay, "2.30", "succeeded")
	refund(w.gatewayPay, "1.00", "failed")
	event(w.active, "order_paid", "done", `{"order_id":"`+w.active.String()+`","payment_id":"`+w.gatewayPay.String()+`","amount":"12.30","currency":"CNY","method":"gateway"}`)
	event(w.active, "order_provisioned", "done", `{}`)
	exec(`INSERT INTO instances (customer_id, order_id, status) VALUES ($1, $2, 'running')`, w.customer, w.active)

	// The balance: 100.00 credited, 30.00 paid for an order, 10.00 of it refunded.
	ledgerRow("manual_adjust", "100.00", "0.00", "100.00", nil, nil)
	w.balancePaid = order("provisioning", "30.00", true)
	w.balancePay = payment(&w.balancePaid, nil, "balance", "success", "30.00", "10.00")
	ledgerRow("payment", "-30.00", "100.00", "70.00", &w.balancePay, nil)
	w.balanceRefund = refund(w.balancePay, "10.00", "succeeded")
	ledgerRow("refund", "10.00", "70.00", "80.00", &w.balancePay, &w.balanceRefund)
	exec(`UPDATE customers SET balance = 80.00 WHERE id = $1`, w.customer)
	event(w.balancePaid, "order_paid", "pending", `{"order_id":"`+w.balancePaid.String()+`","payment_id":"`+w.balancePay.String()+`","amount":"30.00","currency":"CNY","method":"balance"}`)

	// A zero-amount order needs no payment.
	w.zero = order("provisioning", "0.00", true)
	event(w.zero, "order_paid", "processing", `{"order_id":"`+w.zero.String()+`","payment_id":null,"amount":"0.00","currency":"CNY","method":"balance"}`)

	// An unpaid order: one pending payment, one failed.
	w.unpaid = order("pending", "50.00", false)
	w.pendingPay = payment(&w.unpaid, nil, "gateway", "pending", "50.00", "0")
	w.failedPay = payment(&w.unpaid, nil, "gateway", "failed", "50.00", "0")
	// A payment of it failed, but its gateway took the money after all: 20.00
	// of the 50.00 went back through the gateway, 10.00 is on its way.
	w.capturedPay = payment(&w.unpaid, nil, "gateway", "failed", "50.00", "0")
	exec(`UPDATE payments SET captured_amount = amount, captured_at = now(), refunded_amount = 20.00 WHERE id = $1`, w.capturedPay)
	refund(w.capturedPay, "20.00", "succeeded")
	refund(w.capturedPay, "10.00", "pending")

	// An order paid through its invoice in two payments.
	w.invoiced = order("paid", "40.00", true)
	w.orderInvoice = q(`WITH i AS (INSERT INTO invoices (customer_id, order_id, status, amount, paid_amount, currency, paid_at)
		VALUES ($1, $2, 'paid', 40.00, 40.00, 'CNY', now()) RETURNING *),
		l AS (INSERT INTO invoice_lines (invoice_id, position, description, unit_amount, amount) SELECT id, 1, description, amount, amount FROM i) SELECT id FROM i`, w.customer, w.invoiced)
	w.invoicePay1 = payment(&w.invoiced, &w.orderInvoice, "gateway", "success", "20.00", "0")
	w.invoicePay2 = payment(&w.invoiced, &w.orderInvoice, "gateway", "success", "20.00", "0")
	event(w.invoiced, "order_paid", "failed", `{"order_id":"`+w.invoiced.String()+`","payment_id":"`+w.invoicePay2.String()+`","amount":"20.00","currency":"CNY","method":"gateway"}`)

	// An invoice without order, paid in part.
	w.looseInvoice = q(`WITH i AS (INSERT INTO invoices (customer_id, status, amount, paid_amount, currency) VALUES ($1, 'issued', 15.00, 5.00, 'CNY') RETURNING *),
		l AS (INSERT INTO invoice_lines (invoice_id, position, description, unit_amount, amount) SELECT id, 1, description, amount, amount FROM i) SELECT id FROM i`, w.customer)
	payment(nil, &w.looseInvoice, "gateway", "success", "5.00", "0")
	return w
}

// broken runs corrupt in a transaction, verifies inside it, and rolls back,
// so every case starts from the clean world.
func (w *bundle) broken(t *testing.T, corrupt ...string) ledger.Report {
	t.Helper()
	ctx := context.Background()
	tx, err := w.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	for _, sql := range corrupt {
		_, err := tx.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	r, err := ledger.Verify(ctx, tx)
	require.NoError(t, err)
	return r
}

func TestCleanWorldHasNoViolations(t *testing.T) {
	t.Parallel()
	w := setup(t)
	r, err := ledger.Verify(context.Background(), w.pool)
	require.NoError(t, err)
	require.True(t, r.OK(), "%s", r)
	require.EqualValues(t, 8, r.Totals.Payments)
	require.EqualValues(t, 5, r.Totals.SettledPayments)
	require.Equal(t, "87.30", r.Totals.Received)
	require.Equal(t, "50.00", r.Totals.Captured)
	require.Equal(t, "30.00", r.Totals.ToReturn)
	require.Equal(t, "32.30", r.Totals.Refunded)
	require.Equal(t, "80.00", r.Totals.Balances)
	require.EqualValues(t, 1, r.Totals.EventsFailed)
	require.Contains(t, r.String(), "ledger clean")

	// The same inside a transaction the caller owns.
	require.True(t, w.broken(t).OK())
}

// A refund is credited to the balance once: the database refuses a second
// ledger row naming it (balance_transactions_refund_id_key, partial since
// migration 00019: the rows that name no refund are not in it, and any
// number of them coexist).
func TestTheLedgerCreditsARefundOnce(t *testing.T) {
	t.Parallel()
	w := setup(t)
	ctx := context.Background()
	insert := func(refund *uuid.UUID) error {
		_, err := w.pool.Exec(ctx, `
			INSERT INTO balance_transactions (customer_id, type, amount, balance_before, balance_after, payment_id, refund_id, created_at)
			VALUES ($1, $2, 10.00, 80.00, 90.00, $3, $4, clock_timestamp())`,
			w.customer, map[bool]string{true: "refund", false: "manual_adjust"}[refund != nil], w.balancePay, refund)
		return err
	}
	var pgErr *pgconn.PgError
	require.ErrorAs(t, insert(&w.balanceRefund), &pgErr)
	require.Equal(t, "23505", pgErr.Code, "unique_violation")
	require.Equal(t, "balance_transactions_refund_id_key", pgErr.ConstraintName)

	require.NoError(t, insert(nil), "rows that name no refund do not collide")
	var without int
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM balance_transactions WHERE customer_id = $1 AND refund_id IS NULL`,
		w.customer).Scan(&without))
	require.Equal(t, 3, without)
}

func TestEveryBrokenRuleIsReportedWithItsIDs(t *testing.T) {
	t.Parallel()
	w := setup(t)
	id := func(u uuid.UUID) string { return "'" + u.String() + "'" }
	cases := []struct {
		name    string
		corrupt []string
		rule    string
		ids     []uuid.UUID // each must appear in the violation's ids
	}{
		{
			name:    "refunded_amount is not the sum of the succeeded refunds",
			corrupt: []string{`UPDATE payments SET refunded_amount = 5.00 WHERE id = ` + id(w.gatewayPay)},
			rule:    "payment_refunds", ids: []uuid.UUID{w.gatewayPay},
		},
		{
			name:    "pending and succeeded refunds exceed the amount",
			corrupt: []string{`INSERT INTO refunds (payment_id, amount, status) VALUES (` + id(w.gatewayPay) + `, 10.01, 'pending')`},
			rule:    "payment_refunds", ids: []uuid.UUID{w.gatewayPay},
		},
		{
			name:    "a succeeded refund of a payment never paid",
			corrupt: []string{`INSERT INTO refunds (payment_id, amount, status) VALUES (` + id(w.pendingPay) + `, 1.00, 'succeeded')`},
			rule:    "payment_refunds", ids: []uuid.UUID{w.pendingPay},
		},
		{
			name: "refunded without the full amount",
			corrupt: []string{`ALTER TABLE payments DROP CONSTRAINT payments_refunded_status_check`,
				`UPDATE payments SET status = 'refunded' WHERE id = ` + id(w.gatewayPay)},
			rule: "payment_status", ids: []uuid.UUID{w.gatewayPay},
		},
		{
			name: "settled without paid_at",
			corrupt: []string{`ALTER TABLE payments DROP CONSTRAINT payments_paid_at_check`,
				`UPDATE payments SET paid_at = NULL WHERE id = ` + id(w.invoicePay1)},
			rule: "payment_status", ids: []uuid.UUID{w.invoicePay1},
		},
		{
			name:    "a refund of a failed payment whose money was never captured",
			corrupt: []string{`INSERT INTO refunds (payment_id, amount, status) VALUES (` + id(w.failedPay) + `, 1.00, 'pending')`},
			rule:    "payment_refunds", ids: []uuid.UUID{w.failedPay},
		},
		{
			name: "captured money returned beyond what was captured",
			corrupt: []string{`ALTER TABLE payments DROP CONSTRAINT payments_captured_check`,
				`UPDATE payments SET captured_amount = 10.00 WHERE id = ` + id(w.capturedPay)},
			rule: "payment_refunds", ids: []uuid.UUID{w.capturedPay},
		},
		{
			name: "captured money on a settled payment",
			corrupt: []string{`ALTER TABLE payments DROP CONSTRAINT payments_captured_check`,
				`UPDATE payments SET captured_amount = amount, captured_at = now() WHERE id = ` + id(w.invoicePay1)},
			rule: "payment_status", ids: []uuid.UUID{w.invoicePay1},
		},
		{
			name: "failed without failed_at",
			corrupt: []string{`ALTER TABLE payments DROP CONSTRAINT payments_failed_at_check`,
				`UPDATE payments SET failed_at = NULL WHERE id = ` + id(w.failedPay)},
			rule: "payment_status", ids: []uuid.UUID{w.failedPay},
		},
		{
			name: "a gateway payment refunded to the balance without a ledger row",
			corrupt: []string{`INSERT INTO refunds (payment_id, amount, status, destination) VALUES (` + id(w.capturedPay) + `, 5.00, 'succeeded', 'balance')`,
				`UPDATE payments SET refunded_amount = 25.00 WHERE id = ` + id(w.capturedPay)},
			rule: "balance_refund", ids: []uuid.UUID{w.capturedPay},
		},
		{
			name:    "a balance payment refunded through a gateway",
			corrupt: []string{`INSERT INTO refunds (payment_id, amount, status) VALUES (` + id(w.balancePay) + `, 5.00, 'failed')`},
			rule:    "balance_refund", ids: []uuid.UUID{w.balancePay},
		},
		{
			name:    "two order_paid events for one order",
			corrupt: []string{`INSERT INTO events (event_type, order_id, payload) SELECT event_type, order_id, payload FROM events WHERE event_type = 'order_paid' AND order_id = ` + id(w.active)},
			rule:    "order_paid_twice", ids: []uuid.UUID{w.active},
		},
		{
			name:    "a paid order without order_paid",
			corrupt: []string{`DELETE FROM events WHERE order_id = ` + id(w.balancePaid)},
			rule:    "order_paid_missing", ids: []uuid.UUID{w.balancePaid},
		},
		{
			name:    "a settled payment of an order never marked paid",
			corrupt: []string{`UPDATE payments SET status = 'success', paid_at = now() WHERE id = ` + id(w.pendingPay)},
			rule:    "order_paid_missing", ids: []uuid.UUID{w.unpaid, w.pendingPay},
		},
		{
			name:    "order_paid for an order never paid",
			corrupt: []string{`INSERT INTO events (event_type, order_id, payload) VALUES ('order_paid', ` + id(w.unpaid) + `, '{}')`},
			rule:    "order_paid_unexpected", ids: []uuid.UUID{w.unpaid},
		},
		{
			name:    "order_paid with another amount than its payment",
			corrupt: []string{`UPDATE events SET payload = jsonb_set(payload, '{amount}', '"99.00"') WHERE event_type = 'order_paid' AND order_id = ` + id(w.active)},
			rule:    "order_paid_payment", ids: []uuid.UUID{w.active},
		},
		{
			name:    "a paid order without a settled payment",
			corrupt: []string{`UPDATE orders SET status = 'paid', paid_at = now() WHERE id = ` + id(w.unpaid)},
			rule:    "order_unpaid", ids: []uuid.UUID{w.unpaid},
		},
		{
			name:    "two settled payments of one order",
			corrupt: []string{`UPDATE payments SET status = 'success', paid_at = now(), amount = 12.30, order_id = ` + id(w.active) + ` WHERE id = ` + id(w.pendingPay)},
			rule:    "order_paid_twice", ids: []uuid.UUID{w.active, w.gatewayPay, w.pendingPay},
		},
		{
			name:    "a payment for another amount than its order",
			corrupt: []string{`UPDATE payments SET amount = 50.01 WHERE id = ` + id(w.pendingPay)},
			rule:    "order_payment_amount", ids: []uuid.UUID{w.unpaid, w.pendingPay},
		},
		{
			name:    "invoice paid_amount is not the sum of its payments",
			corrupt: []string{`UPDATE invoices SET paid_amount = 10.00 WHERE id = ` + id(w.looseInvoice)},
			rule:    "invoice_paid_amount", ids: []uuid.UUID{w.looseInvoice},
		},
		{
			name: "a balance transaction that does not start where the last ended",
			corrupt: []string{`INSERT INTO balance_transactions (customer_id, type, amount, balance_before, balance_after, created_at)
				VALUES (` + id(w.customer) + `, 'manual_adjust', 5.00, 70.00, 75.00, clock_timestamp())`,
				`UPDATE customers SET balance = 75.00 WHERE id = ` + id(w.customer)},
			rule: "balance_chain", ids: []uuid.UUID{w.customer},
		},
		{
			name:    "a balance that is not where the ledger ends",
			corrupt: []string{`UPDATE customers SET balance = 80.01 WHERE id = ` + id(w.customer)},
			rule:    "balance_chain", ids: []uuid.UUID{w.customer},
		},
		{
			name: "balance_after is not balance_before + amount",
			corrupt: []string{`ALTER TABLE balance_transactions DROP CONSTRAINT balance_transactions_balance_after_check`,
				`INSERT INTO balance_transactions (customer_id, type, amount, balance_before, balance_after, created_at)
				VALUES (` + id(w.customer) + `, 'manual_adjust', 5.00, 80.00, 86.00, clock_timestamp())`,
				`UPDATE customers SET balance = 86.00 WHERE id = ` + id(w.customer)},
			rule: "balance_arithmetic", ids: []uuid.UUID{w.customer},
		},
		{
			name: "a balance payment charged twice",
			corrupt: []string{`DROP INDEX balance_transactions_payment_id_key`,
				`INSERT INTO balance_transactions (customer_id, type, amount, balance_before, balance_after, payment_id, created_at)
				VALUES (` + id(w.customer) + `, 'payment', -30.00, 80.00, 50.00, ` + id(w.balancePay) + `, clock_timestamp())`,
				`UPDATE customers SET balance = 50.00 WHERE id = ` + id(w.customer)},
			rule: "balance_payment", ids: []uuid.UUID{w.balancePay},
		},
		{
			name: "a refund credited for another amount",
			corrupt: []string{`ALTER TABLE balance_transactions DISABLE TRIGGER balance_transactions_append_only`,
				`UPDATE balance_transactions SET amount = 11.00, balance_after = 81.00 WHERE type = 'refund'`,
				`UPDATE customers SET balance = 81.00 WHERE id = ` + id(w.customer)},
			rule: "balance_refund",
		},
		{
			name:    "a processing event past its claim that a leader has let be",
			corrupt: stuckUnderALeader(w.zero),
			rule:    "event_stuck", ids: []uuid.UUID{w.zero},
		},
		{
			name:    "an order provisioned twice",
			corrupt: []string{`INSERT INTO events (event_type, order_id, status) VALUES ('order_provisioned', ` + id(w.active) + `, 'done')`},
			rule:    "order_provisioned_twice", ids: []uuid.UUID{w.active},
		},
		{
			name: "a negative balance below the credit limit",
			corrupt: []string{`ALTER TABLE customers DROP CONSTRAINT customers_balance_check`,
				`INSERT INTO balance_transactions (customer_id, type, amount, balance_before, balance_after, created_at)
				VALUES (` + id(w.customer) + `, 'manual_adjust', -80.01, 80.00, -0.01, clock_timestamp())`,
				`UPDATE customers SET balance = -0.01 WHERE id = ` + id(w.customer)},
			rule: "negative_amount", ids: []uuid.UUID{w.customer},
		},
		{
			name: "an amount with three decimals",
			corrupt: []string{`ALTER TABLE products ALTER COLUMN price TYPE numeric`,
				`UPDATE products SET price = 12.305 WHERE id = ` + id(w.product)},
			rule: "money_scale", ids: []uuid.UUID{w.product},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := w.broken(t, tc.corrupt...)
			require.False(t, r.OK())
			var found bool
			for _, v := range r.Violations {
				if v.Rule != tc.rule {
					continue
				}
				all := true
				for _, want := range tc.ids {
					all = all && slices.Contains(v.IDs, want.String())
				}
				found = found || all
			}
			require.True(t, found, "want %s naming %v, got:\n%s", tc.rule, tc.ids, r)
			require.Contains(t, r.String(), tc.rule)
		})
	}
}

// stuckUnderALeader leaves order's processing event past its claim for two
// minutes, under an event worker's leader elected two minutes ago that
// still holds the role.
func stuckUnderALeader(order uuid.UUID) []string {
	return []string{
		`UPDATE events SET locked_until = now() - interval '2 minutes' WHERE order_id = '` + order.String() + `'`,
		`INSERT INTO leader_leases (role, holder, elected_at, expires_at)
		 VALUES ('event_worker', 'node-b', now() - interval '2 minutes', now() + interval '15 seconds')`,
	}
}

// A processing event past its claim is stuck only when a leader of the
// event worker's role could have reclaimed it for a minute and has not;
// otherwise it waits for the next leader, counted but not a violation. A
// restored dump of a busy database holds such events, and verifying it
// after the claim ran out must not call it broken.
func TestAnEventPastItsClaimIsStuckOnlyWhenALeaderLetsItBe(t *testing.T) {
	t.Parallel()
	w := setup(t)
	zero := w.zero.String()
	stuck := stuckUnderALeader(w.zero)
	waiting := []struct {
		name    string
		corrupt []string
	}{
		{"no leader holds the role", stuck[:1]},
		{"the leader's lease ran out", []string{stuck[0],
			`INSERT INTO leader_leases (role, holder, elected_at, expires_at)
			 VALUES ('event_worker', 'node-b', now() - interval '10 minutes', now() - interval '1 second')`}},
		{"the leader was elected under a minute ago", []string{stuck[0],
			`INSERT INTO leader_leases (role, holder, elected_at, expires_at)
			 VALUES ('event_worker', 'node-b', now() - interval '30 seconds', now() + interval '15 seconds')`}},
		{"the claim ran out under a minute ago", []string{stuck[1],
			`UPDATE events SET locked_until = now() - interval '30 seconds' WHERE order_id = '` + zero + `'`}},
		{"another role's leader holds its lease", []string{stuck[0],
			`INSERT INTO leader_leases (role, holder, elected_at, expires_at)
			 VALUES ('billing', 'node-b', now() - interval '10 minutes', now() + interval '15 seconds')`}},
	}
	for _, tc := range waiting {
		t.Run(tc.name, func(t *testing.T) {
			r := w.broken(t, tc.corrupt...)
			require.True(t, r.OK(), "%s", r)
			require.EqualValues(t, 1, r.Totals.EventsPastClaim)
			require.Contains(t, r.String(), "1 processing event(s) past their claim, waiting for the event worker's leader")
		})
	}
	t.Run("a leader let it be for a minute", func(t *testing.T) {
		r := w.broken(t, stuck...)
		require.Equal(t, map[string]int{"event_stuck": 1}, r.Rules(), "%s", r)
		require.Equal(t, []string{w.zero.String(), r.Violations[0].IDs[1]}, r.Violations[0].IDs)
		require.EqualValues(t, 1, r.Totals.EventsPastClaim)
	})
	t.Run("a claim that has not run out", func(t *testing.T) {
		r := w.broken(t, stuck[1])
		require.True(t, r.OK(), "%s", r)
		require.Zero(t, r.Totals.EventsPastClaim)
		require.NotContains(t, r.String(), "past their claim")
	})
}

func TestVerifyReadsOneSnapshotAndWritesNothing(t *testing.T) {
	t.Parallel()
	w := setup(t)
	ctx := context.Background()
	// A concurrent writer cannot tear the report: the checks share one
	// REPEATABLE READ snapshot, and the transaction is READ ONLY.
	var before, after int64
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&before))
	r, err := ledger.Verify(ctx, w.pool)
	require.NoError(t, err)
	require.True(t, r.OK(), "%s", r)
	require.NoError(t, w.pool.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&after))
	require.Equal(t, before, after)

	conn, err := w.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = ledger.Verify(ctx, conn.Conn())
	require.NoError(t, err)
	var iso string
	require.NoError(t, conn.QueryRow(ctx, `SHOW transaction_isolation`).Scan(&iso))
	require.Equal(t, "read committed", iso, "the snapshot setting ends with Verify's transaction")
}

func TestVerifyFailsWhenTheDatabaseCannotAnswer(t *testing.T) {
	t.Parallel()
	w := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ledger.Verify(ctx, w.pool)
	require.Error(t, err)
}
