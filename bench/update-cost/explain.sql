-- EXPLAIN of each query that uses an index of payments, orders, events or
-- audit_log, with literal parameters (the custom plan a prepared statement
-- gets), on run.sh's database after explain-seed.sql. Writes run inside a
-- rolled-back transaction.
\set pay '''20000000-0000-4000-8000-00000003a97f'''
\set ord '''30000000-0000-4000-8000-00000003a97f'''
\set cust '''40000000-0000-4000-8000-0000000001f4'''
\set gw '''10000000-0000-4000-8000-000000000001'''
\pset pager off
\echo == GetPaymentForUpdate
EXPLAIN (COSTS OFF) SELECT * FROM payments WHERE id = :pay FOR UPDATE;
\echo == MarkPaymentSucceeded
EXPLAIN (COSTS OFF) UPDATE payments SET status = 'success', gateway_payment_id = 'X', gateway_tx_id = 'X', paid_at = now(), next_reconcile_at = NULL, updated_at = now() WHERE id = :pay AND status = 'pending' RETURNING *;
\echo == PaymentWithGatewayID
EXPLAIN (COSTS OFF) SELECT id FROM payments WHERE gateway_interface_id = :gw AND gateway_payment_id = 'H17' AND gateway_payment_id <> '' AND id <> :pay LIMIT 1;
\echo == GetPendingGatewayPayment
EXPLAIN (COSTS OFF) SELECT * FROM payments WHERE order_id IS NOT DISTINCT FROM :ord::uuid AND invoice_id IS NOT DISTINCT FROM NULL::uuid AND (order_id = :ord OR invoice_id = NULL) AND gateway_interface_id = :gw AND status = 'pending';
\echo == CountPendingPayments
EXPLAIN (COSTS OFF) SELECT count(*) FROM payments WHERE status = 'pending';
\echo == FailPendingPayments (a payment)
EXPLAIN (COSTS OFF) UPDATE payments SET status = 'failed', failure_reason = 'x', failed_at = now(), updated_at = now() WHERE status = 'pending' AND (id = :pay::uuid OR order_id = NULL::uuid OR invoice_id = NULL::uuid) AND (:pay::uuid IS NULL OR id = :pay) AND (NULL::uuid IS NULL OR order_id = NULL) AND (NULL::uuid IS NULL OR invoice_id = NULL) AND (NOT false OR invoice_id IS NULL) RETURNING *;
\echo == FailPendingPayments (an order, order_only)
EXPLAIN (COSTS OFF) UPDATE payments SET status = 'failed', failure_reason = 'x', failed_at = now(), updated_at = now() WHERE status = 'pending' AND (id = NULL::uuid OR order_id = :ord::uuid OR invoice_id = NULL::uuid) AND (NULL::uuid IS NULL OR id = NULL) AND (:ord::uuid IS NULL OR order_id = :ord) AND (NULL::uuid IS NULL OR invoice_id = NULL) AND (NOT true OR invoice_id IS NULL) RETURNING *;
\echo == FailPendingPayments (an order)
EXPLAIN (COSTS OFF) UPDATE payments SET status = 'failed', failure_reason = 'x', failed_at = now(), updated_at = now() WHERE status = 'pending' AND (id = NULL::uuid OR order_id = :ord::uuid OR invoice_id = NULL::uuid) AND (NULL::uuid IS NULL OR id = NULL) AND (:ord::uuid IS NULL OR order_id = :ord) AND (NULL::uuid IS NULL OR invoice_id = NULL) AND (NOT false OR invoice_id IS NULL) RETURNING *;
\echo == FailPendingPayments (an invoice)
EXPLAIN (COSTS OFF) UPDATE payments SET status = 'failed', failure_reason = 'x', failed_at = now(), updated_at = now() WHERE status = 'pending' AND (id = NULL::uuid OR order_id = NULL::uuid OR invoice_id = :ord::uuid) AND (NULL::uuid IS NULL OR id = NULL) AND (NULL::uuid IS NULL OR order_id = NULL) AND (:ord::uuid IS NULL OR invoice_id = :ord) AND (NOT false OR invoice_id IS NULL) RETURNING *;
\echo == FailPendingPayments (an order, order_only, the generic plan: the same for every call)
BEGIN;
SET LOCAL plan_cache_mode = force_generic_plan;
PREPARE fail_pending AS UPDATE payments SET status = 'failed', failure_reason = $1, failed_at = $2::timestamptz, next_reconcile_at = CASE WHEN method = 'gateway' THEN $2::timestamptz END, reconcile_attempts = 0, updated_at = $2 WHERE status = 'pending' AND (id = $3::uuid OR order_id = $4::uuid OR invoice_id = $5::uuid) AND ($3::uuid IS NULL OR id = $3) AND ($4::uuid IS NULL OR order_id = $4) AND ($5::uuid IS NULL OR invoice_id = $5) AND (NOT $6::boolean OR invoice_id IS NULL) RETURNING *;
EXPLAIN (COSTS OFF) EXECUTE fail_pending('x', now(), NULL, :ord, NULL, true);
ROLLBACK;
DEALLOCATE fail_pending;
\echo == ListPayments (admin, no filter)
EXPLAIN (COSTS OFF) SELECT * FROM payments ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0;
\echo == ListPayments (customer)
EXPLAIN (COSTS OFF) SELECT * FROM payments WHERE customer_id = :cust ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0;
\echo == CountPayments (customer)
EXPLAIN (COSTS OFF) SELECT count(*) FROM payments WHERE customer_id = :cust;
\echo == ListPayments (order)
EXPLAIN (COSTS OFF) SELECT * FROM payments WHERE order_id = :ord ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0;
\echo == ListPayments (invoice)
EXPLAIN (COSTS OFF) SELECT * FROM payments WHERE invoice_id = :ord ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0;
\echo == ListPayments (gateway interface)
EXPLAIN (COSTS OFF) SELECT * FROM payments WHERE gateway_interface_id = :gw ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0;
\echo == ListPayments (to_return)
EXPLAIN (COSTS OFF) SELECT * FROM payments WHERE captured_amount > refunded_amount ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0;
\echo == MoneyToReturn
EXPLAIN (COSTS OFF) SELECT currency, count(*), sum(captured_amount) - sum(refunded_amount), min(captured_at) FROM payments WHERE captured_amount > refunded_amount GROUP BY currency ORDER BY currency;
\echo == PaymentStatsSince
EXPLAIN (COSTS OFF) SELECT status, currency, count(*), sum(amount), sum(refunded_amount) FROM payments WHERE created_at >= now() - interval '1 day' GROUP BY status, currency ORDER BY status, currency;
\echo == ClaimDuePayments (the due range)
EXPLAIN (COSTS OFF) SELECT id FROM payments WHERE next_reconcile_at <= now() + interval '1 hour' AND method = 'gateway' AND status IN ('pending', 'failed') ORDER BY next_reconcile_at, id LIMIT 100 FOR UPDATE SKIP LOCKED;
\echo == ExportPayments
EXPLAIN (COSTS OFF) SELECT id FROM payments WHERE created_at >= now() - interval '7 days' AND created_at < now() ORDER BY created_at, id;
\echo == trends: paid stream
EXPLAIN (COSTS OFF) SELECT date_trunc('day', paid_at), currency, count(*), sum(amount) FROM payments WHERE paid_at >= now() - interval '7 days' AND paid_at < now() GROUP BY 1, 2;
\echo == trends: failed stream
EXPLAIN (COSTS OFF) SELECT date_trunc('day', failed_at), currency, count(*) FROM payments WHERE failed_at >= now() - interval '7 days' AND failed_at < now() GROUP BY 1, 2;
\echo == GetOrderForUpdate
EXPLAIN (COSTS OFF) SELECT * FROM orders WHERE id = :ord FOR UPDATE;
\echo == SetOrderStatus
EXPLAIN (COSTS OFF) UPDATE orders SET status = 'paid', paid_at = coalesce(now(), paid_at), updated_at = now() WHERE id = :ord AND status = 'pending' RETURNING *;
\echo == ListOrders (admin)
EXPLAIN (COSTS OFF) SELECT * FROM orders ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0;
\echo == ListOrders (customer)
EXPLAIN (COSTS OFF) SELECT * FROM orders WHERE customer_id = :cust ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0;
\echo == ListPendingOrdersCreatedBefore
EXPLAIN (COSTS OFF) SELECT id FROM orders WHERE status = 'pending' AND paid_at IS NULL AND cancelled_at IS NULL AND created_at < now() - interval '24 hours' ORDER BY created_at, id LIMIT 100;
\echo == InsertGatewayPayment: the foreign key check of payments_order_fkey (the statement the RI trigger runs)
EXPLAIN (COSTS OFF) SELECT 1 FROM ONLY orders x WHERE id = :ord AND customer_id = :cust AND currency = 'CNY' FOR KEY SHARE OF x;
\echo == GetEvent
EXPLAIN (COSTS OFF) SELECT * FROM events WHERE id = '00000000-0000-4000-8000-000000000000';
\echo == ClaimEvents (its due range and the per-order probe; sort off as store.ClaimEvents runs it)
SET enable_sort = off;
EXPLAIN (COSTS OFF) SELECT e.id FROM events AS e WHERE e.status = 'pending' AND e.run_at <= now() AND e.order_id <> ALL ('{}'::uuid[])
  AND NOT EXISTS (SELECT 1 FROM events AS o WHERE o.order_id = e.order_id AND o.id <> e.id AND (o.status = 'processing' OR (o.status = 'pending' AND (o.created_at, o.id) < (e.created_at, e.id))) OFFSET 0)
  ORDER BY e.run_at, e.created_at LIMIT 8 FOR UPDATE OF e SKIP LOCKED;
