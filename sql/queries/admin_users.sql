-- name: CountAdmins :one
-- Used at start: the [bootstrap] admin is created only when this is 0.
SELECT count(*) FROM admin_users;

-- name: CreateAdmin :one
INSERT INTO admin_users (username, password_hash, display_name)
VALUES (@username, @password_hash, @display_name)
RETURNING *;

-- name: GetAdminByUsername :one
SELECT * FROM admin_users
WHERE username = @username;

-- name: LockAdminUsers :exec
-- Serialises the bootstrap of the first admin across instances starting at
-- once: readers are not blocked, a second locker waits for the commit.
LOCK TABLE admin_users IN SHARE ROW EXCLUSIVE MODE;

-- name: SetAdminPassword :one
-- `paymentd admin reset-password`: a new hash. A disabled admin stays
-- disabled.
UPDATE admin_users
SET password_hash = @password_hash,
    updated_at = now()
WHERE username = @username
RETURNING *;

-- name: DeleteAdminSessions :execrows
-- Every session of an admin: after a password reset, whoever held the old
-- password is logged out too.
DELETE FROM sessions
WHERE admin_id = @admin_id;
