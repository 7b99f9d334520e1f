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

-- name: InsertRenewalInvoices :many
-- The billing run's renewal invoices of one batch, in one statement
-- (InsertInvoice's rows for orders' invoices that are issued, numbered
-- and due). The amounts are decimal text: numeric as written.
INSERT INTO invoices (
    id, customer_id, order_id, number, status, amount, currency, description, issued_at, due_at, created_at, updated_at
)
SELECT r.id, r.customer_id, r.order_id, r.number, 'issued', r.amount::numeric, r.currency, r.description,
       @issued_at::timestamptz, r.due_at, @issued_at::timestamptz, @issued_at::timestamptz
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@customer_ids::uuid[]) AS customer_id, unnest(@order_ids::uuid[]) AS order_id,
             unnest(@numbers::text[]) AS number, unnest(@amounts::text[]) AS amount, unnest(@currencies::text[]) AS currency,
             unnest(@descriptions::text[]) AS description, unnest(@due_ats::timestamptz[]) AS due_at) AS r
RETURNING *;

-- name: InsertRenewalInvoiceLines :exec
-- The one line of each invoice of InsertRenewalInvoices: its period, once,
-- at the invoice's amount.
INSERT INTO invoice_lines (
    invoice_id, position, description, period_start, period_end, quantity, unit_amount, amount, created_at
)
SELECT r.invoice_id, 1, r.description, r.period_start, r.period_end, 1, r.amount::numeric, r.amount::numeric, @created_at::timestamptz
FROM (SELECT unnest(@invoice_ids::uuid[]) AS invoice_id, unnest(@descriptions::text[]) AS description,
             unnest(@period_starts::timestamptz[]) AS period_start, unnest(@period_ends::timestamptz[]) AS period_end,
             unnest(@amounts::text[]) AS amount) AS r;

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

-- name: TakeInvoiceNumbers :one
-- The next count numbers of series (count ≥ 1), taken in the transaction
-- that issues their invoices: the last of them is answered, the first is
-- last - count + 1. The series' row stays locked until the transaction
-- ends, so concurrent issues take 1, 2, 3, ... one after the other, and a
-- rollback gives the numbers back (no gap).
INSERT INTO invoice_number_series (series, last_number, updated_at)
VALUES (@series, @count::bigint, @updated_at)
ON CONFLICT (series) DO UPDATE
SET last_number = invoice_number_series.last_number + excluded.last_number,
    updated_at = excluded.updated_at
RETURNING last_number;
