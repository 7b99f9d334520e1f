#!/usr/bin/env bash
# The cost of the callback's UPDATEs on a given schema (issue 20, 3.3).
#
#   bench/update-cost/run.sh SERVER_URL MIGRATIONS_DIR NAME
#
# Creates database NAME on the server (dropped first), applies the Up
# sections of MIGRATIONS_DIR/*.sql, seeds it (seed.sql: HISTORY settled
# orders and payments, PENDING pending ones), then runs, with pgbench
# (8 clients, prepared statements, -r for each statement's latency):
#   settle.pgbench  the settlement UPDATE of payments and the order's
#                   pending → paid, PER_CLIENT settlements a client;
#   fulfil.pgbench  the worker's paid → provisioning → active of the same
#                   orders.
# and prints n_tup_upd and n_tup_hot_upd of payments and orders for the
# burst (pg_stat_user_tables, counters reset after the seed), and the WAL
# each phase wrote per transaction (pg_current_wal_lsn around it; run it on
# a server nothing else writes to). The HOT ratio and the WAL bytes do not
# depend on the machine; the latencies do.
set -euo pipefail
server=$1 migrations=$2 name=$3
HISTORY=${HISTORY:-200000} PENDING=${PENDING:-40000} PER_CLIENT=${PER_CLIENT:-4000} CLIENTS=${CLIENTS:-8}
here=$(cd "$(dirname "$0")" && pwd)
db=$(printf '%s' "$server" | sed -E "s#/[^/?]*(\?|$)#/$name\1#")

psql -q -v ON_ERROR_STOP=1 "$server" -c "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name"
for f in "$migrations"/*.sql; do
	# The Up section, without goose's annotations.
	sed -n '/^-- +goose Up/,/^-- +goose Down/p' "$f" | grep -v '^-- +goose' | psql -q -v ON_ERROR_STOP=1 "$db" >/dev/null
done
psql -q -v ON_ERROR_STOP=1 -v history="$HISTORY" -v pending="$PENDING" "$db" -f "$here/seed.sql"
psql -q -v ON_ERROR_STOP=1 "$db" -c "SELECT pg_stat_reset()"

base=$HISTORY
lsn() { psql -qAt "$db" -c "SELECT pg_current_wal_lsn()"; }
wal() { # bytes of WAL between two LSNs, per transaction
	psql -qAt "$db" -c "SELECT 'WAL bytes per transaction: ' || round(pg_wal_lsn_diff('$2', '$1') / ($CLIENTS * $PER_CLIENT))"
}
psql -q "$db" -c CHECKPOINT
l0=$(lsn)
pgbench -n -M prepared -r -c "$CLIENTS" -j 2 -t "$PER_CLIENT" -D k=0 -D base="$base" -D nclients="$CLIENTS" \
	-f "$here/settle.pgbench" "$db" 2>&1 | grep -E 'tps|latency average|UPDATE|number of failed'
l1=$(lsn)
wal "$l0" "$l1"
sleep 1
psql -q "$db" -c "SELECT relname, n_tup_upd, n_tup_hot_upd, round(100.0 * n_tup_hot_upd / nullif(n_tup_upd, 0), 1) AS hot_pct
	FROM pg_stat_user_tables WHERE relname IN ('payments', 'orders') ORDER BY relname"
psql -q "$db" -c CHECKPOINT
l2=$(lsn)
pgbench -n -M prepared -r -c "$CLIENTS" -j 2 -t "$PER_CLIENT" -D k=0 -D base="$base" -D nclients="$CLIENTS" \
	-f "$here/fulfil.pgbench" "$db" 2>&1 | grep -E 'tps|latency average|UPDATE|number of failed'
l3=$(lsn)
wal "$l2" "$l3"
sleep 1
psql -q "$db" -c "SELECT relname, n_tup_upd, n_tup_hot_upd, round(100.0 * n_tup_hot_upd / nullif(n_tup_upd, 0), 1) AS hot_pct
	FROM pg_stat_user_tables WHERE relname IN ('payments', 'orders') ORDER BY relname" \
	-c "SELECT count(*) FILTER (WHERE status = 'success') AS settled FROM payments WHERE created_at IS NOT NULL" \
	-c "SELECT indexrelname, idx_scan, pg_size_pretty(pg_relation_size(indexrelid)) AS size FROM pg_stat_user_indexes WHERE relname IN ('payments', 'orders') ORDER BY relname, indexrelname"
