-- name: InsertCustomer :one
-- A second customer with the same e-mail address in any letter case fails on
-- customers_email_lower_key (store.ErrConflict).
INSERT INTO customers (email, password_hash, name, currency)
VALUES (@email, @password_hash, @name, @currency)
RETURNING *;

-- name: GetCustomer :one
SELECT * FROM customers
WHERE id = @id;

-- name: GetCustomerForUpdate :one
-- Locks the customer row until the transaction ends: every change of the
-- balance, the credit limit or the API key permission is serialised on it,
-- so balance_before of a ledger row is always balance_after of the previous.
SELECT * FROM customers
WHERE id = @id
FOR UPDATE;

-- name: GetCustomerByEmail :one
-- Uses customers_email_lower_key.
SELECT * FROM customers
WHERE lower(email) = lower(@email);

-- name: ListCustomers :many
-- email_pattern is a LIKE pattern (the caller escapes %, _ and \), NULL for
-- no filter.
SELECT * FROM customers
WHERE (sqlc.narg('email_pattern')::text IS NULL OR lower(email) LIKE sqlc.narg('email_pattern'))
ORDER BY created_at DESC, id DESC
LIMIT @row_limit::bigint
OFFSET @row_offset::bigint;

-- name: CountCustomers :one
-- Same filter as ListCustomers.
SELECT count(*) FROM customers
WHERE (sqlc.narg('email_pattern')::text IS NULL OR lower(email) LIKE sqlc.narg('email_pattern'));

-- name: SetCustomerCanCreateApiKeys :one
UPDATE customers
SET can_create_api_keys = @can_create_api_keys, updated_at = @updated_at
WHERE id = @id
RETURNING *;

-- name: SetCustomerCreditLimit :one
-- customers_balance_check refuses a limit the current balance is already
-- below (store.ErrCheckViolation); the domain checks first under the row lock.
UPDATE customers
SET credit_limit = @credit_limit, updated_at = @updated_at
WHERE id = @id
RETURNING *;
