-- name: InsertEvent :one
-- Call it with the transaction that made the business change (docs/api.md, "Events" 1).
-- The insert trigger sends NOTIFY paymentd_events at commit.
INSERT INTO events (event_type, payload, order_id)
VALUES (@event_type, @payload, @order_id)
RETURNING *;

-- name: ListOrderEvents :many
-- An order's events, oldest first (events_order_id_idx).
SELECT * FROM events
WHERE order_id = @order_id
ORDER BY created_at, id;

-- name: AppendEvents :exec
-- AppendEvent for a batch of events of one type, one per order, in one
-- statement: order_ids and payloads are one row per event, inserted in
-- their order (the arrays are read in step); wake_after_commit as
-- AppendEvent's.
INSERT INTO events (event_type, payload, order_id)
SELECT @event_type::text, e.payload, e.order_id
FROM (SELECT unnest(@order_ids::uuid[]) AS order_id, unnest(@payloads::jsonb[]) AS payload) AS e,
     (SELECT set_config('paymentd.wake_after_commit', @wake_after_commit::text, true)) AS w;

-- name: AppendEvent :exec
-- InsertEvent for a writer that does not read the row back: in a
-- pipelined transaction (store.WithPipelinedTx) it goes with the next
-- statement instead of waiting for a round trip of its own.
-- wake_after_commit 'on' says that paymentd wakes the worker once the
-- transaction has committed (store.WakeAfterCommit): the insert trigger
-- then sends no NOTIFY, whose lock would serialise the commits.
INSERT INTO events (event_type, payload, order_id)
SELECT @event_type::text, @payload::jsonb, @order_id::uuid
FROM (SELECT set_config('paymentd.wake_after_commit', @wake_after_commit::text, true)) AS w;
