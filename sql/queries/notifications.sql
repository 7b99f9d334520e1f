-- Outgoing notifications: queued by the event handlers in their
-- transaction, delivered by the notify sender with retries. Queue times are
-- the database's now(). A claim is identified by (id, attempts).

-- name: InsertNotifications :one
-- Queues the notifications of one event (the i-th recipient, channel,
-- subject and body of the arrays are one), and wakes the senders (LISTEN
-- paymentd_notifications) at commit when any was new: one statement, one
-- round trip. A retried event handler inserts nothing twice
-- (notifications_event_recipient_key): those rows are skipped, and not
-- counted in inserted.
WITH inserted_rows AS (
    INSERT INTO notifications (event_id, recipient, channel, subject, body)
    SELECT sqlc.narg('event_id')::uuid, n.recipient, n.channel, n.subject, n.body
    FROM (SELECT unnest(@recipients::text[]) AS recipient, unnest(@channels::text[]) AS channel,
                 unnest(@subjects::text[]) AS subject, unnest(@bodies::text[]) AS body) AS n
    ON CONFLICT (event_id, channel, recipient) DO NOTHING
    RETURNING 1
), counted AS (
    SELECT count(*)::integer AS inserted FROM inserted_rows
)
SELECT counted.inserted,
       (SELECT count(*) FROM (SELECT pg_notify('paymentd_notifications', '')
                              WHERE counted.inserted > 0) AS woken)::integer AS woken
FROM counted;

-- name: ClaimNotifications :many
-- Claims up to max_rows due pending notifications, oldest due first: one
-- attempt more, and next_attempt_at pushed lease ahead, so a sender that
-- dies mid-send leaves the row due again later (delivery is at least once;
-- receivers de-duplicate on the notification id).
WITH due AS (
    SELECT id
    FROM notifications
    WHERE status = 'pending'
      AND next_attempt_at <= now()
    ORDER BY next_attempt_at, created_at, id
    LIMIT @max_rows::integer
    FOR UPDATE SKIP LOCKED
)
UPDATE notifications AS n
SET attempts = n.attempts + 1,
    next_attempt_at = now() + @lease::interval,
    updated_at = now()
FROM due
WHERE n.id = due.id
RETURNING n.*;

-- name: MarkNotificationSent :execrows
UPDATE notifications
SET status = 'sent',
    sent_at = now(),
    last_error = '',
    updated_at = now()
WHERE id = @id
  AND status = 'pending'
  AND attempts = @attempts;

-- name: MarkNotificationAttemptFailed :one
-- A failed send: pending again after backoff, or failed when it cannot
-- succeed (give_up) or was the max_attempts-th. No row when the claim was
-- lost.
UPDATE notifications
SET status = CASE WHEN @give_up::boolean OR attempts >= @max_attempts::integer THEN 'failed' ELSE 'pending' END,
    next_attempt_at = now() + @backoff::interval,
    last_error = @last_error,
    updated_at = now()
WHERE id = @id
  AND status = 'pending'
  AND attempts = @attempts
RETURNING status;

-- name: ListNotifications :many
-- Admin list; every filter optional (NULL: no filter), newest first.
SELECT * FROM notifications
WHERE (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'))
  AND (sqlc.narg('channel')::text IS NULL OR channel = sqlc.narg('channel'))
  AND (sqlc.narg('event_id')::uuid IS NULL OR event_id = sqlc.narg('event_id'))
ORDER BY created_at DESC, id DESC
LIMIT @row_limit::bigint
OFFSET @row_offset::bigint;

-- name: CountNotifications :one
-- Same filters as ListNotifications.
SELECT count(*) FROM notifications
WHERE (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'))
  AND (sqlc.narg('channel')::text IS NULL OR channel = sqlc.narg('channel'))
  AND (sqlc.narg('event_id')::uuid IS NULL OR event_id = sqlc.narg('event_id'));
