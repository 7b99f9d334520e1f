-- name: GetPayment :one
SELECT * FROM payments
WHERE id = @id;

-- name: GetPaymentForUpdate :one
-- Locks the payment row until the transaction ends: callbacks, status syncs,
-- confirmations and refunds of one payment are serialised on it.
SELECT * FROM payments
WHERE id = @id
FOR UPDATE;

-- name: InsertPayment :one
-- A second pending payment for the same (order, invoice, gateway interface)
-- fails on payments_one_pending_key (store.ErrConflict); the caller then
-- returns the existing one.
INSERT INTO payments (
    order_id,
    invoice_id,
    customer_id,
    method,
    gateway_interface_id,
    amount,
    currency,
    status,
    paid_at,
    return_url,
    next_reconcile_at,
    failed_at
) VALUES (
    sqlc.narg('order_id'),
    sqlc.narg('invoice_id'),
    @customer_id,
    @method,
    sqlc.narg('gateway_interface_id'),
    @amount,
    @currency,
    @status,
    sqlc.narg('paid_at'),
    @return_url,
    sqlc.narg('next_reconcile_at'),
    sqlc.narg('failed_at')
)
RETURNING *;

-- name: ListPayments :many
-- Every filter is optional (NULL: no filter). customer_id scopes the list to
-- one customer's payments; it is set for every customer caller. to_return
-- keeps the payments whose captured money is not returned in full. id_from
-- and id_to (both or neither) keep the ids in that range: a transfer
-- reference is an id prefix, and a range on the primary key is what its
-- index answers (a LIKE over id::text would read every row).
SELECT * FROM payments
WHERE (sqlc.narg('customer_id')::uuid IS NULL OR customer_id = sqlc.narg('customer_id'))
  AND (sqlc.narg('order_id')::uuid IS NULL OR order_id = sqlc.narg('order_id'))
  AND (sqlc.narg('invoice_id')::uuid IS NULL OR invoice_id = sqlc.narg('invoice_id'))
  AND (sqlc.narg('gateway_interface_id')::uuid IS NULL OR gateway_interface_id = sqlc.narg('gateway_interface_id'))
  AND (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'))
  AND (NOT @to_return::boolean OR captured_amount > refunded_amount)
  AND (sqlc.narg('id_from')::uuid IS NULL OR (id >= sqlc.narg('id_from') AND id <= sqlc.narg('id_to')::uuid))
ORDER BY created_at DESC, id DESC
LIMIT @row_limit::bigint
OFFSET @row_offset::bigint;

-- name: CountPayments :one
-- Same filters as ListPayments.
SELECT count(*) FROM payments
WHERE (sqlc.narg('customer_id')::uuid IS NULL OR customer_id = sqlc.narg('customer_id'))
  AND (sqlc.narg('order_id')::uuid IS NULL OR order_id = sqlc.narg('order_id'))
  AND (sqlc.narg('invoice_id')::uuid IS NULL OR invoice_id = sqlc.narg('invoice_id'))
  AND (sqlc.narg('gateway_interface_id')::uuid IS NULL OR gateway_interface_id = sqlc.narg('gateway_interface_id'))
  AND (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'))
  AND (NOT @to_return::boolean OR captured_amount > refunded_amount)
  AND (sqlc.narg('id_from')::uuid IS NULL OR (id >= sqlc.narg('id_from') AND id <= sqlc.narg('id_to')::uuid));
