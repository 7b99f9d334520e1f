-- Trends of the admin console's dashboard (PaymentAdminService.GetPaymentTrends):
-- day by day in an IANA time zone, read from the trends' rollup (migration
-- 00005: figures per UTC quarter hour, kept by triggers and
-- payment_trends_fold), never from the payments themselves, so a range
-- costs a few thousand rows however many payments it holds. A day is cut by
-- the zone's midnights (generate_series over local dates, each turned into
-- an instant with AT TIME ZONE, so a day of a DST change lasts 23 or 25
-- hours); first_day and last_day are local dates, both included. Every
-- zone's midnight is a UTC quarter hour, so a quarter lies in one day: its
-- day is found by width_bucket in the sorted array of the days' first
-- instants (bounds.starts), bucket i being first_day + i - 1. Each answer
-- sums the folded rollup and its changes table, the changes not folded
-- yet (read in the same snapshot, a change is in one or the other).

-- name: PaymentTrendsByCurrency :many
-- Per currency and day: the payments created, received (paid_at) and failed
-- (failed_at) that day, the amounts received, and the refunds of paid
-- payments that succeeded that day. The days are a dense grid: every day of
-- the range for every currency with something in it, zeros where nothing
-- happened. Amounts are in cents, as the rollup keeps them.
WITH bounds AS (
    SELECT array_agg(d AT TIME ZONE @zone::text ORDER BY d) AS starts,
           (sqlc.arg(first_day)::date)::timestamp AT TIME ZONE @zone::text AS lo,
           (sqlc.arg(last_day)::date + 1)::timestamp AT TIME ZONE @zone::text AS hi
    FROM generate_series((sqlc.arg(first_day)::date)::timestamp, (sqlc.arg(last_day)::date)::timestamp, interval '1 day') d
),
happened AS (
    SELECT q.quarter, q.currency, q.created, q.succeeded, q.failed, q.received_cents, q.refunded_cents
    FROM payment_trend_currency_quarters q, bounds b
    WHERE q.quarter >= b.lo AND q.quarter < b.hi
    UNION ALL
    SELECT c.quarter, c.currency, c.created, c.succeeded, c.failed, c.received_cents, c.refunded_cents
    FROM payment_trend_currency_changes c, bounds b
    WHERE c.quarter >= b.lo AND c.quarter < b.hi
),
per_day AS (
    SELECT sqlc.arg(first_day)::date + width_bucket(h.quarter, b.starts) - 1 AS day, h.currency,
           sum(h.created) AS created, sum(h.succeeded) AS succeeded, sum(h.failed) AS failed,
           sum(h.received_cents) AS received, sum(h.refunded_cents) AS refunded
    FROM happened h, bounds b
    GROUP BY 1, 2
),
currencies AS (
    SELECT currency FROM per_day
    GROUP BY currency
    HAVING bool_or(created <> 0 OR succeeded <> 0 OR failed <> 0 OR received <> 0 OR refunded <> 0)
),
days AS (
    SELECT d::date AS day
    FROM generate_series((sqlc.arg(first_day)::date)::timestamp, (sqlc.arg(last_day)::date)::timestamp, interval '1 day') d
)
SELECT days.day::date AS day, c.currency::text AS currency,
       coalesce(a.created, 0)::bigint AS created, coalesce(a.succeeded, 0)::bigint AS succeeded,
       coalesce(a.failed, 0)::bigint AS failed,
       coalesce(a.received, 0)::bigint AS received_cents, coalesce(a.refunded, 0)::bigint AS refunded_cents
FROM currencies c
CROSS JOIN days
LEFT JOIN per_day a ON a.currency = c.currency AND a.day = days.day
ORDER BY c.currency, days.day;

