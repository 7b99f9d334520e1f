package harness

import (
	"fmt"
	"strings"
)

// The ceilings' pgbench scripts. pgbench runs them with prepared
// statements (-M prepared), as pgx runs the service's, 8 clients.
//
// callbackScript is the SQL paymentd sends for one HandleCallback that
// settles a pending payment of an order (internal/payment.settle, the
// queries of sql/queries/payment_flow.sql, payments.sql, orders.sql,
// audit_log.sql and events.sql), statement for statement and round trip for
// round trip — three, each a pipeline (\startpipeline) where settle sends
// a batch (store.WithPipelinedTx): BEGIN with the order, invoice and
// payment locked and the gateway id checked free (store.LockForSettlement);
// the conditional update with the order paid and the order's other pending
// payments failed (order.Transition); the audit rows and order_paid with
// COMMIT. (The gateway interface is not read: the registry keeps it for a
// second.) `SELECT *` and `RETURNING *` stand for sqlc's column lists (the
// same columns). Each client settles its own pending payments: row n =
// base + client_id + (k − 1)·nclients, the k-th transaction of the client.
// Keep it in step with settle: a change of the callback's SQL is a change
// of its ceiling (docs/performance.md). The event is inserted as paymentd
// inserts it (store.AppendEvent): without the trigger's NOTIFY, whose lock
// would serialise the ceiling's commits; the NOTIFY paymentd then sends
// after the commit (cluster.Wakeup, several commits as one) is paymentd's
// cost, not the ceiling's.
var callbackScript = callbackSQL(false)

// pipelinedCallbackScript is callbackScript in two round trips instead of
// three: the locks, then every write with COMMIT. It is not what paymentd
// sends (the audit rows are made of the rows the writes return): it is
// what the callback would cost the database if it did (--extra-ceilings;
// docs/performance.md).
var pipelinedCallbackScript = callbackSQL(true)

func callbackSQL(twoTrips bool) string {
	// After the writes: the end of a round trip, or none.
	cut := "\\endpipeline\n\\startpipeline\n"
	if twoTrips {
		cut = ""
	}
	return strings.NewReplacer(
		"{oid}", sqlID(kindOrder, ":n::bigint"),
		"{pid}", sqlID(kindPayment, ":n::bigint"),
		"{cut}\n", cut,
	).Replace(`
\set k :k + 1
\set n :base + :client_id + (:k - 1) * :nclients
\startpipeline
BEGIN;
SELECT * FROM orders WHERE id = (SELECT order_id FROM payments WHERE payments.id = {pid}) FOR UPDATE;
SELECT * FROM invoices WHERE id = (SELECT invoice_id FROM payments WHERE payments.id = {pid}) FOR UPDATE;
SELECT * FROM payments WHERE id = {pid} FOR UPDATE;
SELECT id FROM payments WHERE gateway_interface_id = :gw::uuid AND gateway_payment_id = 'PGB' || :n AND gateway_payment_id <> '' AND id <> {pid} LIMIT 1;
\endpipeline
\startpipeline
UPDATE payments SET status = 'success', gateway_payment_id = 'PGB' || :n, gateway_tx_id = 'PGB' || :n, paid_at = now(), next_reconcile_at = NULL, updated_at = now() WHERE id = {pid} AND status = 'pending' RETURNING *;
UPDATE orders SET status = 'paid', paid_at = coalesce(now(), paid_at), updated_at = now() WHERE id = {oid} AND status = 'pending' RETURNING *;
UPDATE payments SET status = 'failed', failure_reason = 'order paid by payment ' || {pid}::text, next_reconcile_at = NULL, updated_at = now() WHERE order_id = {oid} AND invoice_id IS NULL AND status = 'pending' RETURNING *;
{cut}
INSERT INTO audit_log (actor_kind, actor_id, action, entity_type, entity_id, before, after, request_id, created_at) VALUES ('gateway', :gw, 'order.paid', 'order', {oid}::text, :orderbefore, :orderafter, :reqid, now());
INSERT INTO events (event_type, payload, order_id) SELECT 'order_paid', jsonb_build_object('amount', '12.30', 'method', 'gateway', 'currency', 'CNY', 'order_id', {oid}, 'payment_id', {pid}), {oid} FROM (SELECT set_config('paymentd.wake_after_commit', 'on', true)) AS w;
INSERT INTO audit_log (actor_kind, actor_id, action, entity_type, entity_id, before, after, request_id, created_at) VALUES ('gateway', :gw, 'payment.success', 'payment', {pid}::text, :paybefore, :payafter, :reqid, now());
END;
\endpipeline
`)
}

