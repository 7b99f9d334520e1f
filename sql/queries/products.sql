-- The product catalogue.

-- name: InsertProduct :one
-- The id is the caller's: the provider_config's encrypted secrets are bound
-- to it before the insert.
INSERT INTO products (id, name, description, price, currency, billing_cycle, provider_plugin, provider_config, created_at, updated_at)
VALUES (@id, @name, @description, @price, @currency, @billing_cycle, sqlc.narg('provider_plugin'), @provider_config, @created_at, @created_at)
RETURNING *;

-- name: GetProduct :one
SELECT * FROM products
WHERE id = @id;

-- name: GetProductsByID :many
-- The products of a batch of orders, one statement.
SELECT * FROM products
WHERE id = ANY(@ids::uuid[]);

-- name: ListProducts :many
-- enabled NULL: every product (admins); customers always pass true.
SELECT * FROM products
WHERE (sqlc.narg('enabled')::boolean IS NULL OR enabled = sqlc.narg('enabled'))
ORDER BY created_at DESC, id DESC
LIMIT @row_limit::bigint
OFFSET @row_offset::bigint;

-- name: CountProducts :one
-- Same filter as ListProducts.
SELECT count(*) FROM products
WHERE (sqlc.narg('enabled')::boolean IS NULL OR enabled = sqlc.narg('enabled'));

-- name: LockProduct :one
-- The product an update changes, locked until the transaction ends. NO KEY:
-- the update never changes the id, so inserts referring to the product
-- (orders, instances) are not held up; a fulfilment that holds an order
-- and inserts its instance cannot deadlock with an update that moves the
-- product's orders (apply_to_existing_orders).
SELECT * FROM products
WHERE id = @id
FOR NO KEY UPDATE;

-- name: UpdateProduct :one
-- Writes the product's name, description, price, billing cycle, enabled
-- and provider_config, stamped updated_at.
UPDATE products
SET name = @name, description = @description, price = @price, billing_cycle = @billing_cycle,
    enabled = @enabled, provider_config = @provider_config, updated_at = @updated_at
WHERE id = @id
RETURNING *;