RESET enable_sort;
\echo == ReclaimExpiredEvents
EXPLAIN (COSTS OFF) SELECT id FROM events WHERE status = 'processing' AND locked_until <= now() FOR UPDATE SKIP LOCKED;
\echo == ListOrderEvents
EXPLAIN (COSTS OFF) SELECT * FROM events WHERE order_id = :ord ORDER BY created_at, id;
\echo == ListEvents
EXPLAIN (COSTS OFF) SELECT * FROM events ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0;
\echo == ListAuditEntries (no filter)
EXPLAIN (COSTS OFF) SELECT * FROM audit_log ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0;
\echo == ListAuditEntries (entity)
EXPLAIN (COSTS OFF) SELECT * FROM audit_log WHERE entity_type = 'order' AND entity_id = :ord ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0;
\echo == ListAuditEntries (actor)
EXPLAIN (COSTS OFF) SELECT * FROM audit_log WHERE actor_kind = 'admin' AND actor_id = 'admin-3' ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0;
\echo == ListAuditEntries (action)
EXPLAIN (COSTS OFF) SELECT * FROM audit_log WHERE action = 'product.update' ORDER BY created_at DESC, id DESC LIMIT 20 OFFSET 0;
\echo == PaymentAuditExists
EXPLAIN (COSTS OFF) SELECT EXISTS (SELECT 1 FROM audit_log WHERE entity_type = 'payment' AND entity_id = :pay AND action = 'payment.anomaly' AND after->>'fingerprint' = 'f');
