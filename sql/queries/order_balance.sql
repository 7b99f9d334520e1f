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

-- name: InsertBalancePayment :one
-- A payment made from the balance: method balance, no gateway interface,
-- successful and paid at once (amount > 0 by payments_amount_check).
INSERT INTO payments (
    order_id,
    customer_id,
    method,
    amount,
    currency,
    status,
    paid_at,
    created_at,
    updated_at
) VALUES (
    @order_id,
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

-- name: FailPendingOrderPayments :many
-- pending -> failed for every pending payment of the order (the order was
-- cancelled or paid otherwise), with the order row locked by the caller.
UPDATE payments
SET status = 'failed',
    failure_reason = @failure_reason,
    failed_at = @updated_at::timestamptz,
    -- A gateway payment is asked about again for late_capture_days (money
    -- captured after all); the first time at the reconciler's next round.
    next_reconcile_at = CASE WHEN method = 'gateway' THEN @updated_at::timestamptz END,
    reconcile_attempts = 0,
    updated_at = @updated_at
WHERE order_id = @order_id
  AND status = 'pending'
RETURNING *;

-- name: FailPendingInvoicePayments :many
-- pending -> failed for every pending payment of the invoice (it was
-- cancelled), with the invoice row locked by the caller.
UPDATE payments
SET status = 'failed',
    failure_reason = @failure_reason,
    failed_at = @updated_at::timestamptz,
    -- A gateway payment is asked about again for late_capture_days (money
    -- captured after all); the first time at the reconciler's next round.
    next_reconcile_at = CASE WHEN method = 'gateway' THEN @updated_at::timestamptz END,
    reconcile_attempts = 0,
    updated_at = @updated_at
WHERE invoice_id = @invoice_id
  AND status = 'pending'
RETURNING *;
