-- name: GetOrder :one
SELECT * FROM orders
WHERE id = @id;

-- name: GetOrderForUpdate :one
-- Locks the order row until the transaction ends, so that its status is
-- decided by one transaction at a time.
SELECT * FROM orders
WHERE id = @id
FOR UPDATE;

-- name: LockOrdersForUpdate :many
-- GetOrderForUpdate for the orders of one batch of the event worker, in
-- one statement: the rows are locked in id order, so two batches (or a
-- batch and anything else that locks several orders in that order) cannot
-- deadlock. Orders that do not exist are missing from the result.
SELECT * FROM orders
WHERE id = ANY(@ids::uuid[])
ORDER BY id
FOR UPDATE;

-- name: InsertOrder :one
-- A new order is always pending (the column default). item freezes what was
-- bought, so later catalogue edits never change the order. The id is the
-- caller's when given: the item's encrypted secrets are bound to it before
-- the insert.
INSERT INTO orders (id, customer_id, product_id, total_amount, currency, description, item, billing_cycle, renewal_price, created_at, updated_at)
VALUES (COALESCE(sqlc.narg('id')::uuid, gen_random_uuid()), @customer_id, sqlc.narg('product_id'), @total_amount, @currency, @description, @item,
        @billing_cycle, sqlc.narg('renewal_price'), @created_at, @created_at)
RETURNING *;

-- name: ListOrders :many
-- Every filter is optional (NULL: no filter); customer_id is set for every
-- customer caller. Uses orders_customer_id_idx or orders_created_at_idx.
SELECT * FROM orders
WHERE (sqlc.narg('customer_id')::uuid IS NULL OR customer_id = sqlc.narg('customer_id'))
  AND (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'))
ORDER BY created_at DESC, id DESC
LIMIT @row_limit::bigint
OFFSET @row_offset::bigint;

-- name: CountOrders :one
-- Same filters as ListOrders.
SELECT count(*) FROM orders
WHERE (sqlc.narg('customer_id')::uuid IS NULL OR customer_id = sqlc.narg('customer_id'))
  AND (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'));

-- name: MoveOrders :many
-- SetOrderStatus for the orders of one batch of the event worker, all
-- moving from from_status to to_status at updated_at, in one statement.
-- An order no longer in from_status is missing from the result. Call it
-- with the order rows locked (LockOrdersForUpdate). paid_at is kept.
UPDATE orders
SET status = @to_status,
    suspend_reason = '',
    updated_at = @updated_at
WHERE id = ANY(@ids::uuid[])
  AND status = @from_status
RETURNING *;

-- name: SetOrderStatus :one
-- Moves the order from from_status to to_status; no row (store.ErrNotFound)
-- when the order is no longer in from_status, so a transition decided on a
-- stale read is never applied. paid_at is kept when NULL is passed.
UPDATE orders
SET status = @to_status,
    paid_at = coalesce(sqlc.narg('paid_at'), paid_at),
    suspend_reason = '',
    updated_at = @updated_at
WHERE id = @id
  AND status = @from_status
RETURNING *;

-- name: CancelOrder :one
-- Like SetOrderStatus, to cancelled, with the reason and the time.
UPDATE orders
SET status = 'cancelled',
    cancel_reason = @cancel_reason,
    cancelled_at = @cancelled_at,
    updated_at = @cancelled_at
WHERE id = @id
  AND status = @from_status
RETURNING *;

-- name: LockOrdersToReprice :many
-- The orders of a product in one of the statuses given (the non-final
-- ones) whose cycle or renewal price differ from the product's new ones,
-- locked for UpdateProduct's apply_to_existing_orders. Oldest first, so
-- concurrent callers lock in one order.
SELECT * FROM orders
WHERE product_id = @product_id
  AND status = ANY(@statuses::text[])
  AND (billing_cycle <> @billing_cycle OR renewal_price IS DISTINCT FROM sqlc.narg('renewal_price')::numeric)
ORDER BY created_at, id
FOR UPDATE;

-- name: SetOrderBilling :one
-- Moves an order's later periods to a new cycle and renewal price.
-- Call it with the order row locked.
UPDATE orders
SET billing_cycle = @billing_cycle,
    renewal_price = sqlc.narg('renewal_price'),
    updated_at = @updated_at
WHERE id = @id
RETURNING *;
