-- name: InsertServicePeriod :one
-- A new service period. The primary key (order_id, seq) and the invoice's
-- uniqueness refuse a second row for the same period.
INSERT INTO service_periods (
    order_id, seq, starts_at, ends_at, anchor_at, anchor_months, invoice_id, status, paid_at, created_at, updated_at
) VALUES (
    @order_id, @seq, @starts_at, @ends_at, @anchor_at, @anchor_months, sqlc.narg('invoice_id'), @status, sqlc.narg('paid_at'), @created_at, @created_at
)
RETURNING *;

-- name: InsertRenewalPeriods :exec
-- InsertServicePeriod for the unpaid periods of one batch of the billing
-- run, each billed by its invoice.
INSERT INTO service_periods (
    order_id, seq, starts_at, ends_at, anchor_at, anchor_months, invoice_id, status, created_at, updated_at
)
SELECT r.order_id, r.seq, r.starts_at, r.ends_at, r.anchor_at, r.anchor_months, r.invoice_id, 'unpaid',
       @created_at::timestamptz, @created_at::timestamptz
FROM (SELECT unnest(@order_ids::uuid[]) AS order_id, unnest(@seqs::integer[]) AS seq,
             unnest(@starts_ats::timestamptz[]) AS starts_at, unnest(@ends_ats::timestamptz[]) AS ends_at,
             unnest(@anchor_ats::timestamptz[]) AS anchor_at, unnest(@anchor_months::integer[]) AS anchor_months,
             unnest(@invoice_ids::uuid[]) AS invoice_id) AS r;

-- name: MarkServicePeriodsFollowed :exec
-- MarkServicePeriodFollowed for several periods, (order_ids[i], seqs[i]).
UPDATE service_periods p SET followed = true, updated_at = @updated_at
FROM (SELECT unnest(@order_ids::uuid[]) AS order_id, unnest(@seqs::integer[]) AS seq) AS r
WHERE p.order_id = r.order_id AND p.seq = r.seq;

-- name: GetServicePeriodByInvoiceForUpdate :one
-- The period the invoice bills, locked; no row when it bills none (an
-- invoice that is not a renewal).
SELECT * FROM service_periods WHERE invoice_id = @invoice_id FOR UPDATE;

-- name: LatestServicePeriod :one
-- The order's last period (the current one, or the one its renewal invoice
-- bills).
-- No row when the order has none (one-time, or not active yet).
SELECT * FROM service_periods WHERE order_id = @order_id ORDER BY seq DESC LIMIT 1;