-- name: PaymentTrendsByGatewayDay :many
-- Per gateway interface and day of creation: the payments created through
-- it that day and, by their status now, how many succeeded and failed. A
-- dense grid like PaymentTrendsByCurrency's, for the gateways with payments
-- created in the range, ordered by name then id then day (the range's
-- totals are the sums of a gateway's days). Balance payments have no
-- gateway.
WITH bounds AS (
    SELECT array_agg(d AT TIME ZONE @zone::text ORDER BY d) AS starts,
           (sqlc.arg(first_day)::date)::timestamp AT TIME ZONE @zone::text AS lo,
           (sqlc.arg(last_day)::date + 1)::timestamp AT TIME ZONE @zone::text AS hi
    FROM generate_series((sqlc.arg(first_day)::date)::timestamp, (sqlc.arg(last_day)::date)::timestamp, interval '1 day') d
),
happened AS (
    SELECT q.quarter, q.gateway_interface_id, q.created, q.succeeded, q.failed
    FROM payment_trend_gateway_quarters q, bounds b
    WHERE q.quarter >= b.lo AND q.quarter < b.hi
    UNION ALL
    SELECT c.quarter, c.gateway_interface_id, c.created, c.succeeded, c.failed
    FROM payment_trend_gateway_changes c, bounds b
    WHERE c.quarter >= b.lo AND c.quarter < b.hi
),
per_day AS (
    SELECT h.gateway_interface_id AS gateway, sqlc.arg(first_day)::date + width_bucket(h.quarter, b.starts) - 1 AS day,
           sum(h.created) AS created, sum(h.succeeded) AS succeeded, sum(h.failed) AS failed
    FROM happened h, bounds b
    GROUP BY 1, 2
),
gateways AS (
    SELECT gateway FROM per_day GROUP BY gateway HAVING sum(created) <> 0
),
days AS (
    SELECT d::date AS day
    FROM generate_series((sqlc.arg(first_day)::date)::timestamp, (sqlc.arg(last_day)::date)::timestamp, interval '1 day') d
)
SELECT gi.id AS gateway_interface_id, gi.display_name, days.day::date AS day,
       coalesce(a.created, 0)::bigint AS created, coalesce(a.succeeded, 0)::bigint AS succeeded,
       coalesce(a.failed, 0)::bigint AS failed
FROM gateways g
JOIN gateway_interfaces gi ON gi.id = g.gateway
CROSS JOIN days
LEFT JOIN per_day a ON a.gateway = g.gateway AND a.day = days.day
ORDER BY gi.display_name, gi.id, days.day;

-- name: PaymentTrendSeconds :many
-- Per gateway interface, the times from creation to success of the
-- payments created through it in the range and succeeded: how many fell in
-- each histogram bin (trend_seconds_bin), as the seconds the bin counts as,
-- ordered by gateway then seconds. The UTC days wholly inside the range are
-- read from the per-day rows, the quarters at its ends (where a local day
-- does not fall on UTC days) from the per-quarter ones.
WITH bounds AS (
    SELECT (sqlc.arg(first_day)::date)::timestamp AT TIME ZONE @zone::text AS lo,
           (sqlc.arg(last_day)::date + 1)::timestamp AT TIME ZONE @zone::text AS hi
),
cut AS (
    -- The whole UTC days of [lo, hi) are [days_lo, days_hi): days_lo the
    -- first UTC midnight at or after lo, days_hi the last at or before hi;
    -- both are hi, or one midnight, when no whole day fits.
    SELECT b.lo, b.hi, d.days_lo, greatest(date_trunc('day', b.hi, 'UTC'), d.days_lo) AS days_hi
    FROM bounds b,
         LATERAL (SELECT least(date_trunc('day', b.lo - interval '1 microsecond', 'UTC') + interval '1 day', b.hi) AS days_lo) d
),
counted AS (
    SELECT s.gateway_interface_id, s.seconds_bin, s.n
    FROM payment_trend_seconds_days s, cut c
    WHERE s.day >= (c.days_lo AT TIME ZONE 'UTC')::date AND s.day < (c.days_hi AT TIME ZONE 'UTC')::date
    UNION ALL
    -- The quarters before the first whole day and after the last: two
    -- ranges of the index, not the whole range filtered.
    SELECT s.gateway_interface_id, s.seconds_bin, s.n
    FROM payment_trend_seconds_quarters s, cut c
    WHERE s.quarter >= c.lo AND s.quarter < c.days_lo
    UNION ALL
    SELECT s.gateway_interface_id, s.seconds_bin, s.n
    FROM payment_trend_seconds_quarters s, cut c
    WHERE s.quarter >= c.days_hi AND s.quarter < c.hi
    UNION ALL
    SELECT c.gateway_interface_id, c.seconds_bin, c.n
    FROM payment_trend_seconds_changes c, cut w
    WHERE c.quarter >= w.lo AND c.quarter < w.hi
)
SELECT gateway_interface_id::uuid AS gateway_interface_id, trend_seconds_value(seconds_bin)::float8 AS seconds,
       sum(n)::bigint AS n
FROM counted
GROUP BY gateway_interface_id, seconds_bin
HAVING sum(n) <> 0
ORDER BY gateway_interface_id, seconds_bin;

-- name: FoldPaymentTrends :one
-- Moves the trends' changes into their rollup (payment_trends_fold):
-- how many it moved, 0 when another fold holds the lock.
SELECT payment_trends_fold()::bigint AS moved;
