-- Recurring revenue of the admin console's dashboard
-- (PaymentAdminService.GetRecurringRevenue, docs/decisions.md "recurring
-- revenue" and "recurring revenue rollup"). MRR moves by the changes the
-- triggers of migration 00015 write when a recurring order's first service
-- period starts (new or reactivation), when its service is closed ended
-- or refunded (churn), and when a plan change is applied (expansion or
-- contraction): signed services and twelfths of a cent a month, folded by
-- mrr_fold() into UTC quarter hours (mrr_quarters) and totals per currency
-- (mrr_totals); what is not folded yet is read from mrr_changes.

-- name: RecurringRevenueMovements :many
-- Per currency: kind 'total', every change ever (MRR now); 'after', the
-- changes at or after the range's end (MRR at its end is total - after);
-- and per local day of the range (@zone, cut as the payment trends cut
-- them) the changes of each kind, their sums signed (churn and
-- contraction negative). The totals and corrections carry first_day.
--
-- The folded changes come from mrr_days (migration 00016), a row per UTC
-- day holding its prefix sums by quarter hour. The range's boundaries b
-- (its local midnights, k = 0 .. n, b_n its end) each fall in a UTC day d
-- at quarter hour i (rounded up, so a quarter hour that starts before a
-- boundary counts before it, as in the quarters). A local day k is then
-- the whole UTC days from d_k to d_(k+1), less the part of d_k before b_k,
-- plus the part of d_(k+1) before b_(k+1): each day row adds its total to
-- the local day its date falls in (k = n and on: 'after'), and, for each
-- boundary in it, the sum before the boundary to the day ending there and
-- that sum's negative to the day starting there.
WITH b AS (
    SELECT x.k, x.t, (x.t AT TIME ZONE 'UTC')::date AS d,
           ceil(extract(epoch FROM x.t - ((x.t AT TIME ZONE 'UTC')::date::timestamp AT TIME ZONE 'UTC')) / 900)::int AS i
    FROM (
        SELECT k, (sqlc.arg(first_day)::date + k)::timestamp AT TIME ZONE @zone::text AS t
        FROM generate_series(0, sqlc.arg(last_day)::date - sqlc.arg(first_day)::date + 1) k
    ) x
), bounds AS (
    SELECT array_agg(t ORDER BY k) FILTER (WHERE k < (SELECT max(k) FROM b)) AS starts,
           max(k) AS n, min(t) AS lo, max(t) AS hi, min(d) AS first, max(d) AS last
    FROM b
), day_k AS (
    -- The local day each UTC day of the range falls in: the boundaries
    -- up to it, less one.
    SELECT g.day::date AS day, (sum(count(b.k)) OVER (ORDER BY g.day))::int - 1 AS k
    FROM bounds CROSS JOIN generate_series(bounds.first, bounds.last, interval '1 day') g(day)
    LEFT JOIN b ON b.d = g.day::date
    GROUP BY g.day
), m AS (
    SELECT m.day, m.currency, m.kind, m.services, m.twelfths
    FROM mrr_days m WHERE m.day >= (SELECT min(d) FROM b)
), parts AS (
    -- A day after the range's last boundary is 'after' (k = n).
    SELECT coalesce(day_k.k, bounds.n) AS k, m.currency, m.kind, m.services[96] AS services, m.twelfths[96] AS twelfths
    FROM m CROSS JOIN bounds LEFT JOIN day_k ON day_k.day = m.day
    UNION ALL
    SELECT b.k - 1, m.currency, m.kind, coalesce(m.services[b.i], 0), coalesce(m.twelfths[b.i], 0)
    FROM b JOIN m ON m.day = b.d WHERE b.k > 0
    UNION ALL
    SELECT b.k, m.currency, m.kind, -coalesce(m.services[b.i], 0), -coalesce(m.twelfths[b.i], 0)
    FROM b JOIN m ON m.day = b.d
    UNION ALL
    -- What is not folded yet, by its quarter hour.
    SELECT CASE WHEN trend_quarter(c.at) >= bounds.hi THEN bounds.n ELSE width_bucket(trend_quarter(c.at), bounds.starts) - 1 END,
           c.currency, c.kind, c.services, c.twelfths
    FROM mrr_changes c CROSS JOIN bounds WHERE trend_quarter(c.at) >= bounds.lo
)
SELECT 'total'::text AS kind, sqlc.arg(first_day)::date AS day, t.currency::text AS currency,
       sum(t.services)::bigint AS services, sum(t.twelfths)::bigint AS twelfths
FROM (
    SELECT currency, services, twelfths FROM mrr_totals
    UNION ALL
    SELECT currency, services, twelfths FROM mrr_changes
) t
GROUP BY 3
UNION ALL
SELECT CASE WHEN p.k >= bounds.n THEN 'after' ELSE p.kind END,
       CASE WHEN p.k >= bounds.n THEN sqlc.arg(first_day)::date ELSE (sqlc.arg(first_day)::date + p.k)::date END,
       p.currency, sum(p.services)::bigint, sum(p.twelfths)::bigint
FROM parts p CROSS JOIN bounds
GROUP BY 1, 2, 3
ORDER BY 3, 1, 2;

-- name: FoldRecurringRevenue :one
-- Moves the recurring revenue's changes into their rollup (mrr_fold): how
-- many it moved, 0 when another fold holds the lock.
SELECT mrr_fold()::bigint AS moved;

-- name: RenewalsAhead :many
-- Per currency, the live recurring orders that renew and whose paid
-- service ends in [@now, @near) and in [@now, @far), each instant taken to
-- the start of its UTC quarter hour: what GetRenewalOverview counts as
-- due, for two horizons at once, read from the renewal schedule (migration
-- 00015: its folded quarters and the changes not folded yet); amounts in
-- cents of one period.
SELECT s.currency::text AS currency,
       coalesce(sum(s.renewals) FILTER (WHERE s.quarter < trend_quarter(@near::timestamptz)), 0)::bigint AS near_count,
       coalesce(sum(s.cents) FILTER (WHERE s.quarter < trend_quarter(@near::timestamptz)), 0)::bigint AS near_cents,
       sum(s.renewals)::bigint AS far_count,
       sum(s.cents)::bigint AS far_cents
FROM (
    SELECT quarter, currency, renewals::bigint AS renewals, cents FROM renewal_schedule_quarters
    WHERE quarter >= trend_quarter(@now::timestamptz) AND quarter < trend_quarter(@far::timestamptz)
    UNION ALL
    SELECT quarter, currency, renewals::bigint, cents FROM renewal_schedule_changes
    WHERE quarter >= trend_quarter(@now::timestamptz) AND quarter < trend_quarter(@far::timestamptz)
) s
GROUP BY s.currency
HAVING sum(s.renewals) <> 0
ORDER BY s.currency;

-- name: RenewalStepsAhead :many
-- Per currency, the unpaid renewal invoices of live orders whose
-- suspension or termination the billing run reaches by a horizon: an
-- active order is suspended once its unpaid period started (the invoice's
-- due time) at or before now - suspend_after (so by now + h when it
-- started by @suspend_near / @suspend_far = now + h - suspend_after), a
-- live one terminated likewise with terminate_after, unless its invoice is
-- partly paid (left for an admin). A step turned off (0 days) is @suspends
-- / @terminates false. Amounts are what is still due, in cents. The
-- unpaid periods come from service_periods_unpaid_starts_at_idx, each
-- order and invoice by its key.
SELECT o.currency::text AS currency,
       count(*) FILTER (WHERE @suspends::bool AND o.status = @suspend_from::text AND p.starts_at <= @suspend_near::timestamptz)::bigint AS suspend_near_count,
       coalesce(sum((i.amount - i.paid_amount) * 100) FILTER (WHERE @suspends::bool AND o.status = @suspend_from::text AND p.starts_at <= @suspend_near::timestamptz), 0)::bigint AS suspend_near_cents,
       count(*) FILTER (WHERE @suspends::bool AND o.status = @suspend_from::text AND p.starts_at <= @suspend_far::timestamptz)::bigint AS suspend_far_count,
       coalesce(sum((i.amount - i.paid_amount) * 100) FILTER (WHERE @suspends::bool AND o.status = @suspend_from::text AND p.starts_at <= @suspend_far::timestamptz), 0)::bigint AS suspend_far_cents,
       count(*) FILTER (WHERE @terminates::bool AND i.paid_amount = 0 AND p.starts_at <= @terminate_near::timestamptz)::bigint AS terminate_near_count,
       coalesce(sum(i.amount * 100) FILTER (WHERE @terminates::bool AND i.paid_amount = 0 AND p.starts_at <= @terminate_near::timestamptz), 0)::bigint AS terminate_near_cents,
       count(*) FILTER (WHERE @terminates::bool AND i.paid_amount = 0 AND p.starts_at <= @terminate_far::timestamptz)::bigint AS terminate_far_count,
       coalesce(sum(i.amount * 100) FILTER (WHERE @terminates::bool AND i.paid_amount = 0 AND p.starts_at <= @terminate_far::timestamptz), 0)::bigint AS terminate_far_cents
FROM service_periods p
CROSS JOIN LATERAL (
    SELECT o.currency, o.status FROM orders o
    WHERE o.id = p.order_id AND o.status = ANY(@live_statuses::text[])
    OFFSET 0
) o
CROSS JOIN LATERAL (
    SELECT i.amount, i.paid_amount FROM invoices i WHERE i.id = p.invoice_id
    OFFSET 0
) i
WHERE p.status = 'unpaid' AND p.starts_at <= greatest(@suspend_far::timestamptz, @terminate_far::timestamptz)
GROUP BY o.currency
ORDER BY o.currency;

-- name: RecurringRevenueWithoutJIT :exec
-- The movements' plan is costed high (a lookup per service that moved)
-- though it runs in milliseconds, and PostgreSQL's JIT compiler would
-- spend seconds compiling it: off for the rest of the transaction.
SELECT set_config('jit', 'off', true);
