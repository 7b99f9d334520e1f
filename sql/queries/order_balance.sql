-- Paying an order from the customer's prepaid balance, and what an order
-- does to payments. Named apart from customers.sql / balance_transactions.sql
-- on purpose: every query here serves internal/order.

-- name: GetOrderCustomerAccount :one
-- The balance facts of a customer, unlocked (for reading the currency).
SELECT id, currency, balance, credit_limit, disabled_at
FROM customers
WHERE id = @id;

-- name: LockOrderCustomerAccount :one
-- Locks the customer row until the transaction ends. Every change of the
-- balance is serialised on this lock (it conflicts with FOR UPDATE, FOR NO
-- KEY UPDATE and every UPDATE of the row), so concurrent balance payments of
-- one customer are decided one after the other on the current balance. NO
-- KEY: inserts that merely refer to the customer (orders, invoices,
-- payments) take FOR KEY SHARE and are not blocked; with FOR UPDATE, a
-- transaction holding an order and inserting an invoice for its customer
-- would deadlock against a balance payment waiting for that order. Lock
-- order: the customer first, then the order.
SELECT id, currency, balance, credit_limit, disabled_at
FROM customers
WHERE id = @id
FOR NO KEY UPDATE;

-- name: LockCustomerAccountsOfOrders :many
-- LockOrderCustomerAccount of the customers of the orders given, each once,
-- found through the orders (an order's customer never changes), locked in
-- id order: the first lock of a balance payment (PayWithBalance, one
-- order) and of the billing run's batch, sent in one round trip with the
-- orders' own locks after it (store.LockForBalancePayments), keeping the
-- lock order customers, then orders. No row for an order that does not
-- exist.
SELECT c.id, c.currency, c.balance, c.credit_limit, c.disabled_at
FROM customers c
WHERE c.id IN (SELECT o.customer_id FROM orders o WHERE o.id = ANY(@order_ids::uuid[]))
ORDER BY c.id
FOR NO KEY UPDATE OF c;

-- name: InsertBalancePayment :one
-- A payment made from the balance, of an order or of an invoice alone (a
-- renewal paid automatically): method balance, no gateway interface,
-- successful and paid at once (amount > 0 by payments_amount_check). The
-- id is the caller's (store.InsertBalancePayment draws a random one, as
-- the column's default would), so that the ledger row naming the payment
-- can be sent in the same round trip.
INSERT INTO payments (
    id,
    order_id,
    invoice_id,
    customer_id,
    method,
    amount,
    currency,
    status,
    paid_at,
    created_at,
    updated_at
) VALUES (
    @id,
    sqlc.narg('order_id'),
    sqlc.narg('invoice_id'),
    @customer_id,
    'balance',
    @amount,
    @currency,
    'success',
    @paid_at,
    @paid_at,
    @paid_at
)
RETURNING *;

-- name: FailPendingPayments :many
-- The one pending -> failed rule: every pending payment that is the
-- payment id, pays order_id and pays invoice_id, for those of the three
-- that are given (order_only leaves out the payments of the order's
-- invoices), fails with the reason. A gateway payment is asked about again
-- for late_capture_days (money captured after all); the first time at the
-- reconciler's next round. Call it with the row the payments belong to
-- (order, invoice or payment) locked.
--
-- The catch-alls ("key IS NULL OR column = key") state the rule but are no
-- index condition in a generic plan (pgx prepares; the server may keep one
-- plan after five executions), which alone read every pending payment. The
-- line before them finds the payments: an arm per key, never true for a
-- NULL key (so with none of the three given, no row), each an index
-- condition (payments_pkey; payments_one_pending_key on order_id, its first
-- column; payments_invoice_id_idx): a generic plan reads a BitmapOr of the
-- three, a custom plan drops the NULL arms and reads one index. (A UNION
-- ALL of one select per key did as well in a generic plan but took three
-- times as long to plan the custom plans the server keeps choosing:
-- docs/performance.md.)
UPDATE payments
SET status = 'failed',
    failure_reason = @failure_reason,
    failed_at = @updated_at::timestamptz,
    next_reconcile_at = CASE WHEN method = 'gateway' THEN @updated_at::timestamptz END,
    reconcile_attempts = 0,
    updated_at = @updated_at
WHERE status = 'pending'
  AND (id = sqlc.narg('id')::uuid OR order_id = sqlc.narg('order_id')::uuid OR invoice_id = sqlc.narg('invoice_id')::uuid)
  AND (sqlc.narg('id')::uuid IS NULL OR id = sqlc.narg('id'))
  AND (sqlc.narg('order_id')::uuid IS NULL OR order_id = sqlc.narg('order_id'))
  AND (sqlc.narg('invoice_id')::uuid IS NULL OR invoice_id = sqlc.narg('invoice_id'))
  AND (NOT @order_only::boolean OR invoice_id IS NULL)
RETURNING *;
