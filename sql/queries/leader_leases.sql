-- Leader election on the lease table, in the style of riverqueue/river's
-- river_leader.sql. Every time is the database's now(); ttl is an interval
-- (time.Duration in Go). A term is (holder, elected_at).

-- name: LeaderAttemptElect :one
-- Takes the role when nobody holds it or the holder's lease has expired.
-- Returns the new term, or no row (store.ErrNotFound) when someone else holds
-- an unexpired lease, including this holder itself: renewing is LeaderReElect.
INSERT INTO leader_leases AS l (role, holder, elected_at, expires_at)
VALUES (@role, @holder, now(), now() + @ttl::interval)
ON CONFLICT (role) DO UPDATE
    SET holder = excluded.holder,
        elected_at = excluded.elected_at,
        expires_at = excluded.expires_at
    WHERE l.expires_at <= now()
RETURNING *;

-- name: LeaderReElect :one
-- Extends the caller's own term while it is still valid. No row means the term
-- is over (expired or taken over): stop acting as leader, then try
-- LeaderAttemptElect for a new term.
UPDATE leader_leases
SET expires_at = now() + @ttl::interval
WHERE role = @role
  AND holder = @holder
  AND elected_at = @elected_at
  AND expires_at > now()
RETURNING *;

-- name: LeaderResign :execrows
-- Gives the role up at shutdown, so another instance can take it at once.
DELETE FROM leader_leases
WHERE role = @role
  AND holder = @holder
  AND elected_at = @elected_at;

-- name: LeaderGet :one
-- The current lease of a role, and whether it is still valid by the database clock.
SELECT role, holder, elected_at, expires_at, expires_at > now() AS valid
FROM leader_leases
WHERE role = @role;

-- name: MigrationTryLock :one
-- The migration role's mutual exclusion (internal/migrate): a session
-- advisory lock, the one guard that works before leader_leases exists (a
-- migration creates it). Released by MigrationUnlock or when the session
-- ends, so a killed migrator never leaves it behind.
-- Run it on one connection (the lock is the session's); it does not wait:
-- false when another session holds the lock.
SELECT pg_try_advisory_lock(@lock_id::bigint) AS locked;

-- name: MigrationUnlock :one
-- Releases MigrationTryLock's lock, on the same connection; false when this
-- session did not hold it.
SELECT pg_advisory_unlock(@lock_id::bigint) AS unlocked;

-- name: LeaderLeasesTableExists :one
-- Whether the lease table exists yet (the migrator takes the `migration`
-- lease row as soon as it does).
SELECT (to_regclass('leader_leases') IS NOT NULL)::boolean AS present;
