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
WITH bounds AS (
    SELECT array_agg(d AT TIME ZONE @zone::text ORDER BY d) AS starts,
           (sqlc.arg(first_day)::date)::timestamp AT TIME ZONE @zone::text AS lo,
           (sqlc.arg(last_day)::date + 1)::timestamp AT TIME ZONE @zone::text AS hi
    FROM generate_series((sqlc.arg(first_day)::date)::timestamp, (sqlc.arg(last_day)::date)::timestamp, interval '1 day') d
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
-- The changes since the range began, folded or not, in one pass: those
-- from its end on as 'after', the others on their day.
SELECT CASE WHEN s.quarter >= b.hi THEN 'after' ELSE s.kind END,
       CASE WHEN s.quarter >= b.hi THEN sqlc.arg(first_day)::date
            ELSE (sqlc.arg(first_day)::date + width_bucket(s.quarter, b.starts) - 1)::date END,
       s.currency, sum(s.services)::bigint, sum(s.twelfths)::bigint
FROM bounds b
CROSS JOIN LATERAL (
    SELECT q.quarter, q.currency, q.kind, q.services, q.twelfths FROM mrr_quarters q WHERE q.quarter >= b.lo
    UNION ALL
    SELECT trend_quarter(c.at), c.currency, c.kind, c.services, c.twelfths FROM mrr_changes c WHERE c.at >= b.lo
) s
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
