-- The event worker's side of the queue (events.sql inserts): claim, finish,
-- retry, reclaim, the admin views, and the payment timeout scan. Queue times
-- (run_at, locked_until) are the database's now(); only the worker that holds
-- the event_worker role runs these, but every statement is safe under
-- concurrency anyway.
--
-- A claim is identified by its claim_token, a fresh random uuid per claim:
-- every statement that ends an attempt names (id, claim_token), and so does
-- the check every handler transaction starts with (HoldEventClaim), so an
-- attempt whose claim expired and was reclaimed can no longer change the
-- event nor commit work. (attempts is no such token: a released claim does
-- not count, and an admin's retry resets it to 0.)

-- name: ClaimEvents :many
-- Claims up to max_events due pending events, oldest first, and marks them
-- processing for node until now() + lease. An event is never claimed while
-- its order has another event processing or an older event still pending
-- (older: created_at, then id): the events of one order run one at a time
-- and in order, and one batch never holds two events of one order. Orders
-- in busy_orders are skipped too: the claiming process still runs a handler
-- for them (one that outlived its claim, whose event was reclaimed), and a
-- new attempt must not overlap it.
-- With leader_role, nothing is claimed unless node holds that role's
-- lease (the same fence as HoldEventClaim).
-- FOR UPDATE SKIP LOCKED: two claimers never take the same row and never
-- wait for each other.
--
-- "Oldest first" is by due time, then creation: (run_at, created_at).
-- A new event is due when it is created (run_at = created_at), so this is
-- creation order until an attempt fails; a retried event then queues by
-- the time its backoff ends. The order is events_pending_idx's, so the
-- claim walks the pending events in that index and stops after max_events
-- eligible ones, and OFFSET 0 keeps the NOT EXISTS a per-row index probe
-- (events_order_id_idx) that the planner cannot turn into a join over
-- every pending and processing event: with a backlog of thousands, each
-- claim used to read and sort all of them (milliseconds per event), and
-- ordering by created_at alone walked every done event ever written.
-- store.ClaimEvents runs it with sorting switched off, so that statistics
-- that do not know the backlog yet cannot choose a sort either.
WITH due AS (
    SELECT e.id
    FROM events AS e
    WHERE e.status = 'pending'
      AND e.run_at <= now()
      AND e.order_id <> ALL (@busy_orders::uuid[])
      -- The claimer must hold an unexpired lease of its leader role (when
      -- it names one): a node deposed before its trust window closed claims
      -- nothing. Uncorrelated, so evaluated once per claim.
      AND (sqlc.narg('leader_role')::text IS NULL OR EXISTS (
          SELECT 1
          FROM leader_leases AS l
          WHERE l.role = sqlc.narg('leader_role')::text
            AND l.holder = @node::text
            AND l.expires_at > now()
      ))
      AND NOT EXISTS (
          SELECT 1
          FROM events AS o
          WHERE o.order_id = e.order_id
            AND o.id <> e.id
            AND (o.status = 'processing'
                 OR (o.status = 'pending' AND (o.created_at, o.id) < (e.created_at, e.id)))
          OFFSET 0
      )
    ORDER BY e.run_at, e.created_at
    LIMIT @max_events::integer
    FOR UPDATE OF e SKIP LOCKED
)
UPDATE events AS ev
SET status = 'processing',
    locked_by = @node::text,
    locked_until = now() + @lease::interval,
    claim_token = gen_random_uuid(),
    attempts = ev.attempts + 1,
    updated_at = now()
FROM due
WHERE ev.id = due.id
RETURNING ev.*;

-- name: ReclaimExpiredEvents :many
-- Processing events whose claim expired (their worker died or hung): back
-- to pending, due at once, or to failed when that attempt was the last.
-- The attempt counts as made: a poison event that kills its worker cannot
-- loop forever. SKIP LOCKED: an event whose handler is committing right now
-- (HoldEventClaim holds its row until that commit) is left for the next
-- round instead of stalling the whole reclaim behind that transaction.
WITH expired AS (
    SELECT id
    FROM events
    WHERE status = 'processing'
      AND locked_until <= now()
    FOR UPDATE SKIP LOCKED
)
UPDATE events AS ev
SET status = CASE WHEN ev.attempts >= @max_attempts::integer THEN 'failed' ELSE 'pending' END,
    run_at = now(),
    last_error = 'claim of ' || coalesce(ev.locked_by, '?') || ' expired during attempt ' || ev.attempts::text,
    locked_by = NULL,
    locked_until = NULL,
    claim_token = NULL,
    updated_at = now()
FROM expired
WHERE ev.id = expired.id
RETURNING ev.id, ev.order_id, ev.event_type, ev.status, ev.attempts, ev.last_error;

-- name: HoldEventClaim :one
-- The fence every handler transaction starts with: the attempt's claim is
-- still the event's (same token, still processing), its lease has not run
-- out on the database clock, and — when the worker names its leader role —
-- the claiming node still holds an unexpired lease of that role. The row
-- stays share-locked until the transaction ends, so the reclaim cannot take
-- the event away between this check and the commit. No row: the claim is
-- lost, and the transaction must roll back.
SELECT e.id
FROM events AS e
WHERE e.id = @id
  AND e.claim_token = @claim_token
  AND e.status = 'processing'
  AND e.locked_until > now()
  AND (sqlc.narg('leader_role')::text IS NULL OR EXISTS (
      SELECT 1
      FROM leader_leases AS l
      WHERE l.role = sqlc.narg('leader_role')::text
        AND l.holder = e.locked_by
        AND l.expires_at > now()
  ))
FOR SHARE OF e;

-- name: CompleteEvent :execrows
-- The attempt succeeded. No row: the claim was lost (see the file comment).
UPDATE events
SET status = 'done',
    locked_by = NULL,
    locked_until = NULL,
    claim_token = NULL,
    updated_at = now()
WHERE id = @id
  AND status = 'processing'
  AND claim_token = @claim_token;

-- name: FailEventAttempt :one
-- The attempt failed: back to pending, due after backoff, or failed when
-- it was the max_attempts-th. Returns the new status; no row when the claim
-- was lost.
UPDATE events
SET status = CASE WHEN attempts >= @max_attempts::integer THEN 'failed' ELSE 'pending' END,
    run_at = CASE WHEN attempts >= @max_attempts::integer THEN run_at ELSE now() + @backoff::interval END,
    last_error = @last_error,
    locked_by = NULL,
    locked_until = NULL,
    claim_token = NULL,
    updated_at = now()
WHERE id = @id
  AND status = 'processing'
  AND claim_token = @claim_token
RETURNING status;

-- name: ReleaseEvent :execrows
-- The worker stopped (shutdown, lost leadership) while the attempt ran: the
-- event goes back to pending, due at once, and the attempt is not counted.
UPDATE events
SET status = 'pending',
    attempts = attempts - 1,
    run_at = now(),
    locked_by = NULL,
    locked_until = NULL,
    claim_token = NULL,
    updated_at = now()
WHERE id = @id
  AND status = 'processing'
  AND claim_token = @claim_token;

-- name: GetEvent :one
SELECT * FROM events
WHERE id = @id;

-- name: ListEvents :many
-- Admin list; every filter optional (NULL: no filter), newest first.
SELECT * FROM events
WHERE (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'))
  AND (sqlc.narg('event_type')::text IS NULL OR event_type = sqlc.narg('event_type'))
  AND (sqlc.narg('order_id')::uuid IS NULL OR order_id = sqlc.narg('order_id'))
ORDER BY created_at DESC, id DESC
LIMIT @row_limit::bigint
OFFSET @row_offset::bigint;

-- name: CountEvents :one
-- Same filters as ListEvents.
SELECT count(*) FROM events
WHERE (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'))
  AND (sqlc.narg('event_type')::text IS NULL OR event_type = sqlc.narg('event_type'))
  AND (sqlc.narg('order_id')::uuid IS NULL OR order_id = sqlc.narg('order_id'));

-- name: RetryFailedEvent :one
-- An admin's retry of a failed event: pending, due at once, with a fresh
-- set of attempts (last_error stays until the next attempt overwrites it).
-- No row when the event is not failed.
UPDATE events
SET status = 'pending',
    attempts = 0,
    run_at = now(),
    updated_at = now()
WHERE id = @id
  AND status = 'failed'
RETURNING *;

-- name: ListPendingOrdersCreatedBefore :many
-- The payment timeout scan: pending orders created before cutoff, oldest
-- first: a range of orders_pending_created_at_idx, whose predicate (never
-- paid, never cancelled) the query repeats so that the planner can use it.
SELECT id FROM orders
WHERE status = 'pending'
  AND paid_at IS NULL
  AND cancelled_at IS NULL
  AND created_at < @cutoff
ORDER BY created_at, id
LIMIT @row_limit::integer;

-- name: HoldEventClaims :one
-- HoldEventClaim for the claims of one batch (event.Event.TxAll): how many
-- of the (id, claim_token) pairs still hold, each under the same checks,
-- their rows share-locked until the transaction ends. The batch's
-- transaction commits only when every one holds (the count is the number
-- of pairs): the claims of one round were taken by one statement with one
-- lease, so they run out, or go with the leader role, together.
SELECT count(*)::integer
FROM (
    SELECT e.id
    FROM events AS e
    JOIN (SELECT unnest(@ids::uuid[]) AS id, unnest(@claim_tokens::uuid[]) AS claim_token) AS c
      ON e.id = c.id AND e.claim_token = c.claim_token
    WHERE e.status = 'processing'
      AND e.locked_until > now()
      AND (sqlc.narg('leader_role')::text IS NULL OR EXISTS (
          SELECT 1
          FROM leader_leases AS l
          WHERE l.role = sqlc.narg('leader_role')::text
            AND l.holder = e.locked_by
            AND l.expires_at > now()
      ))
    FOR SHARE OF e
) AS held;

-- name: CompleteEvents :execrows
-- CompleteEvent for the events of one batch, one statement: the rows
-- affected are the claims that still held.
UPDATE events
SET status = 'done',
    locked_by = NULL,
    locked_until = NULL,
    claim_token = NULL,
    updated_at = now()
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@claim_tokens::uuid[]) AS claim_token) AS c
WHERE events.id = c.id
  AND events.status = 'processing'
  AND events.claim_token = c.claim_token;