-- name: LatestServicePeriods :many
-- LatestServicePeriod of each order given that has a period (the billing
-- run's batch).
SELECT DISTINCT ON (order_id) * FROM service_periods
WHERE order_id = ANY(@order_ids::uuid[])
ORDER BY order_id, seq DESC;

-- name: ListServicePeriods :many
-- The order's periods, first first.
SELECT * FROM service_periods WHERE order_id = @order_id ORDER BY seq;

-- name: MarkServicePeriodPaid :one
-- The period's invoice was paid: the period is paid and the one before it
-- ends renewed.
WITH paid AS (
    UPDATE service_periods p
    SET status = 'paid', paid_at = @paid_at, updated_at = @updated_at
    WHERE p.order_id = @order_id AND p.seq = @seq AND p.status = 'unpaid'
    RETURNING p.*
), before AS (
    UPDATE service_periods b
    SET outcome = 'renewed', updated_at = @updated_at
    FROM paid
    WHERE b.order_id = paid.order_id AND b.seq = paid.seq - 1 AND b.outcome IS NULL
)
SELECT * FROM paid;

-- name: CloseServicePeriods :many
-- The order's service ended: every period that has not ended does, with
-- the outcome given; an unpaid one is cancelled and ends unpaid.
UPDATE service_periods
SET outcome = CASE WHEN status = 'unpaid' THEN 'unpaid' ELSE @outcome::text END,
    status = CASE WHEN status = 'unpaid' THEN 'cancelled' ELSE status END,
    paid_at = CASE WHEN status = 'unpaid' THEN NULL ELSE paid_at END,
    updated_at = @updated_at
WHERE order_id = @order_id AND outcome IS NULL
RETURNING *;

-- name: ExtendServicePeriod :one
-- An admin moves the end of a period by hand; later periods count from the
-- new end (a new anchor).
UPDATE service_periods
SET ends_at = @ends_at, anchor_at = @ends_at, anchor_months = 0, updated_at = @updated_at
WHERE order_id = @order_id AND seq = @seq
RETURNING *;

-- name: SetInstanceExpiry :exec
-- instances.expires_at follows the paid end of the order's service.
UPDATE instances SET expires_at = @expires_at, updated_at = @updated_at
WHERE order_id = @order_id AND status <> 'terminated';

-- name: ListRenewalsDue :many
-- The billing run's renewal scan: the last paid period of each live
-- recurring order that renews, not yet followed, ending by @ends_before
-- (now + renewal_invoice_days). Oldest end first. "Live" is
-- @live_statuses, order.LiveStatuses() in every query here: the set's one
-- home is internal/order/status.go, and no query spells it out.
SELECT p.order_id FROM service_periods p
JOIN orders o ON o.id = p.order_id
WHERE p.outcome IS NULL AND p.status = 'paid' AND NOT p.followed
  AND p.ends_at <= @ends_before
  AND o.renews AND o.status = ANY(@live_statuses::text[]) AND o.billing_cycle <> 'one_time'
ORDER BY p.ends_at, p.order_id
LIMIT @max_rows;

-- name: ListServicesEnding :many
-- The live orders (@live_statuses) whose last paid period has ended and
-- that are not renewed (renewal off, or a one-time cycle set by an admin
-- since): their service ends.
SELECT p.order_id FROM service_periods p
JOIN orders o ON o.id = p.order_id
WHERE p.outcome IS NULL AND p.status = 'paid' AND NOT p.followed
  AND p.ends_at <= @now
  AND (NOT o.renews OR o.billing_cycle = 'one_time') AND o.status = ANY(@live_statuses::text[])
ORDER BY p.ends_at, p.order_id
LIMIT @max_rows;

-- name: ListUnpaidPeriodsDue :many
-- The unpaid periods whose invoice (due at the period's start) is at least
-- the given age past due, of orders in one of the statuses given: the
-- suspension and termination scans.
SELECT p.order_id FROM service_periods p
JOIN orders o ON o.id = p.order_id
WHERE p.status = 'unpaid' AND p.starts_at <= @due_before
  AND o.status = ANY(@statuses::text[])
ORDER BY p.starts_at, p.order_id
LIMIT @max_rows;

-- name: SuspendOrder :one
-- SetOrderStatus to suspended, with the reason (orders_suspend_reason_check).
UPDATE orders
SET status = 'suspended', suspend_reason = @suspend_reason, updated_at = @updated_at
WHERE id = @id AND status = @from_status
RETURNING *;

-- name: SetOrderRenews :one
-- Turns the order's renewal on or off.
UPDATE orders SET renews = @renews, updated_at = @updated_at
WHERE id = @id
RETURNING *;

-- name: ListUnpaidPeriodsCoveredByBalance :many
-- The unpaid renewal invoices of live orders (@live_statuses), due by
-- @due_before, that the customer's balance now covers (down to
-- -credit_limit): the billing run pays them from it. The comparison is the
-- credit-limit rule written set-wise for the scan; its Go home is
-- balance.Covers (internal/balance), which the billing run asks again for
-- each invoice under the locks. internal/order's credit_test.go holds the
-- two, and customers_balance_check, to the same boundaries (exactly
-- covered, a cent short, no credit limit, a negative balance, a partly
-- paid invoice).
SELECT p.order_id FROM service_periods p
JOIN orders o ON o.id = p.order_id
JOIN invoices i ON i.id = p.invoice_id
JOIN customers c ON c.id = o.customer_id
WHERE p.status = 'unpaid' AND p.starts_at <= @due_before
  AND o.status = ANY(@live_statuses::text[])
  AND i.status IN ('issued', 'overdue') AND c.currency = i.currency AND c.disabled_at IS NULL
  AND c.balance + c.credit_limit >= i.amount - i.paid_amount
ORDER BY p.starts_at, p.order_id
LIMIT @max_rows;

-- name: SetOrderPaidUntil :one
-- The end of the order's last paid period, kept on the order: the order
-- as it is now.
UPDATE orders SET paid_until = @paid_until, updated_at = @updated_at WHERE id = @id
RETURNING *;

-- name: CancelUnpaidServicePeriod :one
-- The invoice billing an unpaid period was cancelled: the period is
-- cancelled (it ends unpaid) and the one before is the last again. The
-- order's renewal is turned off in Go, with its audit row (order's
-- cancelUnpaidPeriod, internal/order/periods.go), not here.
WITH cancelled AS (
    UPDATE service_periods p
    SET status = 'cancelled', outcome = 'unpaid', updated_at = @updated_at
    WHERE p.invoice_id = @invoice_id AND p.status = 'unpaid'
    RETURNING p.*
), before AS (
    UPDATE service_periods b
    SET followed = false, updated_at = @updated_at
    FROM cancelled
    WHERE b.order_id = cancelled.order_id AND b.seq = cancelled.seq - 1
)
SELECT * FROM cancelled;

-- name: ReissueServicePeriod :one
-- Renewal was turned back on after the invoice of period @seq was
-- cancelled: the cancelled period is billed again, by a new invoice, in
-- the same row (its seq and, unless an extension moved the paid end, its
-- start: the keys (order_id, seq) and (order_id, starts_at) allow no
-- second row). Unpaid (or paid, when free), not ended, its notices
-- cleared for the new invoice. Only a cancelled period is reissued; the
-- caller holds the order's lock and audits it (order's IssuePeriod,
-- internal/order/periods.go).
UPDATE service_periods
SET starts_at = @starts_at, ends_at = @ends_at, anchor_at = @anchor_at, anchor_months = @anchor_months,
    invoice_id = sqlc.narg('invoice_id'), status = @status, paid_at = sqlc.narg('paid_at'),
    followed = false, notices = '{}', outcome = NULL, updated_at = @updated_at
