-- name: InsertAuditLog :exec
-- before and after are JSON of the changed entity, never a secret.
INSERT INTO audit_log (actor_kind, actor_id, action, entity_type, entity_id, before, after, request_id)
VALUES (@actor_kind, @actor_id, @action, @entity_type, @entity_id, sqlc.narg('before'), sqlc.narg('after'), @request_id);
