-- The read replica's lag, asked of the replica itself every second by the
-- replica watcher (internal/replica). Never run on the primary.

-- name: ReplicaLag :one
-- in_recovery is false on a server that is not a standby (a promoted
-- replica, or [db].replica_url naming a primary). lag_seconds is 0 while
-- the standby has replayed everything it received and a WAL receiver is
-- connected (receiving nothing new then means the primary wrote nothing
-- new); otherwise the age of the last transaction replayed, by the
-- standby's clock. -1 when that is unknown: not a standby, or nothing
-- replayed since the standby started.
SELECT pg_is_in_recovery()::boolean AS in_recovery,
       coalesce(
         CASE
           WHEN NOT pg_is_in_recovery() THEN NULL
           WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn()
                AND (pg_stat_get_wal_receiver()).pid IS NOT NULL THEN 0
           ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp())
         END, -1)::float8 AS lag_seconds;
