package harness

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rustbill/paymentd/internal/ledger"
)

// checkInvariants checks, after the run, that the service moved money
// exactly as many times as it said it did: every successful payment paid
// one order and queued one order_paid, nothing twice, every balance change
// in the ledger, and every request the load generator counted as a success
// left its row. internal/ledger.Verify adds the full money model.
func (b *bench) checkInvariants(ctx context.Context) {
	db := b.pool
	check := func(name string, ok bool, format string, args ...any) {
		b.rep.Checks = append(b.rep.Checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}
	var payments, paidOrders, orderPaid int64
	err := db.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM payments WHERE status IN ('success', 'refunded')),
		       (SELECT count(*) FROM orders WHERE paid_at IS NOT NULL),
		       (SELECT count(*) FROM events WHERE event_type = 'order_paid')`).Scan(&payments, &paidOrders, &orderPaid)
	if err != nil {
		check("successful payments = paid orders = order_paid events", false, "query: %v", err)
	} else {
		check("successful payments = paid orders = order_paid events", payments == paidOrders && paidOrders == orderPaid,
			"%d successful payments, %d paid orders, %d order_paid events", payments, paidOrders, orderPaid)
	}

	dupes := func(name, sql string) {
		var n int64
		if err := db.QueryRow(ctx, sql).Scan(&n); err != nil {
			check(name, false, "query: %v", err)
			return
		}
		check(name, n == 0, "%d found", n)
	}
	dupes("no order paid twice", `
		SELECT count(*) FROM (SELECT order_id FROM payments WHERE status IN ('success', 'refunded') AND order_id IS NOT NULL
		                      GROUP BY order_id HAVING count(*) > 1) d`)
	dupes("no order with two order_paid events", `
		SELECT count(*) FROM (SELECT order_id FROM events WHERE event_type = 'order_paid' GROUP BY order_id HAVING count(*) > 1) d`)
	dupes("no gateway payment id settled twice", `
		SELECT count(*) FROM (SELECT gateway_interface_id, gateway_payment_id FROM payments WHERE gateway_payment_id <> ''
		                      GROUP BY 1, 2 HAVING count(*) > 1) d`)
	dupes("every balance transaction consistent (balance_after = balance_before + amount)", `
		SELECT count(*) FROM balance_transactions WHERE balance_after <> balance_before + amount`)
	dupes("customers' balances = sum of their ledger", `
		SELECT count(*) FROM customers c
		LEFT JOIN (SELECT customer_id, sum(amount) AS total FROM balance_transactions GROUP BY customer_id) l ON l.customer_id = c.id
		WHERE c.balance <> coalesce(l.total, 0)`)
	dupes("every balance payment has exactly one ledger row of minus its amount", `
		SELECT count(*) FROM payments p
		LEFT JOIN balance_transactions t ON t.payment_id = p.id AND t.type = 'payment'
		WHERE p.method = 'balance' AND (t.id IS NULL OR t.amount <> -p.amount)`)
	dupes("no event failed, none left queued", `
		SELECT count(*) FROM events WHERE status <> 'done'`)
	dupes("every paid order is active (provisioned through the fake provider)", `
		SELECT count(*) FROM orders WHERE paid_at IS NOT NULL AND status <> 'active'`)

	// What the load generator counted as answered OK is in the database.
	countIn := func(rs []Range, kind int, where string) int64 {
		var total int64
		for _, r := range rs {
			if r.N == 0 {
				continue
			}
			var n int64
			err := db.QueryRow(ctx, `SELECT count(*) FROM payments WHERE `+where+` AND `+
				`order_id BETWEEN $1 AND $2`, BenchID(kind, r.From), BenchID(kind, r.From+r.N-1)).Scan(&n)
			if err != nil {
				return -1
			}
			total += n
		}
		return total
	}
	n := countIn(b.callbackRanges, kindOrder, "status = 'success' AND method = 'gateway'")
	check("callbacks answered OK = payments they settled", n == int64(b.okCallbacks), "%d OK answers, %d settled payments", b.okCallbacks, n)
	n = countIn(b.balanceRanges, kindOrder, "status = 'success' AND method = 'balance'")
	check("PayWithBalance answered OK = balance payments", n == int64(b.okBalance), "%d OK answers, %d balance payments", b.okBalance, n)
	n = countIn(b.createRanges, kindOrder, "status = 'pending' AND method = 'gateway'")
	check("CreatePayment answered OK = pending payments created", n == int64(b.okCreate), "%d OK answers, %d pending payments", b.okCreate, n)

	b.ledgerVerify(ctx, db, check)
}

// ledgerVerify runs internal/ledger's model of the money (every rule of
// sql/queries/ledger.sql in one snapshot).
func (b *bench) ledgerVerify(ctx context.Context, db *pgxpool.Pool, check func(string, bool, string, ...any)) {
	rep, err := ledger.Verify(ctx, db)
	if err != nil {
		check("internal/ledger.Verify", false, "%v", err)
		return
	}
	detail := fmt.Sprintf("clean: %d payments (%d settled), %d orders, %d balance transactions, %d events, checked in %s",
		rep.Totals.Payments, rep.Totals.SettledPayments, rep.Totals.Orders, rep.Totals.BalanceTransactions, rep.Totals.Events,
		rep.Took.Round(time.Millisecond))
	if !rep.OK() {
		var parts []string
		for rule, n := range rep.Rules() {
			parts = append(parts, fmt.Sprintf("%s: %d", rule, n))
		}
		detail = strings.Join(parts, ", ")
	}
	check("internal/ledger.Verify", rep.OK(), "%s", detail)
}
