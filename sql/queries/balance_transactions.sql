-- name: InsertBalanceTransaction :one
-- In the transaction that changed customers.balance, with the customer row
-- locked. created_at is the service's clock, taken after the lock, so the
-- ledger's order by time is the order of the balance chain.
INSERT INTO balance_transactions (
    customer_id,
    type,
    amount,
    balance_before,
    balance_after,
    payment_id,
    refund_id,
    created_by,
    description,
    created_at
) VALUES (
    @customer_id,
    @type,
    @amount,
    @balance_before,
    @balance_after,
    sqlc.narg('payment_id'),
    sqlc.narg('refund_id'),
    sqlc.narg('created_by'),
    @description,
    @created_at
)
RETURNING *;

-- name: ListCustomerBalanceTransactions :many
-- Uses balance_transactions_customer_id_idx.
SELECT * FROM balance_transactions
WHERE customer_id = @customer_id
ORDER BY created_at DESC, id DESC
LIMIT @row_limit::bigint
OFFSET @row_offset::bigint;
