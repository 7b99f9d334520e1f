-- name: InsertAuditLog :exec
-- One audit_log row: who (actor), what (action on entity), before and after
-- as JSON of the changed entity (never a secret), when by the writer's clock.
INSERT INTO audit_log (actor_kind, actor_id, action, entity_type, entity_id, before, after, request_id, created_at)
VALUES (@actor_kind, @actor_id, @action, @entity_type, @entity_id, sqlc.narg('before'), sqlc.narg('after'), @request_id, @created_at);

-- name: AuditActionExists :one
-- Whether any row records action (audit_log_action_idx): a durable mark
-- that a one-time pass was done (secretpass: the orders' copies sealed).
SELECT EXISTS (SELECT 1 FROM audit_log WHERE action = @action)::boolean;
