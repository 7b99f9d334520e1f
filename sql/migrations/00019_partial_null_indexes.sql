-- +goose NO TRANSACTION
-- +goose Up
-- Three indexes stop holding NULLs (docs/performance.md, "Indexes that hold
-- no NULLs"). A B-tree indexes NULL like any key, so every payment paid from
-- the balance wrote a NULL entry into payments_gateway_interface_id_idx, and
-- every ledger row not made by an admin or a refund wrote one into
-- balance_transactions_created_by_idx and balance_transactions_refund_id_key:
-- index entries no query reads. Every query of these indexes compares the
-- column with =, which never matches NULL, so each becomes partial
-- (WHERE ... IS NOT NULL) with the same name, the same columns and, for the
-- unique one, the same rule (NULLs never conflicted).
--
-- Built CONCURRENTLY, outside a transaction, so that payments and the ledger
-- take writes while it runs; each index is built under a temporary name, the
-- old one dropped and the new one renamed. Every step can run again: a run
-- stopped between two of them is finished by the next.

DROP INDEX CONCURRENTLY IF EXISTS payments_gateway_interface_id_partial;
CREATE INDEX CONCURRENTLY payments_gateway_interface_id_partial
    ON payments (gateway_interface_id, created_at DESC, id DESC) WHERE gateway_interface_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS payments_gateway_interface_id_idx;
ALTER INDEX payments_gateway_interface_id_partial RENAME TO payments_gateway_interface_id_idx;

DROP INDEX CONCURRENTLY IF EXISTS balance_transactions_created_by_partial;
CREATE INDEX CONCURRENTLY balance_transactions_created_by_partial
    ON balance_transactions (created_by) WHERE created_by IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS balance_transactions_created_by_idx;
ALTER INDEX balance_transactions_created_by_partial RENAME TO balance_transactions_created_by_idx;

DROP INDEX CONCURRENTLY IF EXISTS balance_transactions_refund_id_partial;
CREATE UNIQUE INDEX CONCURRENTLY balance_transactions_refund_id_partial
    ON balance_transactions (refund_id) WHERE refund_id IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS balance_transactions_refund_id_key;
ALTER INDEX balance_transactions_refund_id_partial RENAME TO balance_transactions_refund_id_key;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS balance_transactions_refund_id_full;
CREATE UNIQUE INDEX CONCURRENTLY balance_transactions_refund_id_full ON balance_transactions (refund_id);
DROP INDEX CONCURRENTLY IF EXISTS balance_transactions_refund_id_key;
ALTER INDEX balance_transactions_refund_id_full RENAME TO balance_transactions_refund_id_key;

DROP INDEX CONCURRENTLY IF EXISTS balance_transactions_created_by_full;
CREATE INDEX CONCURRENTLY balance_transactions_created_by_full ON balance_transactions (created_by);
DROP INDEX CONCURRENTLY IF EXISTS balance_transactions_created_by_idx;
ALTER INDEX balance_transactions_created_by_full RENAME TO balance_transactions_created_by_idx;

DROP INDEX CONCURRENTLY IF EXISTS payments_gateway_interface_id_full;
CREATE INDEX CONCURRENTLY payments_gateway_interface_id_full ON payments (gateway_interface_id, created_at DESC, id DESC);
DROP INDEX CONCURRENTLY IF EXISTS payments_gateway_interface_id_idx;
ALTER INDEX payments_gateway_interface_id_full RENAME TO payments_gateway_interface_id_idx;
