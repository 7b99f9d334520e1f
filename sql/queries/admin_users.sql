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

-- name: DeleteAdminSessions :many
-- Every session of an admin: after a password reset or change, whoever held
-- the old password is logged out too. The ids let the caller drop the
-- sessions from the shared cache as well.
DELETE FROM sessions
WHERE admin_id = @admin_id
RETURNING id;

-- name: ChangeAdminPassword :one
-- A new hash, only while the stored one is still old_hash (no row,
-- store.ErrNotFound, when it changed meanwhile).
UPDATE admin_users
SET password_hash = @new_hash,
    updated_at = @updated_at
WHERE id = @id
  AND password_hash = @old_hash
RETURNING *;

-- name: CountEnabledAdmins :one
-- The last enabled admin is not disabled: run under LockAdminUsers, so two
-- admins disabled at once cannot both be "not the last".
SELECT count(*) FROM admin_users
WHERE disabled_at IS NULL;

-- name: SetAdminDisabledAt :one
-- `paymentd admin disable` (a time) and `enable` (NULL).
UPDATE admin_users
SET disabled_at = sqlc.narg('disabled_at'),
    updated_at = @updated_at
WHERE id = @id
RETURNING *;
