-- name: InsertPlanChange :one
-- A plan change asked for (pending), or one applied as it is asked for (an
-- upgrade whose proration the balance paid at once). A second pending
-- change of the same order is plan_changes_pending_key's conflict.
INSERT INTO plan_changes (
    id, order_id, from_product, to_product, from_price, to_price, from_cycle, to_cycle, currency,
    timing, status, period_seq, period_start, period_end, amount, credited, invoice_id, lapse_at,
    effective_at, created_at, updated_at
) VALUES (
    @id, @order_id, sqlc.narg('from_product'), @to_product, @from_price, @to_price, @from_cycle, @to_cycle, @currency,
    @timing, @status, sqlc.narg('period_seq'), sqlc.narg('period_start'), sqlc.narg('period_end'), @amount, @credited,
    sqlc.narg('invoice_id'), sqlc.narg('lapse_at'), sqlc.narg('effective_at'), @created_at, @created_at
)
RETURNING *;

-- name: PendingPlanChange :one
-- The order's pending change; no row when it has none.
SELECT * FROM plan_changes WHERE order_id = @order_id AND status = 'pending';

-- name: PendingPlanChanges :many
-- The pending changes of the orders given (ListOrders' pending_plan_change).
SELECT * FROM plan_changes WHERE order_id = ANY(@order_ids::uuid[]) AND status = 'pending';

-- name: PlanChangeByInvoiceForUpdate :one
-- The pending change an invoice bills, locked; no row when it bills none.
SELECT * FROM plan_changes WHERE invoice_id = @invoice_id AND status = 'pending' FOR UPDATE;

-- name: GetPlanChangeForUpdate :one
SELECT * FROM plan_changes WHERE id = @id FOR UPDATE;

-- name: SetPlanChangeStatus :one
-- A pending change is applied, cancelled or lapsed; effective_at given
-- (applied) replaces the one it had.
UPDATE plan_changes
SET status = @status, credited = @credited,
    effective_at = coalesce(sqlc.narg('effective_at'), effective_at), updated_at = @updated_at
WHERE id = @id AND status = 'pending'
RETURNING *;

-- name: SetPlanChangeRenewal :one
-- A period-end change's renewal invoice was issued: it bills period seq,
-- and the change takes effect when that period starts.
UPDATE plan_changes
SET invoice_id = @invoice_id, period_seq = @period_seq, period_start = @period_start, period_end = @period_end,
    effective_at = @period_start, updated_at = @updated_at
WHERE id = @id AND status = 'pending'
RETURNING *;

-- name: ListPlanChangesLapsing :many
-- Orders whose unpaid proration lapses by now (the billing run).
SELECT order_id FROM plan_changes
WHERE status = 'pending' AND lapse_at IS NOT NULL AND lapse_at <= @now
ORDER BY lapse_at
LIMIT @max_rows;

-- name: ListPlanChangesDue :many
-- Orders whose period-end change takes effect by now: the period billed
-- at the new price is issued and has started (the billing run).
SELECT order_id FROM plan_changes
WHERE status = 'pending' AND timing = 'period_end' AND period_seq IS NOT NULL AND effective_at <= @now
ORDER BY effective_at
LIMIT @max_rows;

-- name: AppliedPlanChangesInPeriod :many
-- The changes applied now in period seq of the order, oldest first: the
-- period's price moved by each (EndService's unused share).
SELECT * FROM plan_changes
WHERE order_id = @order_id AND period_seq = @period_seq AND timing = 'now' AND status = 'applied'
ORDER BY effective_at;

-- name: SetOrderPlan :one
-- The order's product, renewal price and cycle change (a plan change
-- applied).
UPDATE orders
SET product_id = @product_id, renewal_price = @renewal_price, billing_cycle = @billing_cycle, updated_at = @updated_at
WHERE id = @id
RETURNING *;
