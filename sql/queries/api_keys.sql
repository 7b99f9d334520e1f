-- Customer API keys "pk_<id>_<secret>": only SHA-256 of the secret is stored.

-- name: InsertApiKey :one
INSERT INTO api_keys (customer_id, name, secret_hash, created_at)
VALUES (@customer_id, @name, @secret_hash, @created_at)
RETURNING *;

-- name: GetApiKeyWithCustomer :one
-- Read on every request that carries the key (no caching of validity, so a
-- revocation is effective at once), with the state of its customer.
SELECT
    k.id,
    k.customer_id,
    k.name,
    k.secret_hash,
    k.created_at,
    k.last_used_at,
    k.revoked_at,
    c.can_create_api_keys AS customer_can_create_api_keys,
    c.disabled_at AS customer_disabled_at
FROM api_keys k
JOIN customers c ON c.id = k.customer_id
WHERE k.id = @id;

-- name: GetCustomerApiKey :one
SELECT * FROM api_keys
WHERE id = @id
  AND customer_id = @customer_id;

-- name: ListCustomerApiKeys :many
-- Uses api_keys_customer_id_idx.
SELECT * FROM api_keys
WHERE customer_id = @customer_id
ORDER BY created_at DESC, id DESC
LIMIT @row_limit::bigint
OFFSET @row_offset::bigint;

-- name: CountCustomerApiKeys :one
SELECT count(*) FROM api_keys
WHERE customer_id = @customer_id;

-- name: CountActiveCustomerApiKeys :one
-- The customer's keys not revoked.
SELECT count(*) FROM api_keys
WHERE customer_id = @customer_id
  AND revoked_at IS NULL;

-- name: RevokeApiKey :one
-- No row (store.ErrNotFound) when the key is not the customer's or is
-- revoked already.
UPDATE api_keys
SET revoked_at = @revoked_at
WHERE id = @id
  AND customer_id = @customer_id
  AND revoked_at IS NULL
RETURNING *;

-- name: TouchApiKey :execrows
-- Moves last_used_at forward only; the service calls it at most once a
-- minute per key.
UPDATE api_keys
SET last_used_at = @last_used_at
WHERE id = @id
  AND (last_used_at IS NULL OR last_used_at < @last_used_at);

-- name: RevokeCustomerApiKeys :execrows
-- Every active key of a customer (an admin's sign-out everywhere that asks
-- for it).
UPDATE api_keys
SET revoked_at = @revoked_at
WHERE customer_id = @customer_id
  AND revoked_at IS NULL;
