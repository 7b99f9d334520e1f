-- Refunds of a payment. Each refund is its own row; a refund is reserved
-- (inserted pending) with the payment row locked, the gateway is asked
-- outside any transaction, and the outcome is written in a second one.

-- name: InsertRefund :one
-- status is pending (a reservation before the gateway is asked) or
-- succeeded (a refund to the balance, credited in the same transaction).
INSERT INTO refunds (payment_id, amount, status, destination, reason, requested_by, created_at, updated_at)
VALUES (@payment_id, @amount, @status, @destination, @reason, sqlc.narg('requested_by'), @created_at, @created_at)
RETURNING *;

-- name: ReservedRefundAmount :one
-- The part of the payment already refunded or being refunded: succeeded and
-- pending refunds. Read it with the payment row locked, so concurrent
-- refunds are decided one after the other on the current sum.
SELECT coalesce(sum(amount), 0)::numeric(12,2) AS reserved
FROM refunds
WHERE payment_id = @payment_id
  AND status IN ('pending', 'succeeded');

-- name: FinishRefund :one
-- pending -> succeeded | failed with what the gateway said; no row
-- (store.ErrNotFound) when the refund is no longer pending.
UPDATE refunds
SET status = @status,
    gateway_refund_id = @gateway_refund_id,
    error = @error,
    updated_at = @updated_at
WHERE id = @id
  AND status = 'pending'
RETURNING *;

-- name: NoteRefund :one
-- Keeps a pending refund pending and records why (the outcome is unknown;
-- an admin must check the gateway).
UPDATE refunds
SET error = @error,
    gateway_refund_id = @gateway_refund_id,
    updated_at = @updated_at
WHERE id = @id
  AND status = 'pending'
RETURNING *;

-- name: AddRefundedAmount :one
-- Adds a succeeded refund to a successful payment, or to a failed one whose
-- money was captured; a successful payment becomes refunded when
-- refunded_amount reaches amount (the CHECKs demand exactly that), a failed
-- one stays failed. No row (store.ErrNotFound) when the payment cannot be
-- refunded or the refund would exceed what it took. Call it with the payment
-- row locked.
UPDATE payments
SET refunded_amount = refunded_amount + @amount,
    status = CASE WHEN status = 'success' AND refunded_amount + @amount = amount THEN 'refunded' ELSE status END,
    updated_at = @updated_at
WHERE id = @id
  AND (status = 'success' OR (status = 'failed' AND captured_amount > 0))
  AND refunded_amount + @amount <= amount
RETURNING *;

-- name: ListPaymentRefunds :many
-- A payment's refunds, oldest first (refunds_payment_id_idx).
SELECT * FROM refunds
WHERE payment_id = @payment_id
ORDER BY created_at, id;

-- name: GetRefund :one
-- One refund by id (the primary key).
SELECT * FROM refunds
WHERE id = @id;
