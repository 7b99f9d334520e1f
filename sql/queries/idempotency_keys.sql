-- Idempotency keys (internal/idempotency): claimed by the first call that
-- sends one, finished with its outcome, read by the calls that send it
-- again, swept when expired.

-- name: ClaimIdempotencyKey :execrows
-- 1: the caller owns the key and runs the call; 0: the key is taken (read
-- it with GetIdempotencyKey).
INSERT INTO idempotency_keys (principal, key, procedure, request_hash, created_at, expires_at)
VALUES (@principal, @key, @procedure, @request_hash, @created_at, @expires_at)
ON CONFLICT (principal, key) DO NOTHING;

-- name: GetIdempotencyKey :one
SELECT principal, key, procedure, request_hash, state, response, error_code,
       error_message, created_at, finished_at, expires_at
FROM idempotency_keys
WHERE principal = @principal AND key = @key;

-- name: FinishIdempotencyKey :execrows
UPDATE idempotency_keys
SET state = 'done', response = sqlc.narg('response'), error_code = sqlc.narg('error_code'),
    error_message = sqlc.narg('error_message'), finished_at = @finished_at
WHERE principal = @principal AND key = @key AND state = 'running';

-- name: ReleaseIdempotencyKey :execrows
-- A call whose outcome is not kept (it changed nothing and says to retry)
-- gives its key back.
DELETE FROM idempotency_keys
WHERE principal = @principal AND key = @key AND state = 'running';

-- name: DeleteExpiredIdempotencyKey :execrows
-- An expired key found by a new call is gone before the call claims it.
DELETE FROM idempotency_keys
WHERE principal = @principal AND key = @key AND expires_at <= @now;

-- name: SweepIdempotencyKeys :execrows
-- At most row_limit expired keys at a time, so a sweep never holds many
-- locks.
DELETE FROM idempotency_keys
WHERE (principal, key) IN (
    SELECT k.principal, k.key FROM idempotency_keys AS k
    WHERE k.expires_at <= sqlc.arg('swept_before')::timestamptz
    LIMIT sqlc.arg('row_limit')::int);
