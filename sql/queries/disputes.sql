-- Disputes (chargebacks) of payments, moved by the gateway's notifications
-- under the payment's lock.

-- name: GetDisputeByGatewayID :one
SELECT * FROM disputes
WHERE gateway_interface_id = @gateway_interface_id
  AND gateway_dispute_id = @gateway_dispute_id;

-- name: InsertDispute :one
INSERT INTO disputes (payment_id, gateway_interface_id, gateway_dispute_id, amount, currency, reason, status, evidence_due_by, created_at, updated_at)
VALUES (@payment_id, @gateway_interface_id, @gateway_dispute_id, @amount, @currency, @reason, @status, sqlc.narg('evidence_due_by'), @created_at, @created_at)
RETURNING *;

-- name: UpdateDispute :one
UPDATE disputes
SET status = @status,
    amount = @amount,
    reason = @reason,
    evidence_due_by = sqlc.narg('evidence_due_by'),
    refund_id = coalesce(sqlc.narg('refund_id'), refund_id),
    updated_at = @updated_at
WHERE id = @id
RETURNING *;

-- name: FindGatewayPaymentByTxID :many
-- The payments of an interface that carry a gateway transaction id (Stripe:
-- the PaymentIntent a dispute names); at most one in practice.
SELECT * FROM payments
WHERE gateway_interface_id = @gateway_interface_id
  AND gateway_tx_id = @gateway_tx_id
  AND gateway_tx_id <> ''
LIMIT 2;

-- name: ListDisputes :many
-- The disputes, the nearest evidence deadline first (none last), with the
-- payment's order and customer for the console's links.
SELECT d.*, p.order_id, p.invoice_id, p.customer_id
FROM disputes d
JOIN payments p ON p.id = d.payment_id
WHERE (sqlc.narg('status')::text IS NULL OR d.status = sqlc.narg('status'))
ORDER BY d.evidence_due_by ASC NULLS LAST, d.id
LIMIT @row_limit;

-- name: DisputeAuditExists :one
-- Whether a dispute (by the gateway's id) already has an audit row of this
-- action whose after->>'fingerprint' is fingerprint: an anomaly about a
-- payment nobody knows is recorded once however often it is delivered.
SELECT EXISTS (
    SELECT 1 FROM audit_log
    WHERE entity_type = 'dispute'
      AND entity_id = @entity_id::text
      AND action = @action
      AND after->>'fingerprint' = @fingerprint::text
);

-- name: LockDisputeReport :exec
-- Serialises the reports about one gateway dispute whose payment is
-- unknown (no row to lock), for the length of the transaction.
SELECT pg_advisory_xact_lock(hashtext('dispute:' || @gateway_dispute_id::text));

-- name: OpenDisputesOfOrder :one
-- How many disputes of the order's payments other than except_id are
-- still open (not won, lost, or closed without a chargeback).
SELECT count(*) FROM disputes d JOIN payments p ON p.id = d.payment_id
WHERE p.order_id = @order_id
  AND d.id <> @except_id
  AND d.status NOT IN ('won', 'lost', 'warning_closed');
