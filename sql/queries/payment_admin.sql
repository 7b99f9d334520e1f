-- Admin reads behind the console (PaymentAdminService): a payment's refunds
-- and audit log, and the refunds of every payment.

-- name: ListPaymentRefundsNewestFirst :many
-- A payment's refunds, newest first (refunds_payment_id_idx), in one status
-- when status is not NULL. A NULL row_limit is LIMIT ALL: every refund of
-- the payment, which is what a caller that sends no paging gets.
SELECT * FROM refunds
WHERE payment_id = @payment_id
  AND (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'))
ORDER BY created_at DESC, id DESC
LIMIT sqlc.narg('row_limit')::bigint OFFSET @row_offset::bigint;

-- name: CountPaymentRefunds :one
-- Same filter as ListPaymentRefundsNewestFirst.
SELECT count(*) FROM refunds
WHERE payment_id = @payment_id
  AND (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'));

-- name: ListRefundsNewestFirst :many
-- One page of every payment's refunds, newest first, with the payment's
-- currency: read in refunds_created_at_idx order, each row joined to its
-- payment by primary key, so a page costs its own rows (and the offset's).
SELECT sqlc.embed(refunds), payments.currency
FROM refunds
JOIN payments ON payments.id = refunds.payment_id
ORDER BY refunds.created_at DESC, refunds.id DESC
LIMIT @row_limit::bigint OFFSET @row_offset::bigint;

-- name: CountRefunds :one
SELECT count(*) FROM refunds;

-- name: ListRefundsInStatusNewestFirst :many
-- One page of every payment's refunds in one status, newest first, with the
-- payment's currency: a range of refunds_status_created_at_idx. A separate
-- statement rather than an optional filter of the one above, so that even
-- a generic plan of a prepared statement reads the status's range alone.
SELECT sqlc.embed(refunds), payments.currency
FROM refunds
JOIN payments ON payments.id = refunds.payment_id
WHERE refunds.status = @status
ORDER BY refunds.created_at DESC, refunds.id DESC
LIMIT @row_limit::bigint OFFSET @row_offset::bigint;

-- name: CountRefundsInStatus :one
-- The refunds in one status (refunds_status_created_at_idx).
SELECT count(*) FROM refunds
WHERE status = @status;

-- name: ListAuditEntries :many
-- A page of the audit log, newest first; every filter is optional (NULL:
-- no filter). id breaks ties between rows written in one transaction (same
-- now()). One entity's log reads audit_log_entity_idx; an actor's
-- audit_log_actor_idx; an action's audit_log_action_idx; the whole log
-- audit_log_created_at_idx. excluded_actions leaves those actions out
-- (the console's "hide logins"). actor_name is who acted, by name, looked
-- up by primary key for the page's rows alone: an admin's username, an API
-- key's name (an admin's key, else a customer's), a customer's e-mail, a
-- gateway interface's display name; '' for the system, or when the actor
-- is gone. The guard on actor_id keeps a malformed id from failing the
-- cast.
SELECT sqlc.embed(audit_log), COALESCE(CASE
    WHEN audit_log.actor_id !~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' THEN NULL
    WHEN audit_log.actor_kind = 'admin' THEN
      (SELECT admin_users.username FROM admin_users WHERE admin_users.id = audit_log.actor_id::uuid)
    WHEN audit_log.actor_kind = 'api_key' THEN COALESCE(
      (SELECT admin_api_keys.name FROM admin_api_keys WHERE admin_api_keys.id = audit_log.actor_id::uuid),
      (SELECT api_keys.name FROM api_keys WHERE api_keys.id = audit_log.actor_id::uuid))
    WHEN audit_log.actor_kind = 'customer' THEN
      (SELECT customers.email FROM customers WHERE customers.id = audit_log.actor_id::uuid)
    WHEN audit_log.actor_kind = 'gateway' THEN
      (SELECT gateway_interfaces.display_name FROM gateway_interfaces WHERE gateway_interfaces.id = audit_log.actor_id::uuid)
  END, '')::text AS actor_name
FROM audit_log
WHERE (sqlc.narg('entity_type')::text IS NULL OR audit_log.entity_type = sqlc.narg('entity_type'))
  AND (sqlc.narg('entity_id')::text IS NULL OR audit_log.entity_id = sqlc.narg('entity_id'))
  AND (sqlc.narg('actor_kind')::text IS NULL OR audit_log.actor_kind = sqlc.narg('actor_kind'))
  AND (sqlc.narg('actor_id')::text IS NULL OR audit_log.actor_id = sqlc.narg('actor_id'))
  AND (sqlc.narg('action')::text IS NULL OR audit_log.action = sqlc.narg('action'))
  AND (sqlc.narg('excluded_actions')::text[] IS NULL OR audit_log.action <> ALL (sqlc.narg('excluded_actions')::text[]))
ORDER BY audit_log.created_at DESC, audit_log.id DESC
LIMIT @row_limit::bigint OFFSET @row_offset::bigint;

-- name: CountAuditEntries :one
-- Same filters as ListAuditEntries.
SELECT count(*) FROM audit_log
WHERE (sqlc.narg('entity_type')::text IS NULL OR entity_type = sqlc.narg('entity_type'))
  AND (sqlc.narg('entity_id')::text IS NULL OR entity_id = sqlc.narg('entity_id'))
  AND (sqlc.narg('actor_kind')::text IS NULL OR actor_kind = sqlc.narg('actor_kind'))
  AND (sqlc.narg('actor_id')::text IS NULL OR actor_id = sqlc.narg('actor_id'))
  AND (sqlc.narg('action')::text IS NULL OR action = sqlc.narg('action'))
  AND (sqlc.narg('excluded_actions')::text[] IS NULL OR action <> ALL (sqlc.narg('excluded_actions')::text[]));
