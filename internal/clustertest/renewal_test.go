package clustertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// seedDueServices makes n monthly services of n customers, each active
// with its paid period ending within the hour, so that the billing run owes
// each a renewal invoice; the even ones' customers have a balance that
// covers it (credited through the ledger, as an admin's adjustment is).
func seedDueServices(t *testing.T, b *bundle, n int) {
	t.Helper()
	ctx := context.Background()
	_, err := b.c.Pool.Exec(ctx, `
WITH c AS (
    INSERT INTO customers (email, password_hash, currency, balance)
    SELECT 'renewal' || i || '@example.com', 'x', 'CNY', CASE WHEN i % 2 = 0 THEN 25.00 ELSE 0 END
    FROM generate_series(1, $1) AS i
    RETURNING id, balance
), bt AS (
    INSERT INTO balance_transactions (customer_id, type, amount, balance_before, balance_after, description)
    SELECT id, 'manual_adjust', balance, 0, balance, 'seed' FROM c WHERE balance > 0
), o AS (
    INSERT INTO orders (customer_id, total_amount, currency, status, billing_cycle, renewal_price, description, paid_until)
    SELECT id, 0, 'CNY', 'active', 'monthly', 10.00, 'VPS', now() + interval '1 hour' FROM c
    RETURNING id, paid_until
)
INSERT INTO service_periods (order_id, seq, starts_at, ends_at, anchor_at, anchor_months, status, paid_at)
SELECT id, 1, paid_until - interval '1 month', paid_until, paid_until - interval '1 month', 1, 'paid', paid_until - interval '1 month'
FROM o`, n)
	require.NoError(t, err)
}

// 1,000 services fall due at once and the billing leader is killed with
// SIGKILL in the middle of its run. The other instance takes the role over
// and finishes: every invoice exists exactly once, every covered one was
// paid from the balance exactly once (one payment, one ledger row), and
// the ledger is clean.
func TestABillingLeaderKilledMidRunIssuesAndChargesEachRenewalOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, 2, testdb.URL(t), "PAYMENTD_BILLING__RUN_INTERVAL=1s")
	ctx := context.Background()
	const services = 1000
	leader, err := b.c.WaitLeader(ctx, "billing", nil)
	require.NoError(t, err)
	seedDueServices(t, b, services)
	// count runs a count(*) query; t may be an EventuallyWithT
	// condition's collector.
	count := func(t testkit.T, sql string) int {
		var n int
		require.NoError(t, b.c.Pool.QueryRow(ctx, sql).Scan(&n))
		return n
	}
	// Kill the leader once it has issued part of the run.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.GreaterOrEqual(c, count(c, `SELECT count(*) FROM invoices`), 100)
	}, 60*time.Second, 5*time.Millisecond)
	killedAt, err := leader.Kill()
	require.NoError(t, err)
	atKill := count(t, `SELECT count(*) FROM invoices`)
	t.Logf("billing leader %s killed after issuing %d of %d invoices", leader.Name, atKill, services)
	require.Less(t, atKill, services, "killed in the middle of the run")

	next, err := b.c.WaitLeader(ctx, "billing", leader)
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, services, count(c, `SELECT count(*) FROM service_periods WHERE seq = 2`))
	}, 90*time.Second, 50*time.Millisecond)
	t.Logf("%s took over and finished the run %s after the kill", next.Name, time.Since(killedAt).Round(time.Millisecond))

	require.Equal(t, services, count(t, `SELECT count(*) FROM invoices`), "one invoice per service")
	require.Zero(t, count(t, `SELECT count(*) FROM (SELECT order_id FROM invoices GROUP BY order_id HAVING count(*) > 1) d`), "no order has two")
	require.Equal(t, services/2, count(t, `SELECT count(*) FROM payments WHERE method = 'balance' AND status = 'success'`), "each covered renewal paid once")
	require.Equal(t, services/2, count(t, `SELECT count(*) FROM invoices WHERE status = 'paid'`))
	require.Equal(t, services/2, count(t, `SELECT count(*) FROM balance_transactions WHERE type = 'payment'`), "one ledger row each")
	require.Equal(t, services/2, count(t, `SELECT count(*) FROM customers WHERE email LIKE 'renewal%' AND balance = 15.00`))
	require.NoError(t, b.c.CheckLeadership("billing"))
	rep, err := ledger.Verify(ctx, b.c.Pool)
	require.NoError(t, err)
	require.True(t, rep.OK(), rep.String())
}
