-- name: EventQueueStats :many
-- For the Prometheus collector (internal/metrics), run on scrape with a
-- short timeout and cached briefly, never in a request.
-- Events not yet done, by type and status, with the age of the oldest on
-- the database clock. Done events are left out: they are history, not a
-- queue.
SELECT event_type,
       status,
       count(*)::bigint AS events,
       extract(epoch FROM now() - min(created_at))::float8 AS oldest_age_seconds
FROM events
WHERE status IN ('pending', 'processing', 'failed')
GROUP BY event_type, status;

-- name: NotificationQueueStats :many
-- Notifications not yet sent, by channel and status, with the age of the
-- oldest.
SELECT channel,
       status,
       count(*)::bigint AS notifications,
       extract(epoch FROM now() - min(created_at))::float8 AS oldest_age_seconds
FROM notifications
WHERE status IN ('pending', 'failed')
GROUP BY channel, status;

-- name: PendingRefundStats :one
-- Refunds waiting for the gateway or for an admin (ResolveRefund): how
-- many, and the age of the oldest (the pending range of
-- refunds_status_created_at_idx).
SELECT count(*)::bigint AS refunds,
       coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS oldest_age_seconds
FROM refunds
WHERE status = 'pending';

-- name: SyncReplicationWaits :one
-- Backends of this database whose COMMIT waits for a synchronous standby
-- to confirm it (wait_event SyncRep), and how long the oldest has waited
-- (since its statement began). A primary whose synchronous_standby_names
-- names a standby that is gone, a promoted standby that kept the old
-- primary's setting, waits forever: every write hangs.
SELECT count(*)::bigint AS waiting,
       coalesce(extract(epoch FROM now() - min(query_start)), 0)::float8 AS oldest_wait_seconds
FROM pg_catalog.pg_stat_activity
WHERE datname = current_database()
  AND wait_event_type = 'IPC'
  AND wait_event = 'SyncRep';
