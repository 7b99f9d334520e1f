-- Admin sessions. Every time is written by the service from its clock (never
-- the database's now()), so that the idle and absolute timeouts the service
-- checks are measured on one clock.

-- name: InsertSession :one
INSERT INTO sessions (id, admin_id, user_agent, remote_addr, created_at, last_seen_at, absolute_expires_at)
VALUES (@id, @admin_id, @user_agent, @remote_addr, @created_at, @last_seen_at, @absolute_expires_at)
RETURNING *;

-- name: GetSessionWithAdmin :one
-- The session and the state of its admin (a disabled admin's sessions are
-- refused; one without a confirmed second factor may only enrol one when
-- [admin].require_2fa is on).
SELECT
    s.id,
    s.admin_id,
    s.user_agent,
    s.remote_addr,
    s.created_at,
    s.last_seen_at,
    s.absolute_expires_at,
    a.username AS admin_username,
    a.disabled_at AS admin_disabled_at,
    (a.totp_confirmed_at IS NOT NULL)::boolean AS admin_totp
FROM sessions s
JOIN admin_users a ON a.id = s.admin_id
WHERE s.id = @id;

-- name: TouchSession :execrows
-- Moves last_seen_at forward only; the service calls it at most once a
-- minute per session, so activity does not cost a write per request.
UPDATE sessions
SET last_seen_at = @last_seen_at
WHERE id = @id
  AND last_seen_at < @last_seen_at;

-- name: DeleteSession :execrows
DELETE FROM sessions
WHERE id = @id;

-- name: DeleteExpiredAdminSessions :execrows
-- Housekeeping at each login: the admin's sessions past either timeout.
DELETE FROM sessions
WHERE admin_id = @admin_id
  AND (absolute_expires_at <= @now OR last_seen_at <= @idle_before);

-- name: GetAdminByID :one
-- The admin behind a session (GetMe).
SELECT * FROM admin_users
WHERE id = @id;

-- name: SetAdminLastLogin :exec
-- A successful login.
UPDATE admin_users
SET last_login_at = @last_login_at
WHERE id = @id;
