-- Trends of the admin console's dashboard (PaymentAdminService.GetPaymentTrends):
-- day by day in an IANA time zone, computed by the database. A day is cut by
-- the zone's midnights (generate_series over local dates, each turned into
-- an instant with AT TIME ZONE, so a day of a DST change lasts 23 or 25
-- hours); first_day and last_day are local dates, both included. A row's
-- day is found by width_bucket in the sorted array of the days' first
-- instants (bounds.starts): a binary search, half the CPU of converting
-- every row's time to the zone; bucket i is first_day + i - 1. Every
-- stream is one range of an index that covers it (index-only scans:
-- docs/performance.md has the plans), grouped by day as it is read, so
-- what is joined and sorted afterwards is a few rows per day.

-- name: PaymentTrendsByCurrency :many
-- Per currency and day: the payments created, received (paid_at) and failed
-- (failed_at) that day, the amounts received, and the refunds of paid
-- payments that succeeded that day (a refund's updated_at stops moving when
-- it succeeds). Streams: payments_created_at_idx, payments_paid_at_idx,
-- payments_failed_at_idx, refunds_succeeded_at_idx. The days are a dense
-- grid: every day of the range for every currency seen, zeros where
-- nothing happened. Sums are in cents as bigint.
WITH bounds AS (
    SELECT array_agg(d AT TIME ZONE @zone::text ORDER BY d) AS starts,
           (sqlc.arg(first_day)::date)::timestamp AT TIME ZONE @zone::text AS lo,
           (sqlc.arg(last_day)::date + 1)::timestamp AT TIME ZONE @zone::text AS hi
    FROM generate_series((sqlc.arg(first_day)::date)::timestamp, (sqlc.arg(last_day)::date)::timestamp, interval '1 day') d
),
created AS (
    SELECT sqlc.arg(first_day)::date + width_bucket(p.created_at, b.starts) - 1 AS day, p.currency, count(*) AS n
    FROM payments p, bounds b
    WHERE p.created_at >= b.lo AND p.created_at < b.hi
    GROUP BY 1, 2
),
paid AS (
    SELECT sqlc.arg(first_day)::date + width_bucket(p.paid_at, b.starts) - 1 AS day, p.currency, count(*) AS n, sum(p.amount) AS amount
    FROM payments p, bounds b
    WHERE p.paid_at >= b.lo AND p.paid_at < b.hi
    GROUP BY 1, 2
),
failed AS (
    SELECT sqlc.arg(first_day)::date + width_bucket(p.failed_at, b.starts) - 1 AS day, p.currency, count(*) AS n
    FROM payments p, bounds b
    WHERE p.failed_at >= b.lo AND p.failed_at < b.hi
    GROUP BY 1, 2
),
refunded AS (
    SELECT sqlc.arg(first_day)::date + width_bucket(r.updated_at, b.starts) - 1 AS day, p.currency, sum(r.amount) AS amount
    FROM refunds r JOIN payments p ON p.id = r.payment_id, bounds b
    WHERE r.status = 'succeeded' AND r.updated_at >= b.lo AND r.updated_at < b.hi
      AND p.status IN ('success', 'refunded')
    GROUP BY 1, 2
),
per_day AS (
    SELECT day, currency,
           sum(created) AS created, sum(succeeded) AS succeeded, sum(failed) AS failed,
           sum(received) AS received, sum(refunded) AS refunded
    FROM (
        SELECT day, currency, n AS created, 0 AS succeeded, 0 AS failed, 0 AS received, 0 AS refunded FROM created
        UNION ALL SELECT day, currency, 0, n, 0, amount, 0 FROM paid
        UNION ALL SELECT day, currency, 0, 0, n, 0, 0 FROM failed
        UNION ALL SELECT day, currency, 0, 0, 0, 0, amount FROM refunded
    ) happened
    GROUP BY day, currency
),
days AS (
    SELECT d::date AS day
    FROM generate_series((sqlc.arg(first_day)::date)::timestamp, (sqlc.arg(last_day)::date)::timestamp, interval '1 day') d
)
SELECT days.day::date AS day, c.currency::text AS currency,
       coalesce(a.created, 0)::bigint AS created, coalesce(a.succeeded, 0)::bigint AS succeeded,
       coalesce(a.failed, 0)::bigint AS failed,
       (coalesce(a.received, 0) * 100)::bigint AS received_cents, (coalesce(a.refunded, 0) * 100)::bigint AS refunded_cents
