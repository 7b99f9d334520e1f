-- Figures of the admin console's dashboard (PaymentAdminService.GetPaymentStats),
-- computed by the database whatever the number of payments.

-- name: PaymentStatsSince :many
-- The payments created at or after @since, grouped by status and currency:
-- a range of payments_created_at_idx (created_at DESC, id DESC), so a day's
-- figures read that day's rows and nothing older. Sums are in cents as
-- bigint: a sum of NUMERIC(12,2) amounts may leave that type's range.
SELECT status, currency,
       count(*) AS payments,
       (sum(amount) * 100)::bigint AS amount_cents,
       (sum(refunded_amount) * 100)::bigint AS refunded_cents
FROM payments
WHERE created_at >= @since::timestamptz
GROUP BY status, currency
ORDER BY status, currency;

-- name: CountPendingPayments :one
-- Every payment pending now, whenever it was created: the partial index
-- on status = 'pending' (payments_one_pending_key) holds exactly these
-- rows.
SELECT count(*) FROM payments
WHERE status = 'pending';

-- name: OldestPendingRefund :one
-- The refunds pending now (the gateway completes them later, or their
-- outcome is unknown: each waits for an admin's ResolveRefund): when the
-- oldest was requested, and how many there are. An index-only scan of the
-- pending range of refunds_status_created_at_idx, however many refunds
-- were ever made; no row when none is pending.
SELECT created_at, count(*) OVER () AS refunds
FROM refunds
WHERE status = 'pending'
ORDER BY created_at
LIMIT 1;

-- name: MoneyToReturn :many
-- Captured money not returned yet, per currency, whenever it was captured:
-- the failed payments whose gateway took the money after all, how much of
-- it is still to go back (captured - refunded, in cents) and when the
-- oldest was captured. The rows of payments_to_return_idx (few).
SELECT currency,
       count(*) AS payments,
       ((sum(captured_amount) - sum(refunded_amount)) * 100)::bigint AS cents,
       min(captured_at)::timestamptz AS oldest
FROM payments
WHERE captured_amount > refunded_amount
GROUP BY currency
ORDER BY currency;
