-- The life of a gateway payment: creation, settlement by a callback, a
-- status query, an admin confirmation or the reconciler, and what settling
-- does to the invoice. Every query here serves internal/payment.
--
-- Lock order (internal/order's, extended): customer, then order, then
-- invoice, then payment. The settling transaction reads the payment without
-- a lock to learn its order and invoice (which never change), then locks
-- them in that order.

-- name: InsertGatewayPayment :one
-- A pending gateway payment, written after the gateway plugin's
-- create_payment has answered, with the id the plugin was given (the
-- gateway's out_trade_no). A second pending payment for the same (order,
-- invoice, gateway interface) fails on payments_one_pending_key
-- (store.ErrConflict); the caller returns the existing one.
INSERT INTO payments (
    id,
    order_id,
    invoice_id,
    customer_id,
    method,
    gateway_interface_id,
    amount,
    currency,
    status,
    payment_url,
    qr_code,
    instructions,
    return_url,
    next_reconcile_at,
    created_at,
    updated_at
) VALUES (
    @id,
    sqlc.narg('order_id'),
    sqlc.narg('invoice_id'),
    @customer_id,
    'gateway',
    @gateway_interface_id,
    @amount,
    @currency,
    'pending',
    @payment_url,
    @qr_code,
    @instructions,
    @return_url,
    @next_reconcile_at::timestamptz,
    @created_at,
    @created_at
)
RETURNING *;

-- name: GetPendingGatewayPayment :one
-- The pending payment of (order, invoice, gateway interface), if any: the
-- one payments_one_pending_key allows. NULL order or invoice match NULL.
-- IS NOT DISTINCT FROM cannot use an index, so the equality on whichever
-- of the two is given (a payment always names one) finds the candidates
-- through payments_one_pending_key (whose rows are the pending payments,
-- order_id first) or payments_invoice_id_idx; without it every
-- CreatePayment read the whole payments table.
SELECT * FROM payments
WHERE order_id IS NOT DISTINCT FROM sqlc.narg('order_id')::uuid
  AND invoice_id IS NOT DISTINCT FROM sqlc.narg('invoice_id')::uuid
  AND (order_id = sqlc.narg('order_id') OR invoice_id = sqlc.narg('invoice_id'))
  AND gateway_interface_id = @gateway_interface_id
  AND status = 'pending';

-- name: GetOrderOfPaymentForUpdate :one
-- The order a payment pays, locked; no row when it pays none (or does not
-- exist). A settlement's first lock (store.LockForSettlement): a payment's
-- order never changes, so the subquery reads it without a lock.
SELECT * FROM orders
WHERE id = (SELECT order_id FROM payments WHERE payments.id = @payment_id)
FOR UPDATE;

-- name: LockOrderOfInvoiceOfPayment :one
-- The order of the invoice a payment pays, locked, when the payment names
-- no order itself (a renewal invoice paid on its own): paying the invoice
-- may extend or resume the order's service (order.InvoiceTransition), and
-- the order is locked before its invoice, as everywhere. No row otherwise.
SELECT o.* FROM orders o
WHERE o.id = (SELECT i.order_id FROM payments p JOIN invoices i ON i.id = p.invoice_id
              WHERE p.id = @payment_id AND p.order_id IS NULL)
FOR UPDATE OF o;

-- name: GetInvoiceOfPaymentForUpdate :one
-- The invoice a payment pays, locked; no row when it pays none. A
-- settlement's second lock, after the order's, before the payment's.
SELECT * FROM invoices
WHERE id = (SELECT invoice_id FROM payments WHERE payments.id = @payment_id)
FOR UPDATE;

-- name: MarkPaymentSucceeded :one
-- pending -> success with the gateway's ids and the payment time. The
-- optimistic lock on the expected status: no row (store.ErrNotFound) when the
-- payment is no longer pending, so a settlement is applied at most once.
-- payments_gateway_payment_id_key refuses a gateway id that another payment
-- of the interface already carries (store.ErrConflict).
UPDATE payments
SET status = 'success',
    gateway_payment_id = @gateway_payment_id,
    gateway_tx_id = @gateway_tx_id,
    paid_at = @paid_at,
    next_reconcile_at = NULL,
    updated_at = @updated_at
WHERE id = @id
  AND status = 'pending'
RETURNING *;

-- name: CapturePayment :one
-- Records money the gateway captured for a payment that can no longer
-- apply: a pending one fails with the reason, a failed one keeps its own;
-- either way it stays failed with captured_amount = amount, the gateway's
-- ids (for the refund) and no further reconciliation. No row
-- (store.ErrNotFound) when the payment is neither pending nor failed, or
-- its money is already captured. payments_gateway_payment_id_key refuses a
-- gateway id that another payment of the interface carries.
UPDATE payments
SET status = 'failed',
    failure_reason = CASE WHEN status = 'pending' THEN @failure_reason ELSE failure_reason END,
    failed_at = coalesce(failed_at, @updated_at),
    captured_amount = amount,
    captured_at = @captured_at,
    gateway_payment_id = @gateway_payment_id,
    gateway_tx_id = @gateway_tx_id,
    next_reconcile_at = NULL,
    updated_at = @updated_at
WHERE id = @id
  AND status IN ('pending', 'failed')
  AND captured_amount = 0
RETURNING *;

-- name: PaymentWithGatewayID :one
-- Another payment of the interface that already carries this gateway
-- payment id (uses payments_gateway_payment_id_key).
SELECT id FROM payments
WHERE gateway_interface_id = @gateway_interface_id
  AND gateway_payment_id = @gateway_payment_id
  AND gateway_payment_id <> ''
  AND id <> @id
LIMIT 1;

-- name: ExpireReconciliations :execrows
-- Unschedules, before a claim, the due payments there is nothing more to
-- ask about: settled ones, failed ones whose money is captured, and failed
-- ones scheduled after their late_capture window (failed_at +
-- late_capture) closed. Rows another transaction holds are left for the
-- next round. Uses payments_reconcile_idx.
WITH done AS (
    SELECT id FROM payments
    WHERE payments.next_reconcile_at <= sqlc.arg('now')::timestamptz
      AND NOT (payments.method = 'gateway' AND (payments.status = 'pending'
          OR (payments.status = 'failed' AND payments.captured_amount = 0
              AND payments.failed_at + sqlc.arg('late_capture')::interval >= payments.next_reconcile_at)))
    FOR UPDATE SKIP LOCKED
)
UPDATE payments p
SET next_reconcile_at = NULL
FROM done
WHERE p.id = done.id;

-- name: ClaimDuePayments :many
-- The reconciler's claim: up to batch_size gateway payments whose
-- next_reconcile_at has come (pending ones, and failed ones within their
-- late_capture window: ExpireReconciliations has unscheduled the rest),
-- locked with SKIP LOCKED so that concurrent reconcilers (and a callback
-- holding the row) never get the same payment, and rescheduled in the same
-- statement: attempts + 1, next time by exponential backoff
-- (base_backoff * 2^attempts, at most max_backoff for a pending payment,
-- late_max_backoff for a failed one, whose last check falls on the end of
-- its window): so a claimed payment is not due again for anyone until then,
-- even after this transaction commits. Uses payments_reconcile_idx.
WITH due AS (
    SELECT id FROM payments
    WHERE payments.next_reconcile_at <= sqlc.arg('now')::timestamptz
      AND payments.method = 'gateway'
      AND payments.status IN ('pending', 'failed')
    ORDER BY payments.next_reconcile_at, payments.id
    LIMIT sqlc.arg('batch_size')::integer
    FOR UPDATE SKIP LOCKED
)
UPDATE payments p
SET reconcile_attempts = p.reconcile_attempts + 1,
    next_reconcile_at = CASE
        WHEN p.status = 'pending' THEN sqlc.arg('now')::timestamptz + least(
            sqlc.arg('base_backoff')::interval * power(2, least(p.reconcile_attempts, 30)),
            sqlc.arg('max_backoff')::interval)
        WHEN p.failed_at + sqlc.arg('late_capture')::interval > sqlc.arg('now')::timestamptz THEN least(
            sqlc.arg('now')::timestamptz + least(
                sqlc.arg('base_backoff')::interval * power(2, least(p.reconcile_attempts, 30)),
                sqlc.arg('late_max_backoff')::interval),
            p.failed_at + sqlc.arg('late_capture')::interval)
        END
FROM due
WHERE p.id = due.id
RETURNING p.*;

-- name: PaymentAuditExists :one
-- Whether the payment already has an audit row of this action whose
-- after->>'fingerprint' is fingerprint: an anomaly reported again by every
-- retry of a gateway is recorded once. Uses audit_log_entity_idx.
SELECT EXISTS (
    SELECT 1 FROM audit_log
    WHERE entity_type = 'payment'
      AND entity_id = @payment_id::text
      AND action = @action
      AND after->>'fingerprint' = @fingerprint::text
);
