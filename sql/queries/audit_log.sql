-- name: InsertAuditLog :exec
-- One audit_log row: who (actor), what (action on entity), before and after
-- as JSON of the changed entity (never a secret), when by the writer's clock.
INSERT INTO audit_log (actor_kind, actor_id, action, entity_type, entity_id, before, after, request_id, created_at)
VALUES (@actor_kind, @actor_id, @action, @entity_type, @entity_id, sqlc.narg('before'), sqlc.narg('after'), @request_id, @created_at);
