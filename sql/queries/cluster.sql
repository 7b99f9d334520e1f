-- Cluster coordination beyond the election itself (leader_leases.sql): how
-- long a lease has left, the admin views of leases and nodes, node
-- heartbeats, and the wake-up a resigning leader sends. Every time is the
-- database's now(), never an instance's clock.

-- name: LeaderLeaseRemaining :one
-- The holder of a role and how long its lease has left by the database
-- clock (zero once expired). A follower sleeps that long before its next
-- bid, so an expired lease is taken over when it expires, not a renew
-- interval later.
SELECT holder,
       elected_at,
       expires_at,
       greatest(expires_at - now(), interval '0')::interval AS remaining
FROM leader_leases
WHERE role = @role;

-- name: ListLeaderLeases :many
-- Every held role for the admin view; valid is false for a lease that has
-- expired but was not taken over yet.
SELECT role,
       holder,
       elected_at,
       expires_at,
       (expires_at > now())::boolean AS valid
FROM leader_leases
ORDER BY role;

-- name: NotifyLeadershipChange :exec
-- Tells every instance (LISTEN paymentd_leadership) that a role is free, so
-- a follower bids at once instead of at its next tick. Delivered at commit.
SELECT pg_notify('paymentd_leadership', @role::text);

-- name: UpsertNodeHeartbeat :one
-- A node's heartbeat: the row is created on the first beat (started_at is
-- then) and only heartbeat_at, hostname and version move afterwards.
INSERT INTO nodes (id, hostname, version, started_at, heartbeat_at)
VALUES (@id, @hostname, @version, now(), now())
ON CONFLICT (id) DO UPDATE
    SET hostname = excluded.hostname,
        version = excluded.version,
        heartbeat_at = now()
RETURNING *;

-- name: ListNodesWithAge :many
-- Every node with the age of its last heartbeat by the database clock;
-- lost when that is older than lost_after. Newest start first.
SELECT id,
       hostname,
       version,
       started_at,
       heartbeat_at,
       (now() - heartbeat_at)::interval AS heartbeat_age,
       (heartbeat_at < now() - @lost_after::interval)::boolean AS lost
FROM nodes
ORDER BY started_at DESC, id;

-- name: DeleteNode :execrows
-- A node that stops cleanly leaves the list instead of turning "lost".
DELETE FROM nodes
WHERE id = @id;

-- name: DeleteNodesSilentFor :execrows
-- Forgets nodes whose last heartbeat is older than forget_after (every
-- restart is a new node id, so the table would otherwise only grow).
DELETE FROM nodes
WHERE heartbeat_at < now() - @forget_after::interval;
