-- The accountant's CSV exports (internal/export): every payment or refund
-- created in [created_from, created_to), oldest first, with the list's
-- optional filters (NULL: no filter), read in keyset pages: the rows after
-- (after_created_at, after_id) in (created_at, id) order, page_rows of
-- them. The first page starts at created_from with after_id NULL. The store
-- reads page after page (store.EachExportPayment) and holds a connection
-- only while one is read, never while the client takes the rows. Read in
-- payments_created_at_idx / refunds_created_at_idx order (scanned
-- backwards); the row comparison is an index condition.

-- name: ExportPaymentsPage :many
SELECT id, created_at, updated_at, paid_at, failed_at, status, method,
       amount, refunded_amount, captured_amount, currency, customer_id,
       order_id, invoice_id, gateway_interface_id, gateway_payment_id,
       gateway_tx_id, failure_reason
FROM payments
WHERE created_at >= @created_from::timestamptz
  AND created_at < @created_to::timestamptz
  AND created_at >= @after_created_at::timestamptz
  AND (sqlc.narg('after_id')::uuid IS NULL OR (created_at, id) > (@after_created_at::timestamptz, sqlc.narg('after_id')::uuid))
  AND (sqlc.narg('customer_id')::uuid IS NULL OR customer_id = sqlc.narg('customer_id'))
  AND (sqlc.narg('order_id')::uuid IS NULL OR order_id = sqlc.narg('order_id'))
  AND (sqlc.narg('invoice_id')::uuid IS NULL OR invoice_id = sqlc.narg('invoice_id'))
  AND (sqlc.narg('gateway_interface_id')::uuid IS NULL OR gateway_interface_id = sqlc.narg('gateway_interface_id'))
  AND (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'))
  AND (NOT @to_return::boolean OR captured_amount > refunded_amount)
ORDER BY created_at, id
LIMIT @page_rows::int;

-- name: ExportRefundsPage :many
-- Each refund with its payment's currency and customer (joined by primary
-- key).
SELECT refunds.id, refunds.payment_id, refunds.amount, payments.currency,
       refunds.status, refunds.destination, refunds.gateway_refund_id,
       refunds.reason, refunds.error, refunds.requested_by,
       payments.customer_id, refunds.created_at, refunds.updated_at
FROM refunds
JOIN payments ON payments.id = refunds.payment_id
WHERE refunds.created_at >= @created_from::timestamptz
  AND refunds.created_at < @created_to::timestamptz
  AND refunds.created_at >= @after_created_at::timestamptz
  AND (sqlc.narg('after_id')::uuid IS NULL OR (refunds.created_at, refunds.id) > (@after_created_at::timestamptz, sqlc.narg('after_id')::uuid))
  AND (sqlc.narg('payment_id')::uuid IS NULL OR refunds.payment_id = sqlc.narg('payment_id'))
  AND (sqlc.narg('customer_id')::uuid IS NULL OR payments.customer_id = sqlc.narg('customer_id'))
  AND (sqlc.narg('status')::text IS NULL OR refunds.status = sqlc.narg('status'))
ORDER BY refunds.created_at, refunds.id
LIMIT @page_rows::int;

-- name: ExportInvoicesPage :many
-- Each invoice created in the range, the same keyset pages, read in
-- invoices_created_at_idx order (scanned backwards).
SELECT id, number, status, customer_id, order_id, amount, paid_amount,
       currency, description, issued_at, due_at, paid_at, created_at,
       updated_at
FROM invoices
WHERE created_at >= @created_from::timestamptz
  AND created_at < @created_to::timestamptz
  AND created_at >= @after_created_at::timestamptz
  AND (sqlc.narg('after_id')::uuid IS NULL OR (created_at, id) > (@after_created_at::timestamptz, sqlc.narg('after_id')::uuid))
  AND (sqlc.narg('customer_id')::uuid IS NULL OR customer_id = sqlc.narg('customer_id'))
  AND (sqlc.narg('order_id')::uuid IS NULL OR order_id = sqlc.narg('order_id'))
  AND (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'))
ORDER BY created_at, id
LIMIT @page_rows::int;