// callbackVars are the script's constants: the interface, and audit rows
// of the size the service writes.
func callbackVars(w *World, base int64) map[string]string {
	const (
		id = "20000000-0000-4000-8000-000000000001"
		o  = "10000000-0000-4000-8000-000000000001"
		c  = "30000000-0000-4000-8000-000000000001"
	)
	gw := w.GatewayID.String()
	pay := fmt.Sprintf(`{"id": %q, "amount": "12.30", "method": "gateway", "status": "pending", "currency": "CNY", "order_id": %q, "customer_id": %q, "refunded_amount": "0.00", "gateway_interface_id": %q}`, id, o, c, gw)
	return map[string]string{
		"k": "0", "base": fmt.Sprint(base), "nclients": fmt.Sprint(ceilingClients), "gw": gw,
		"reqid":     "69e07f8c0c535cabc4eac5f701c03599",
		"paybefore": pay,
		"payafter": fmt.Sprintf(`{"id": %q, "amount": "12.30", "method": "gateway", "source": "callback", "status": "success", "paid_at": "2026-11-22T03:37:25.813212Z", "currency": "CNY", "order_id": %q, "customer_id": %q, "gateway_tx_id": "PGB1", "refunded_amount": "0.00", "gateway_payment_id": "PGB1", "gateway_interface_id": %q}`,
			id, o, c, gw),
		"orderbefore": fmt.Sprintf(`{"id": %q, "status": "pending", "currency": "CNY", "customer_id": %q, "total_amount": "12.30"}`, o, c),
		"orderafter":  fmt.Sprintf(`{"id": %q, "status": "paid", "paid_at": "2026-11-22T03:37:25.813212Z", "currency": "CNY", "customer_id": %q, "total_amount": "12.30"}`, o, c),
	}
}

// readScript is GetPayment's one statement, a point read by primary key,
// of the payments the GetPayment workload reads.
var readScript = `
\set n random(:from, :to)
SELECT * FROM payments WHERE id = ` + sqlID(kindPayment, ":n::bigint") + `;
`

// minimalScript is pgbench-minimal: the smallest correct settlement a
// payment engineer would write by hand on the same tables and indexes, a
// yardstick that does not move with the service's SQL (issue 20). BEGIN;
// the payment locked by id (its order, amount and currency read from the
// locked row, \gset); the conditional update pending → success with the
// gateway ids (payments_gateway_payment_id_key refuses an id settled
// before), the reconciler's schedule cleared; the order pending → paid;
// order_paid queued with the service's payload ({amount, method, currency,
// order_id, payment_id}, as settle writes it); COMMIT. No audit rows, no
// read outside the transaction, no separate duplicate check, no sweep of
// the order's other pending payments (the seeded orders have none). Each
// client consumes its own seeded pending payments once, as callbackScript
// does: row n = base + client_id + (k − 1)·nclients.
var minimalScript = strings.NewReplacer(
	"{pid}", sqlID(kindPayment, ":n::bigint"),
).Replace(`
\set k :k + 1
\set n :base + :client_id + (:k - 1) * :nclients
BEGIN;
SELECT id, order_id, amount, currency FROM payments WHERE id = {pid} FOR UPDATE \gset p_
UPDATE payments SET status = 'success', gateway_payment_id = 'PGM' || :n, gateway_tx_id = 'PGM' || :n, paid_at = now(), next_reconcile_at = NULL, updated_at = now() WHERE id = :p_id AND status = 'pending';
UPDATE orders SET status = 'paid', paid_at = now(), updated_at = now() WHERE id = :p_order_id AND status = 'pending';
INSERT INTO events (event_type, payload, order_id) SELECT 'order_paid', jsonb_build_object('amount', :p_amount::text, 'method', 'gateway', 'currency', :p_currency::text, 'order_id', :p_order_id::uuid, 'payment_id', :p_id::uuid), :p_order_id FROM (SELECT set_config('paymentd.wake_after_commit', 'on', true)) AS w;
END;
`)

// minimalVars are minimalScript's constants.
func minimalVars(base int64) map[string]string {
	return map[string]string{"k": "0", "base": fmt.Sprint(base), "nclients": fmt.Sprint(ceilingClients)}
}