WHERE order_id = @order_id AND seq = @seq AND status = 'cancelled'
RETURNING *;

-- name: RenewalsDueByCurrency :many
-- The renewal overview's "due": live recurring orders (@live_statuses)
-- that renew and whose paid service ends in [@now, @until), per currency.
SELECT currency, count(*)::bigint AS count, coalesce(sum(renewal_price), 0)::numeric(12,2) AS amount
FROM orders
WHERE paid_until >= @now::timestamptz AND paid_until < @until::timestamptz AND renews
  AND status = ANY(@live_statuses::text[]) AND billing_cycle <> 'one_time'
GROUP BY currency
ORDER BY currency;

-- name: ListUnpaidRenewals :many
-- The renewal overview's lists: orders in @status (and, for suspended, with
-- @suspend_reason) with an unpaid renewal invoice due before @now, the
-- oldest due first.
SELECT sqlc.embed(o), i.id AS invoice_id, (i.amount - i.paid_amount)::numeric(12,2) AS amount_due, p.starts_at AS due_at
FROM service_periods p
JOIN orders o ON o.id = p.order_id
JOIN invoices i ON i.id = p.invoice_id
WHERE p.status = 'unpaid' AND p.starts_at < @now
  AND o.status = @status AND o.suspend_reason = @suspend_reason
ORDER BY p.starts_at, p.order_id
LIMIT @max_rows;

-- name: CountUnpaidRenewals :one
SELECT count(*)::bigint
FROM service_periods p
JOIN orders o ON o.id = p.order_id
WHERE p.status = 'unpaid' AND p.starts_at < @now
  AND o.status = @status AND o.suspend_reason = @suspend_reason;

-- name: ListUnpaidPeriodsForNotices :many
-- The unpaid periods of live orders (@live_statuses) whose invoice is due
-- by @due_before (now plus the days of the reminder before the due day),
-- with the notices already queued: the billing run's reminder scan.
SELECT p.order_id, p.seq, p.starts_at, p.notices FROM service_periods p
JOIN orders o ON o.id = p.order_id
WHERE p.status = 'unpaid' AND p.starts_at <= @due_before
  AND o.status = ANY(@live_statuses::text[])
ORDER BY p.starts_at, p.order_id
LIMIT @max_rows OFFSET @skip;

-- name: AddServicePeriodNotices :exec
-- Records notices as queued for the period.
UPDATE service_periods
SET notices = ARRAY(SELECT DISTINCT n FROM unnest(notices || @notices::text[]) AS n ORDER BY n),
    updated_at = @updated_at
WHERE order_id = @order_id AND seq = @seq;

-- name: LockOpenRenewalInvoices :many
-- The open (issued or overdue) invoices billing the order's unpaid
-- periods, locked, oldest period first: what an order that ends cancels.
-- The caller holds the order's lock (order before invoice, as everywhere).
SELECT i.* FROM invoices i
JOIN service_periods p ON p.invoice_id = i.id
WHERE p.order_id = @order_id AND p.status = 'unpaid' AND i.status IN ('issued', 'overdue')
ORDER BY p.seq
FOR UPDATE OF i;

-- name: ListPartlyPaidPastTermination :many
-- The renewal overview's partly paid invoices: live orders
-- (@live_statuses) whose renewal invoice is partly paid and due by
-- @due_before (now less terminate_after_days). The billing run does not
-- end them (cancelling would strand the money): an admin decides. Oldest
-- due first.
SELECT sqlc.embed(o), i.id AS invoice_id, (i.amount - i.paid_amount)::numeric(12,2) AS amount_due, p.starts_at AS due_at
FROM service_periods p
JOIN orders o ON o.id = p.order_id
JOIN invoices i ON i.id = p.invoice_id
WHERE p.status = 'unpaid' AND p.starts_at <= @due_before
  AND i.paid_amount > 0 AND i.status IN ('issued', 'overdue')
  AND o.status = ANY(@live_statuses::text[])
ORDER BY p.starts_at, p.order_id
LIMIT @max_rows;

-- name: CountPartlyPaidPastTermination :one
-- How many ListPartlyPaidPastTermination finds (the overview's count and
-- the metric paymentd_renewal_partly_paid_past_termination).
SELECT count(*)::bigint
FROM service_periods p
JOIN orders o ON o.id = p.order_id
JOIN invoices i ON i.id = p.invoice_id
WHERE p.status = 'unpaid' AND p.starts_at <= @due_before
  AND i.paid_amount > 0 AND i.status IN ('issued', 'overdue')
  AND o.status = ANY(@live_statuses::text[]);
