-- name: PostBalance :one
-- The one write of a customer's balance: moves it from balance_before to
-- balance_after and appends the ledger row that says why, in one statement
-- (one round trip). Call it with the customer row locked
-- (LockOrderCustomerAccount) and the move decided on balance_before: no row
-- (store.ErrNotFound) when the balance is no longer that, so nothing is
-- written. customers_balance_check refuses a balance below -credit_limit and
-- the ledger's CHECKs a zero amount, a wrong sign for the type and
-- balance_after <> balance_before + amount (store.ErrCheckViolation).
-- created_at is the service's clock, taken after the lock, but never before
-- the customer's previous row (one microsecond after it at least: a clock
-- that stands still, as in tests, or an instance whose clock is behind
-- another's), so the ledger's order by time is the order of the balance
-- chain.
WITH previous AS (
    SELECT max(created_at) AS at FROM balance_transactions
    WHERE customer_id = @customer_id::uuid
), moved AS (
    UPDATE customers
    SET balance = @balance_after::numeric,
        updated_at = @created_at::timestamptz
    WHERE id = @customer_id::uuid
      AND balance = @balance_before::numeric
    RETURNING id
)
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
)
SELECT
    moved.id,
    @type::text,
    @amount::numeric,
    @balance_before::numeric,
    @balance_after::numeric,
    sqlc.narg('payment_id')::uuid,
    sqlc.narg('refund_id')::uuid,
    sqlc.narg('created_by')::uuid,
    @description::text,
    greatest(@created_at::timestamptz, (SELECT at FROM previous) + interval '1 microsecond')
FROM moved
RETURNING *;

-- name: ListCustomerBalanceTransactions :many
-- Uses balance_transactions_customer_id_idx.
SELECT * FROM balance_transactions
WHERE customer_id = @customer_id
ORDER BY created_at DESC, id DESC
LIMIT @row_limit::bigint
OFFSET @row_offset::bigint;
