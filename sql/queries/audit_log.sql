-- name: InsertAuditLog :exec
-- One audit_log row: who (actor), what (action on entity), before and after
-- as JSON of the changed entity (never a secret), when by the writer's clock.
INSERT INTO audit_log (actor_kind, actor_id, action, entity_type, entity_id, before, after, request_id, created_at)
VALUES (@actor_kind, @actor_id, @action, @entity_type, @entity_id, sqlc.narg('before'), sqlc.narg('after'), @request_id, @created_at);

-- name: AuditActionExists :one
-- Whether any row records action (audit_log_action_idx): a durable mark
-- that a one-time pass was done (secretpass: the orders' copies sealed).
SELECT EXISTS (SELECT 1 FROM audit_log WHERE action = @action)::boolean;

-- name: InsertAuditLogs :exec
-- InsertAuditLog of several rows, in the order given (the arrays are read
-- in step, element by element): a pipelined transaction's audit rows that
-- wait for the same batch go as one statement (store.WithPipelinedTx).
INSERT INTO audit_log (actor_kind, actor_id, action, entity_type, entity_id, before, after, request_id, created_at)
SELECT r.actor_kind, r.actor_id, r.action, r.entity_type, r.entity_id, r.before, r.after, r.request_id, r.created_at
FROM (SELECT unnest(@actor_kinds::text[]) AS actor_kind, unnest(@actor_ids::text[]) AS actor_id,
             unnest(@actions::text[]) AS action, unnest(@entity_types::text[]) AS entity_type,
             unnest(@entity_ids::text[]) AS entity_id, unnest(@befores::jsonb[]) AS before,
             unnest(@afters::jsonb[]) AS after, unnest(@request_ids::text[]) AS request_id,
             unnest(@created_ats::timestamptz[]) AS created_at) AS r;
