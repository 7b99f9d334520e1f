-- Invoices: issued by admins for an order or a customer.

-- name: InsertInvoice :one
-- An order's invoice must have the order's customer and currency
-- (invoices_order_fkey); the number is unique (invoices_number_key).
INSERT INTO invoices (
    id,
    customer_id,
    order_id,
    number,
    status,
    amount,
    currency,
    description,
    issued_at,
    due_at,
    created_at,
    updated_at
) VALUES (
    @id,
    @customer_id,
    sqlc.narg('order_id'),
    @number,
    @status,
    @amount,
    @currency,
    @description,
    sqlc.narg('issued_at'),
    sqlc.narg('due_at'),
    @created_at,
    @created_at
)
RETURNING *;

-- name: GetInvoice :one
SELECT * FROM invoices
WHERE id = @id;

-- name: GetInvoiceForUpdate :one
-- Locks the invoice row until the transaction ends: its status and
-- paid_amount are decided by one transaction at a time.
SELECT * FROM invoices
WHERE id = @id
FOR UPDATE;

-- name: ListInvoices :many
-- Every filter is optional (NULL: no filter); customer_id is set for every
-- customer caller.
SELECT * FROM invoices
WHERE (sqlc.narg('customer_id')::uuid IS NULL OR customer_id = sqlc.narg('customer_id'))
  AND (sqlc.narg('order_id')::uuid IS NULL OR order_id = sqlc.narg('order_id'))
  AND (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'))
ORDER BY created_at DESC, id DESC
LIMIT @row_limit::bigint
OFFSET @row_offset::bigint;

-- name: CountInvoices :one
-- Same filters as ListInvoices.
SELECT count(*) FROM invoices
WHERE (sqlc.narg('customer_id')::uuid IS NULL OR customer_id = sqlc.narg('customer_id'))
  AND (sqlc.narg('order_id')::uuid IS NULL OR order_id = sqlc.narg('order_id'))
  AND (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'));

-- name: SetInvoiceStatus :one
-- Moves the invoice from from_status to to_status; no row (store.ErrNotFound)
-- when it is no longer in from_status.
UPDATE invoices
SET status = @to_status,
    updated_at = @updated_at
WHERE id = @id
  AND status = @from_status
RETURNING *;
