-- Trends of the admin console's dashboard (PaymentAdminService.GetPaymentTrends):
-- day by day in an IANA time zone, computed by the database. A day is cut by
-- the zone's midnights (generate_series over local dates, each turned into
-- an instant with AT TIME ZONE, so a day of a DST change lasts 23 or 25
-- hours); first_day and last_day are local dates, both included.

-- name: PaymentTrendsByCurrency :many
-- Per currency and day: the payments created, received (paid_at) and failed
-- (failed_at) that day, the amounts received, and the refunds of paid
-- payments that succeeded that day (a refund's updated_at stops moving when
-- it succeeds). Each stream is a range of its own index over the whole
-- range's instants (payments_created_at_idx, payments_paid_at_idx,
-- payments_failed_at_idx, refunds_succeeded_at_idx); the days are a dense
-- grid: every day of the range for every currency seen, zeros where
-- nothing happened. Sums are in cents as bigint.
WITH bounds AS (
    SELECT (sqlc.arg(first_day)::date)::timestamp AT TIME ZONE @zone::text AS lo,
           (sqlc.arg(last_day)::date + 1)::timestamp AT TIME ZONE @zone::text AS hi
),
happened AS (
    SELECT (p.created_at AT TIME ZONE @zone::text)::date AS day, p.currency,
           1 AS created, 0 AS succeeded, 0 AS failed, 0::numeric AS received, 0::numeric AS refunded
    FROM payments p, bounds b
    WHERE p.created_at >= b.lo AND p.created_at < b.hi
    UNION ALL
    SELECT (p.paid_at AT TIME ZONE @zone::text)::date, p.currency, 0, 1, 0, p.amount, 0
    FROM payments p, bounds b
    WHERE p.paid_at >= b.lo AND p.paid_at < b.hi
    UNION ALL
    SELECT (p.failed_at AT TIME ZONE @zone::text)::date, p.currency, 0, 0, 1, 0, 0
    FROM payments p, bounds b
    WHERE p.failed_at >= b.lo AND p.failed_at < b.hi
    UNION ALL
    SELECT (r.updated_at AT TIME ZONE @zone::text)::date, p.currency, 0, 0, 0, 0, r.amount
    FROM refunds r JOIN payments p ON p.id = r.payment_id, bounds b
    WHERE r.status = 'succeeded' AND r.updated_at >= b.lo AND r.updated_at < b.hi
      AND p.status IN ('success', 'refunded')
),
per_day AS (
    SELECT day, currency,
           sum(created)::bigint AS created, sum(succeeded)::bigint AS succeeded, sum(failed)::bigint AS failed,
           (sum(received) * 100)::bigint AS received_cents, (sum(refunded) * 100)::bigint AS refunded_cents
    FROM happened
    GROUP BY day, currency
),
days AS (
    SELECT d::date AS day
    FROM generate_series((sqlc.arg(first_day)::date)::timestamp, (sqlc.arg(last_day)::date)::timestamp, interval '1 day') d
)
SELECT days.day::date AS day, c.currency::text AS currency,
       coalesce(a.created, 0)::bigint AS created, coalesce(a.succeeded, 0)::bigint AS succeeded,
       coalesce(a.failed, 0)::bigint AS failed,
       coalesce(a.received_cents, 0)::bigint AS received_cents, coalesce(a.refunded_cents, 0)::bigint AS refunded_cents
FROM (SELECT DISTINCT currency FROM per_day) c
CROSS JOIN days
LEFT JOIN per_day a ON a.currency = c.currency AND a.day = days.day
ORDER BY c.currency, days.day;

-- name: PaymentTrendsByGateway :many
-- Per gateway interface, the payments created through it in the range
-- (payments_created_at_idx), counted by their status now: how many, how
-- many succeeded and failed, and the median seconds from creation to
-- success of those that succeeded (0 when none did: a succeeded payment
-- is exactly one with paid_at). Balance payments have no gateway.
WITH bounds AS (
    SELECT (sqlc.arg(first_day)::date)::timestamp AT TIME ZONE @zone::text AS lo,
           (sqlc.arg(last_day)::date + 1)::timestamp AT TIME ZONE @zone::text AS hi
)
SELECT g.id, g.display_name,
       count(*) AS created,
       count(*) FILTER (WHERE p.status IN ('success', 'refunded')) AS succeeded,
       count(*) FILTER (WHERE p.status = 'failed') AS failed,
       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM p.paid_at - p.created_at))
           FILTER (WHERE p.paid_at IS NOT NULL), 0)::float8 AS median_seconds
FROM payments p
JOIN gateway_interfaces g ON g.id = p.gateway_interface_id, bounds b
WHERE p.created_at >= b.lo AND p.created_at < b.hi
GROUP BY g.id, g.display_name
ORDER BY g.display_name, g.id;

-- name: PaymentTrendsByGatewayDay :many
-- Per gateway interface and day of creation: the payments created through
-- it that day and, by their status now, how many succeeded and failed. A
-- dense grid like PaymentTrendsByCurrency's, for the gateways with payments
-- in the range.
WITH bounds AS (
    SELECT (sqlc.arg(first_day)::date)::timestamp AT TIME ZONE @zone::text AS lo,
           (sqlc.arg(last_day)::date + 1)::timestamp AT TIME ZONE @zone::text AS hi
),
per_day AS (
    SELECT p.gateway_interface_id AS gateway, (p.created_at AT TIME ZONE @zone::text)::date AS day,
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