FROM (SELECT DISTINCT currency FROM per_day) c
CROSS JOIN days
LEFT JOIN per_day a ON a.currency = c.currency AND a.day = days.day
ORDER BY c.currency, days.day;

-- name: PaymentTrendsByGateway :many
-- Per gateway interface, the payments created through it in the range (a
-- range of payments_created_at_idx, which covers it), counted by their
-- status now: how many, how many succeeded and failed, and the median
-- seconds from creation to success of those that succeeded (0 when none
-- did: a succeeded payment is exactly one with paid_at). Grouped by the
-- gateway's id before its name is looked up. Balance payments have no
-- gateway.
WITH bounds AS (
    SELECT array_agg(d AT TIME ZONE @zone::text ORDER BY d) AS starts,
           (sqlc.arg(first_day)::date)::timestamp AT TIME ZONE @zone::text AS lo,
           (sqlc.arg(last_day)::date + 1)::timestamp AT TIME ZONE @zone::text AS hi
    FROM generate_series((sqlc.arg(first_day)::date)::timestamp, (sqlc.arg(last_day)::date)::timestamp, interval '1 day') d
),
per_gateway AS (
    SELECT p.gateway_interface_id AS gateway,
           count(*) AS created,
           count(*) FILTER (WHERE p.status IN ('success', 'refunded')) AS succeeded,
           count(*) FILTER (WHERE p.status = 'failed') AS failed,
           percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM p.paid_at - p.created_at))
               FILTER (WHERE p.paid_at IS NOT NULL) AS median_seconds
    FROM payments p, bounds b
    WHERE p.created_at >= b.lo AND p.created_at < b.hi AND p.gateway_interface_id IS NOT NULL
    GROUP BY p.gateway_interface_id
)
SELECT g.id, g.display_name, a.created, a.succeeded, a.failed,
       coalesce(a.median_seconds, 0)::float8 AS median_seconds
FROM per_gateway a
JOIN gateway_interfaces g ON g.id = a.gateway
ORDER BY g.display_name, g.id;

-- name: PaymentTrendsByGatewayDay :many
-- Per gateway interface and day of creation: the payments created through
-- it that day and, by their status now, how many succeeded and failed. A
-- dense grid like PaymentTrendsByCurrency's, for the gateways with payments
-- in the range.
WITH bounds AS (
    SELECT array_agg(d AT TIME ZONE @zone::text ORDER BY d) AS starts,
           (sqlc.arg(first_day)::date)::timestamp AT TIME ZONE @zone::text AS lo,
           (sqlc.arg(last_day)::date + 1)::timestamp AT TIME ZONE @zone::text AS hi
    FROM generate_series((sqlc.arg(first_day)::date)::timestamp, (sqlc.arg(last_day)::date)::timestamp, interval '1 day') d
),
per_day AS (
    SELECT p.gateway_interface_id AS gateway, sqlc.arg(first_day)::date + width_bucket(p.created_at, b.starts) - 1 AS day,
           count(*) AS created,
           count(*) FILTER (WHERE p.status IN ('success', 'refunded')) AS succeeded,
           count(*) FILTER (WHERE p.status = 'failed') AS failed
    FROM payments p, bounds b
    WHERE p.created_at >= b.lo AND p.created_at < b.hi AND p.gateway_interface_id IS NOT NULL
    GROUP BY 1, 2
),
days AS (
    SELECT d::date AS day
    FROM generate_series((sqlc.arg(first_day)::date)::timestamp, (sqlc.arg(last_day)::date)::timestamp, interval '1 day') d
)
SELECT g.gateway::uuid AS gateway_interface_id, days.day::date AS day,
       coalesce(a.created, 0)::bigint AS created, coalesce(a.succeeded, 0)::bigint AS succeeded,
       coalesce(a.failed, 0)::bigint AS failed
FROM (SELECT DISTINCT gateway FROM per_day) g
CROSS JOIN days
LEFT JOIN per_day a ON a.gateway = g.gateway AND a.day = days.day
ORDER BY g.gateway, days.day;
