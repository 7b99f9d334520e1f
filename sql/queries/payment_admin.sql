-- Admin reads behind the console's payment page (PaymentAdminService).

-- name: ListRefundsNewestFirst :many
-- A payment's refunds, newest first (refunds_payment_id_idx).
SELECT * FROM refunds
WHERE payment_id = @payment_id
ORDER BY created_at DESC, id DESC;

-- name: ListAuditEntries :many
-- One entity's audit log, newest first (audit_log_entity_idx); id breaks
-- ties between rows written in one transaction (same now()).
SELECT * FROM audit_log
WHERE entity_type = @entity_type
  AND entity_id = @entity_id
ORDER BY created_at DESC, id DESC
LIMIT @row_limit::bigint OFFSET @row_offset::bigint;

-- name: CountAuditEntries :one
SELECT count(*) FROM audit_log
WHERE entity_type = @entity_type
  AND entity_id = @entity_id;
