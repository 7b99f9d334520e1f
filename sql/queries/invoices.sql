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
-- The one write of invoices.status (order.InvoiceTransition): moves the
-- invoice from from_status to to_status, adds add_paid to paid_amount (0
-- for a move that pays nothing) and sets paid_at when given. to_status may
-- equal from_status (a payment that does not pay the invoice in full). No
-- row (store.ErrNotFound) when it is no longer in from_status, or would be
-- paid beyond its amount. Call it with the invoice row locked.
UPDATE invoices
SET status = @to_status,
    paid_amount = paid_amount + @add_paid,
    paid_at = coalesce(sqlc.narg('paid_at'), paid_at),
    updated_at = @updated_at
WHERE id = @id
  AND status = @from_status
  AND paid_amount + @add_paid <= amount
RETURNING *;

-- name: LockDueInvoices :many
-- Up to row_limit issued invoices due by now, oldest due first, locked
-- (SKIP LOCKED: one a settlement or a cancel holds is left for the next
-- round), for order.MarkOverdueInvoices to move to overdue one by one. Uses
-- invoices_issued_due_at_idx.
SELECT * FROM invoices
WHERE status = 'issued'
  AND due_at <= @now::timestamptz
ORDER BY due_at, id
LIMIT @row_limit::integer
FOR UPDATE SKIP LOCKED;

-- name: InsertInvoiceLine :exec
-- One line of an invoice, written in the transaction that inserts the
-- invoice: at commit the invoice's amount must be the sum of its lines
-- (invoice_lines_sum_check).
INSERT INTO invoice_lines (
    invoice_id,
    position,
    description,
    period_start,
    period_end,
    quantity,
    unit_amount,
    amount,
    created_at
) VALUES (
    @invoice_id,
    @position,
    @description,
    sqlc.narg('period_start'),
    sqlc.narg('period_end'),
    @quantity,
    @unit_amount,
    @amount,
    @created_at
);

-- name: ListInvoiceLines :many
-- The lines of the given invoices, each invoice's in position order. Uses
-- invoice_lines_pkey.
SELECT * FROM invoice_lines
WHERE invoice_id = ANY(@invoice_ids::uuid[])
ORDER BY invoice_id, position;

-- name: TakeInvoiceNumber :one
-- The next number of series, taken in the transaction that issues the
-- invoice: the series' row stays locked until it ends, so concurrent
-- issues take 1, 2, 3, ... one after the other, and a rollback gives the
-- number back (no gap).
INSERT INTO invoice_number_series (series, last_number, updated_at)
VALUES (@series, 1, @updated_at)
ON CONFLICT (series) DO UPDATE
SET last_number = invoice_number_series.last_number + 1,
    updated_at = excluded.updated_at
RETURNING last_number;
