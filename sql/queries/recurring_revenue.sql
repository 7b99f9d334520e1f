-- Recurring revenue of the admin console's dashboard
-- (PaymentAdminService.GetRecurringRevenue, docs/decisions.md "recurring
-- revenue"). Read from the orders and their service periods, the records
-- the renewal invoices are issued from. Amounts are whole cents of one
-- period of the order's cycle; internal/payment normalises them to a month.
--
-- A recurring order (billing_cycle not one_time) is in MRR from the start
-- of its first service period (the order went active) until its service
-- ended: the time its current period was closed with outcome ended or
-- refunded, which order.Transition writes as the period's updated_at when
-- the order becomes completed, terminated or refunded (nothing writes a
-- closed period after). A live order (@live_statuses: active or suspended)
-- has not ended. In MRR at instant t: started < t and (not ended, or ended
-- at or after t).
--
-- MRR at the end of the range is the live recurring orders now, corrected
-- by the services that started or ended after the range (a range in the
-- past); the movements are the first periods that started and the
-- periods closed ended or refunded since the range began, read through
-- the partial indexes of migration 00011, each order looked up by its key
-- (docs/performance.md, "Recurring revenue").

-- name: RecurringRevenueMovements :many
-- Per currency and billing cycle: kind 'live', the live recurring orders
-- now; 'started_after' and 'ended_after', the corrections for a range that
-- ended before now (live orders that started after it; orders that started
-- before its end and ended after it); 'new' and 'reactivation', the
-- services that started on a day of the range (reactivation: the customer
-- had a recurring service that ended by then, and none other running);
-- 'churn', the services that ended on a day of the range. Days are local
-- dates in @zone, cut as the payment trends cut them; the corrections carry
-- first_day.
WITH bounds AS (
    SELECT array_agg(d AT TIME ZONE @zone::text ORDER BY d) AS starts,
           (sqlc.arg(first_day)::date)::timestamp AT TIME ZONE @zone::text AS lo,
           (sqlc.arg(last_day)::date + 1)::timestamp AT TIME ZONE @zone::text AS hi
    FROM generate_series((sqlc.arg(first_day)::date)::timestamp, (sqlc.arg(last_day)::date)::timestamp, interval '1 day') d
),
live AS (
    SELECT o.currency, o.billing_cycle, count(*) AS services, sum(o.renewal_price * 100) AS cents
    FROM orders o
    WHERE o.status = ANY(@live_statuses::text[]) AND o.billing_cycle <> 'one_time'
    GROUP BY 1, 2
),
-- The services started since the range began, each order found by its key
-- (OFFSET 0 keeps the planner from hashing the whole orders table).
started AS (
    SELECT o.*, f.starts_at
    FROM bounds b
    JOIN service_periods f ON f.seq = 1 AND f.starts_at >= b.lo
    CROSS JOIN LATERAL (
        SELECT o.id, o.customer_id, o.currency, o.billing_cycle, o.renewal_price * 100 AS cents,
               o.status = ANY(@live_statuses::text[]) AS live
        FROM orders o WHERE o.id = f.order_id AND o.billing_cycle <> 'one_time'
        OFFSET 0
    ) o
),
-- The services ended since the range began, with their start.
ended AS (
    SELECT o.*, e.updated_at AS ended_at, f.starts_at
    FROM bounds b
    JOIN service_periods e ON e.outcome IN ('ended', 'refunded') AND e.updated_at >= b.lo
    CROSS JOIN LATERAL (
        SELECT o.currency, o.billing_cycle, o.renewal_price * 100 AS cents
        FROM orders o WHERE o.id = e.order_id AND o.billing_cycle <> 'one_time'
        OFFSET 0
    ) o
    CROSS JOIN LATERAL (
        SELECT f.starts_at FROM service_periods f WHERE f.order_id = e.order_id AND f.seq = 1
        OFFSET 0
    ) f
)
SELECT 'live'::text AS kind, sqlc.arg(first_day)::date AS day, l.currency::text AS currency, l.billing_cycle::text AS billing_cycle,
       l.services::bigint AS services, l.cents::bigint AS cents
FROM live l
UNION ALL
SELECT 'started_after', sqlc.arg(first_day)::date, s.currency, s.billing_cycle, count(*), sum(s.cents)::bigint
FROM started s, bounds b
WHERE s.live AND s.starts_at >= b.hi
GROUP BY 3, 4
UNION ALL
SELECT 'ended_after', sqlc.arg(first_day)::date, e.currency, e.billing_cycle, count(*), sum(e.cents)::bigint
FROM ended e, bounds b
WHERE e.ended_at >= b.hi AND e.starts_at < b.hi
GROUP BY 3, 4
UNION ALL
SELECT CASE WHEN EXISTS (
           SELECT 1 FROM orders o2
           JOIN service_periods e2 ON e2.order_id = o2.id AND e2.outcome IN ('ended', 'refunded')
           WHERE o2.customer_id = s.customer_id AND o2.status IN ('completed', 'terminated', 'refunded')
             AND o2.billing_cycle <> 'one_time' AND e2.updated_at <= s.starts_at)
       AND NOT EXISTS (
           SELECT 1 FROM orders o3
           JOIN service_periods f3 ON f3.order_id = o3.id AND f3.seq = 1
           WHERE o3.customer_id = s.customer_id AND o3.id <> s.id AND o3.billing_cycle <> 'one_time'
             AND f3.starts_at <= s.starts_at
             AND (o3.status = ANY(@live_statuses::text[]) OR EXISTS (
                 SELECT 1 FROM service_periods e3
                 WHERE e3.order_id = o3.id AND e3.outcome IN ('ended', 'refunded') AND e3.updated_at > s.starts_at)))
       THEN 'reactivation' ELSE 'new' END,
       (sqlc.arg(first_day)::date + width_bucket(s.starts_at, b.starts) - 1)::date, s.currency, s.billing_cycle,
       count(*), sum(s.cents)::bigint
FROM started s, bounds b
WHERE s.starts_at < b.hi
GROUP BY 1, 2, 3, 4
UNION ALL
SELECT 'churn', (sqlc.arg(first_day)::date + width_bucket(e.ended_at, b.starts) - 1)::date, e.currency, e.billing_cycle,
       count(*), sum(e.cents)::bigint
FROM ended e, bounds b
WHERE e.ended_at < b.hi AND e.starts_at < b.hi
GROUP BY 2, 3, 4
UNION ALL
-- 'expansion' and 'contraction': the plan changes applied on a day of the
-- range (plan_changes, by effective_at: the billing clock's time the order
-- took the new price), as the change of the monthly price in twelfths of
-- a cent, reported under cycle 'annual' (whose twelfths are its cents):
-- to / months(to_cycle) − from / months(from_cycle), exact in twelfths.
-- No services: a change moves MRR, not the number of services.
SELECT CASE WHEN c.twelfths > 0 THEN 'expansion' ELSE 'contraction' END,
       (sqlc.arg(first_day)::date + width_bucket(c.effective_at, b.starts) - 1)::date, c.currency, 'annual',
       0::bigint, abs(sum(c.twelfths))::bigint
FROM bounds b
CROSS JOIN LATERAL (
    SELECT pc.currency, pc.effective_at,
           (pc.to_price * 100 * 12 / CASE pc.to_cycle WHEN 'monthly' THEN 1 WHEN 'quarterly' THEN 3 WHEN 'semi_annual' THEN 6 ELSE 12 END)
         - (pc.from_price * 100 * 12 / CASE pc.from_cycle WHEN 'monthly' THEN 1 WHEN 'quarterly' THEN 3 WHEN 'semi_annual' THEN 6 ELSE 12 END) AS twelfths
    FROM plan_changes pc
    WHERE pc.status = 'applied' AND pc.effective_at >= b.lo AND pc.effective_at < b.hi
) c
WHERE c.twelfths <> 0
GROUP BY 1, 2, 3
ORDER BY 3, 1, 2, 4;

-- name: RenewalsAhead :many
-- Per currency, the live recurring orders that renew and whose paid
-- service ends in [@now, @near) and in [@now, @far): what GetRenewalOverview
-- counts as due, for two horizons at once; amounts in cents of one period.
SELECT currency::text AS currency,
       count(*) FILTER (WHERE paid_until < @near::timestamptz)::bigint AS near_count,
       coalesce(sum(renewal_price * 100) FILTER (WHERE paid_until < @near::timestamptz), 0)::bigint AS near_cents,
       count(*)::bigint AS far_count,
       coalesce(sum(renewal_price * 100), 0)::bigint AS far_cents
FROM orders
WHERE paid_until >= @now::timestamptz AND paid_until < @far::timestamptz AND renews
  AND status = ANY(@live_statuses::text[]) AND billing_cycle <> 'one_time'
GROUP BY currency
ORDER BY currency;

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
