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

-- name: GetCustomerAccess :one
-- What decides whether a customer's access token is still good: the token
-- generation it must carry and whether the account is disabled. Read
-- through the access cache (internal/identity/access.go), not per request.
SELECT token_generation, disabled_at FROM customers
WHERE id = @id;

-- name: ChangeCustomerPassword :one
-- A new password hash, only while the stored one is still old_hash (no row,
-- store.ErrNotFound, when it changed meanwhile), and a new token
-- generation: every token issued before is refused from now on.
UPDATE customers
SET password_hash = @new_hash,
    token_generation = token_generation + 1,
    updated_at = @updated_at
WHERE id = @id
  AND password_hash = @old_hash
RETURNING *;

-- name: EndCustomerTokens :one
-- Sign out everywhere: a new token generation, so every access token
-- issued before is refused.
UPDATE customers
SET token_generation = token_generation + 1,
    updated_at = @updated_at
WHERE id = @id
RETURNING *;

-- name: SetCustomerDisabled :one
-- disabled_at set (disable) or NULL (enable), with a new token generation
-- either way: disabling ends every token, and the generation only grows so
-- that a cache can tell the newer state from the older.
UPDATE customers
SET disabled_at = sqlc.narg('disabled_at'),
    token_generation = token_generation + 1,
    updated_at = @updated_at
WHERE id = @id
RETURNING *;
