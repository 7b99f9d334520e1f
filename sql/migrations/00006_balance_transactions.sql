-- The customer balance ledger.
--
-- Every change of customers.balance writes one row here in the same
-- transaction, with the customer row locked (SELECT ... FOR UPDATE), so that
-- balance_before of a row is balance_after of the customer's previous row.
-- That chain spans rows and is kept by the domain; what one row can say is
-- checked below. The ledger is append-only (trigger).

-- +goose Up
-- Shared by append-only tables (balance_transactions, audit_log). Raised as a
-- check_violation so that store.MapError reports the constraint name
-- "<table>_append_only"; the table is the trigger's argument when it has
-- one (a partitioned table's trigger fires on the partition).
-- +goose StatementBegin
CREATE FUNCTION reject_update_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    tbl text := coalesce(TG_ARGV[0], TG_TABLE_NAME);
BEGIN
    RAISE EXCEPTION '% is append-only', tbl
        USING ERRCODE = 'check_violation',
              CONSTRAINT = tbl || '_append_only',
              TABLE = tbl;
END;
$$;
-- +goose StatementEnd

CREATE TABLE balance_transactions (
    id             uuid          PRIMARY KEY DEFAULT gen_random_uuid(),
    customer_id    uuid          NOT NULL REFERENCES customers (id) ON DELETE RESTRICT,
    type           text          NOT NULL,
    -- Signed change of the balance, in customers.currency.
    amount         NUMERIC(12,2) NOT NULL,
    balance_before NUMERIC(12,2) NOT NULL,
    balance_after  NUMERIC(12,2) NOT NULL,
    -- recharge: the gateway payment that brought the money in;
    -- payment: the balance payment; refund: the refunded payment.
    payment_id     uuid          REFERENCES payments (id) ON DELETE RESTRICT,
    refund_id      uuid          REFERENCES refunds (id) ON DELETE RESTRICT,
    -- The admin behind a manual_adjust (or NULL for the system).
    created_by     uuid          REFERENCES admin_users (id) ON DELETE RESTRICT,
    description    text          NOT NULL DEFAULT '',
    created_at     timestamptz   NOT NULL DEFAULT now(),
    CONSTRAINT balance_transactions_type_check CHECK (type IN (
        'recharge', 'payment', 'refund', 'manual_adjust')),
    CONSTRAINT balance_transactions_amount_check CHECK (amount <> 0),
    CONSTRAINT balance_transactions_balance_after_check CHECK (balance_after = balance_before + amount),
    -- Money comes in with recharge and refund, goes out with payment; a
    -- manual adjustment goes either way.
    CONSTRAINT balance_transactions_sign_check CHECK (
        (type IN ('recharge', 'refund') AND amount > 0)
        OR (type = 'payment' AND amount < 0)
        OR type = 'manual_adjust'),
    CONSTRAINT balance_transactions_reference_check CHECK (
        (type <> 'payment' OR payment_id IS NOT NULL)
        AND (type <> 'refund' OR refund_id IS NOT NULL))
);

CREATE INDEX balance_transactions_customer_id_idx ON balance_transactions (customer_id, created_at DESC, id DESC);
-- A payment moves the balance at most once (a repeated callback can never
-- credit a recharge twice), and so does a refund.
CREATE UNIQUE INDEX balance_transactions_payment_id_key ON balance_transactions (payment_id)
    WHERE type IN ('recharge', 'payment');
CREATE UNIQUE INDEX balance_transactions_refund_id_key ON balance_transactions (refund_id);
CREATE INDEX balance_transactions_payment_id_idx ON balance_transactions (payment_id);
CREATE INDEX balance_transactions_created_by_idx ON balance_transactions (created_by);

CREATE TRIGGER balance_transactions_append_only
    BEFORE UPDATE OR DELETE ON balance_transactions
    FOR EACH ROW EXECUTE FUNCTION reject_update_delete();

COMMENT ON COLUMN balance_transactions.type IS 'recharge | payment | refund | manual_adjust.';
COMMENT ON COLUMN balance_transactions.amount IS 'Signed change of the balance, NUMERIC(12,2), never 0.';
COMMENT ON COLUMN balance_transactions.balance_before IS 'customers.balance before this change, NUMERIC(12,2).';
COMMENT ON COLUMN balance_transactions.balance_after IS 'customers.balance after this change, NUMERIC(12,2); = balance_before + amount.';

-- +goose Down
DROP TABLE balance_transactions;
DROP FUNCTION reject_update_delete();
