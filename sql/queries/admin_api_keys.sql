-- Admin API keys "ak_<id>_<secret>": only SHA-256 of the secret is stored.

-- name: InsertAdminApiKey :one
INSERT INTO admin_api_keys (admin_id, name, scope, secret_hash, created_at, expires_at)
VALUES (@admin_id, @name, @scope, @secret_hash, @created_at, sqlc.narg('expires_at'))
RETURNING *;

-- name: GetAdminApiKeyWithAdmin :one
-- Read on every request that carries the key (no caching of validity, so a
-- revocation is effective at once), with the state of its admin.
SELECT
    k.id,
    k.admin_id,
    k.name,
    k.scope,
    k.secret_hash,
    k.created_at,
    k.last_used_at,
    k.revoked_at,
    k.revoked_by,
    k.expires_at,
    a.username AS admin_username,
    a.disabled_at AS admin_disabled_at
FROM admin_api_keys k
JOIN admin_users a ON a.id = k.admin_id
WHERE k.id = @id;

-- name: ListAdminApiKeys :many
-- Every admin's keys, newest first (admin_api_keys_created_at_idx), with the
-- username of the admin each acts as.
SELECT
    k.id,
    k.admin_id,
    k.name,
    k.scope,
    k.secret_hash,
    k.created_at,
    k.last_used_at,
    k.revoked_at,
    k.revoked_by,
    k.expires_at,
    a.username AS admin_username,
    a.disabled_at AS admin_disabled_at
FROM admin_api_keys k
JOIN admin_users a ON a.id = k.admin_id
ORDER BY k.created_at DESC, k.id DESC
LIMIT @row_limit::bigint
OFFSET @row_offset::bigint;

-- name: CountAdminApiKeys :one
SELECT count(*) FROM admin_api_keys;

-- name: CountActiveAdminApiKeys :one
-- The admin keys not revoked.
SELECT count(*) FROM admin_api_keys
WHERE revoked_at IS NULL;

-- name: LockAdminApiKeys :exec
-- Serialises key creation, so the bound on active keys holds, with a
-- transaction-level advisory lock: a table lock would also stop the
-- authenticator's touch of last_used_at (an UPDATE) while a key is made.
-- The key is "admin_api_keys" as text, hashed.
SELECT pg_advisory_xact_lock(hashtextextended('paymentd.admin_api_keys.create', 0));

-- name: RevokeAdminApiKey :one
-- No row (store.ErrNotFound) when the key does not exist or is revoked
-- already.
UPDATE admin_api_keys
SET revoked_at = @revoked_at, revoked_by = @revoked_by
WHERE id = @id
  AND revoked_at IS NULL
RETURNING *;

-- name: RevokeAdminApiKeysOfAdmin :many
-- Every active key of an admin (a password reset or change, disabling):
-- whatever a leaked password could have minted. revoked_by is NULL when an
-- operator's command revoked them.
UPDATE admin_api_keys
SET revoked_at = @revoked_at, revoked_by = sqlc.narg('revoked_by')
WHERE admin_id = @admin_id
  AND revoked_at IS NULL
RETURNING *;

-- name: TouchAdminApiKey :execrows
-- Moves last_used_at forward only; at most once a minute per key.
UPDATE admin_api_keys
SET last_used_at = @last_used_at
WHERE id = @id
  AND (last_used_at IS NULL OR last_used_at < @last_used_at);
