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
-- Serialises the writers of admin accounts that count them (the bootstrap
-- of the first admin across instances starting at once, the disabling of
-- an admin) until the transaction ends: run it in one. Readers are not
-- blocked, a second locker waits for the commit.
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

-- name: StartAdminTotp :execrows
-- A pending enrolment's secret (sealed), replacing an earlier pending one;
-- no row when the admin's 2FA is confirmed already.
UPDATE admin_users
SET totp_secret = @totp_secret,
    totp_confirmed_at = NULL,
    totp_last_step = 0,
    updated_at = @updated_at
WHERE id = @id
  AND totp_confirmed_at IS NULL;

-- name: ConfirmAdminTotp :execrows
-- Confirms the pending enrolment whose first code was of step; no row when
-- there is none (or it was confirmed meanwhile).
UPDATE admin_users
SET totp_confirmed_at = @updated_at,
    totp_last_step = @step,
    updated_at = @updated_at
WHERE id = @id
  AND totp_secret = @totp_secret
  AND totp_confirmed_at IS NULL;

-- name: UseAdminTotpStep :execrows
-- Accepts a code of step once: no row when a code of this step or a later
-- one was accepted already (a replay). A right code ends the run of wrong
-- ones.
UPDATE admin_users
SET totp_last_step = @step,
    totp_failures = 0,
    totp_locked_until = NULL
WHERE id = @id
  AND totp_confirmed_at IS NOT NULL
  AND totp_last_step < @step;

-- name: LockAdminSecondFactor :one
-- The admin's run of wrong second-factor codes, the row locked until the
-- transaction ends, so that attempts racing on every instance are counted
-- one after the other (store.CountAdminSecondFactorAttempt).
SELECT totp_failures, totp_locked_until, (totp_confirmed_at IS NOT NULL)::boolean AS confirmed
FROM admin_users
WHERE id = @id
FOR UPDATE;

-- name: SetAdminSecondFactorFailures :exec
UPDATE admin_users
SET totp_failures = @failures,
    totp_locked_until = sqlc.narg('locked_until')
WHERE id = @id;

-- name: ResetAdminSecondFactorFailures :execrows
-- A right recovery code, or an operator (paymentd admin unlock-2fa), ends
-- the run of wrong codes and any lock; no row when there was none.
UPDATE admin_users
SET totp_failures = 0,
    totp_locked_until = NULL
WHERE id = @id
  AND (totp_failures > 0 OR totp_locked_until IS NOT NULL);

-- name: ClearAdminTotp :execrows
-- Removes an admin's 2FA, pending or confirmed (no row when there was
-- none), and with it their recovery codes (DeleteAdminRecoveryCodes).
UPDATE admin_users
SET totp_secret = NULL,
    totp_confirmed_at = NULL,
    totp_last_step = 0,
    totp_failures = 0,
    totp_locked_until = NULL,
    updated_at = @updated_at
WHERE id = @id
  AND totp_secret IS NOT NULL;

-- name: DeleteAdminRecoveryCodes :exec
DELETE FROM admin_recovery_codes
WHERE admin_id = @admin_id;

-- name: InsertAdminRecoveryCode :exec
INSERT INTO admin_recovery_codes (admin_id, code_hash, created_at)
VALUES (@admin_id, @code_hash, @created_at);

-- name: UseAdminRecoveryCode :execrows
-- Spends a recovery code: no row when it is unknown or spent.
UPDATE admin_recovery_codes
SET used_at = @used_at
WHERE admin_id = @admin_id
  AND code_hash = @code_hash
  AND used_at IS NULL;

-- name: CountAdminRecoveryCodesLeft :one
-- The admin's unspent recovery codes.
SELECT count(*) FROM admin_recovery_codes
WHERE admin_id = @admin_id
  AND used_at IS NULL;

-- name: AdminUsernames :many
-- The usernames of the admins with these ids (a list's "requested by");
-- an id of no admin is left out.
SELECT id, username FROM admin_users
WHERE id = ANY(@ids::uuid[]);
