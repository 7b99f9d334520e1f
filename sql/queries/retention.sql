-- Retention (internal/retention): what is deleted once it is no longer
-- needed, in bounded statements. Each purge statement examines at most
-- row_limit rows in index order after a cursor (created_at, id) and deletes
-- those of them that are due, so one statement holds few locks and a run
-- walks past the rows it keeps only once; it answers how many it examined
-- and deleted, and where the next statement starts. The delete names the
-- due rows' ids (ANY of an array: probes of the primary key), never a join
-- the planner could turn into a scan of the whole table per statement.

-- name: PurgeDoneEvents :one
-- Done events finished (updated_at) before before, except the types in
-- kept_types (order_paid: the ledger check's record of how each order was
-- paid). Pending, processing and failed events stay. Walks
-- events_created_at_idx backwards (oldest first); an event is finished no
-- earlier than it was created, so the walk stops at before.
WITH batch AS (
    SELECT id, created_at,
           status = 'done' AND updated_at < @before::timestamptz AND event_type <> ALL (@kept_types::text[]) AS due
    FROM events
    WHERE (created_at, id) > (@after_created_at::timestamptz, @after_id::uuid)
      AND created_at < @before::timestamptz
    ORDER BY created_at, id
    LIMIT @row_limit::integer
), gone AS (
    DELETE FROM events AS e
    WHERE e.id = ANY (ARRAY(SELECT id FROM batch WHERE due))
      AND e.status = 'done'
      AND e.updated_at < @before::timestamptz
      AND e.event_type <> ALL (@kept_types::text[])
    RETURNING 1
), last AS (
    SELECT created_at, id FROM batch ORDER BY created_at DESC, id DESC LIMIT 1
)
SELECT (SELECT count(*) FROM batch)::integer AS examined,
       (SELECT count(*) FROM gone)::integer AS deleted,
       coalesce((SELECT created_at FROM last), @after_created_at::timestamptz)::timestamptz AS last_created_at,
       coalesce((SELECT id FROM last), @after_id::uuid)::uuid AS last_id;

-- name: PurgeSentNotifications :one
-- Notifications sent before before. Pending and failed ones stay. Walks
-- notifications_created_at_idx backwards like PurgeDoneEvents.
WITH batch AS (
    SELECT id, created_at, status = 'sent' AND sent_at < @before::timestamptz AS due
    FROM notifications
    WHERE (created_at, id) > (@after_created_at::timestamptz, @after_id::uuid)
      AND created_at < @before::timestamptz
    ORDER BY created_at, id
    LIMIT @row_limit::integer
), gone AS (
    DELETE FROM notifications AS n
    WHERE n.id = ANY (ARRAY(SELECT id FROM batch WHERE due))
      AND n.status = 'sent'
      AND n.sent_at < @before::timestamptz
    RETURNING 1
), last AS (
    SELECT created_at, id FROM batch ORDER BY created_at DESC, id DESC LIMIT 1
)
SELECT (SELECT count(*) FROM batch)::integer AS examined,
       (SELECT count(*) FROM gone)::integer AS deleted,
       coalesce((SELECT created_at FROM last), @after_created_at::timestamptz)::timestamptz AS last_created_at,
       coalesce((SELECT id FROM last), @after_id::uuid)::uuid AS last_id;

-- name: CreateAuditPartitions :one
-- The audit_log months first_month .. first_month + months - 1 exist
-- afterwards (migration 00009, audit_log_create_partitions); how many were
-- created.
SELECT audit_log_create_partitions(@first_month::timestamptz, @months::integer)::integer AS created;

-- name: DropAuditPartitions :many
-- Drops the audit_log months that end at or before keep_from; their names.
SELECT part::text FROM audit_log_drop_partitions(@keep_from::timestamptz) AS part;
