-- Disputes (chargebacks) a gateway reports about a payment (issue 39, 2):
-- one row per gateway dispute, moved by the gateway's notifications. A lost
-- dispute's money went back: it is also a succeeded gateway refund of the
-- payment (refund_id), so the refund and ledger rules count it. An order's
-- service may be suspended for a dispute (suspend_reason 'dispute').
--
-- The release keeps serving while this runs (docs/decisions.md, "migration
-- locks"): the first version, one transaction, made the rolling upgrade's
-- release instance answer 500. Its CREATE TABLE took SHARE ROW EXCLUSIVE on
-- payments and refunds for the foreign keys and held them to the commit;
-- its ALTER TABLE orders then queued for ACCESS EXCLUSIVE behind the
-- release's transactions holding orders' rows, which waited for payments
-- behind the migration: a deadlock, and every orders query queued behind
-- the waiting ACCESS EXCLUSIVE until the detector killed the release's
-- transaction a second later. So, the rule for a migration that locks a
-- table the running release writes:
--   - NO TRANSACTION, one lock per statement, each committed at once: no
--     lock is held while another is waited for; a new table is created
--     without foreign keys (a plain statement: sqlc reads the schema from
--     the migrations and cannot see into a DO block), and each key is
--     added apart;
--   - each such statement under lock_timeout 100ms (below deadlock_timeout,
--     1 s: the migration gives up, not the release), retried after a pause
--     until it gets its lock (about 4 minutes at most, then the migration
--     fails and the next start tries again: every step is idempotent):
--     migration_lock_retry, below;
--   - a CHECK or FOREIGN KEY on a filled table added NOT VALID (no scan
--     under the lock) and validated apart (SHARE UPDATE EXCLUSIVE: reads
--     and writes go on).

-- +goose NO TRANSACTION
-- +goose Up

-- The table, its own keys and indexes, plain statements (sqlc reads them):
-- a new table without foreign keys locks no other table.
CREATE TABLE IF NOT EXISTS disputes (
    id                   uuid          PRIMARY KEY DEFAULT gen_random_uuid(),
    payment_id           uuid          NOT NULL,
    gateway_interface_id uuid          NOT NULL,
    -- The gateway's id of the dispute (Stripe: dp_…).
    gateway_dispute_id   text          NOT NULL,
    amount               NUMERIC(12,2) NOT NULL,
    currency             text          NOT NULL,
    reason               text          NOT NULL DEFAULT '',
    -- The gateway's status, as it says it (Stripe: warning_needs_response,
    -- needs_response, under_review, won, lost, ...).
    status               text          NOT NULL,
    evidence_due_by      timestamptz,
    -- The succeeded refund a lost dispute became.
    refund_id            uuid,
    created_at           timestamptz   NOT NULL DEFAULT now(),
    updated_at           timestamptz   NOT NULL DEFAULT now(),
    CONSTRAINT disputes_gateway_key UNIQUE (gateway_interface_id, gateway_dispute_id),
    CONSTRAINT disputes_amount_check CHECK (amount > 0),
    CONSTRAINT disputes_gateway_dispute_id_check CHECK (gateway_dispute_id <> '')
);

-- ListDisputes: the evidence deadline first.
CREATE INDEX IF NOT EXISTS disputes_evidence_due_by_idx ON disputes (evidence_due_by, id);
CREATE INDEX IF NOT EXISTS disputes_payment_id_idx ON disputes (payment_id);

COMMENT ON COLUMN disputes.status IS 'the gateway''s dispute status (won and lost are final).';

-- migration_lock_retry(done, stmt, what) runs stmt under lock_timeout
-- 100ms (below deadlock_timeout, 1 s: the migration gives up, never the
-- release), and again after 100 to 200 ms each time the lock is not to be
-- had (a failed try's subtransaction lets go of what it took), at most 900
-- times (about 4 minutes; then it fails naming what, and the next start
-- tries again). done, a query answering one boolean ('' for none), says
-- that an earlier, interrupted run took the step already: it is skipped.
-- Every step of this rule, in this migration and the later ones, runs
-- through it (docs/decisions.md, "migration locks").
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION migration_lock_retry(done text, stmt text, what text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    skip  boolean := false;
    tries int := 0;
BEGIN
    IF done <> '' THEN
        EXECUTE done INTO skip;
        IF skip THEN
            RETURN;
        END IF;
    END IF;
    PERFORM set_config('lock_timeout', '100ms', true);
    LOOP
        BEGIN
            EXECUTE stmt;
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            tries := tries + 1;
            IF tries >= 900 THEN
                RAISE EXCEPTION '%: no lock in % tries; a transaction holds it: retried at the next start', what, tries;
            END IF;
            PERFORM pg_sleep(0.1 + random() * 0.1);
        END;
    END LOOP;
END $$;
-- +goose StatementEnd

-- The foreign keys, one referenced table at a time: each takes SHARE ROW
-- EXCLUSIVE on payments or refunds for the moment of its commit (the new
-- table is empty: nothing to validate).
SELECT migration_lock_retry(
    $$SELECT EXISTS (SELECT FROM pg_constraint WHERE conrelid = 'disputes'::regclass AND conname = 'disputes_payment_id_fkey')$$,
    $$ALTER TABLE disputes ADD CONSTRAINT disputes_payment_id_fkey FOREIGN KEY (payment_id) REFERENCES payments (id)$$,
    'migration 00012: the disputes key to payments');
SELECT migration_lock_retry(
    $$SELECT EXISTS (SELECT FROM pg_constraint WHERE conrelid = 'disputes'::regclass AND conname = 'disputes_refund_id_fkey')$$,
    $$ALTER TABLE disputes ADD CONSTRAINT disputes_refund_id_fkey FOREIGN KEY (refund_id) REFERENCES refunds (id)$$,
    'migration 00012: the disputes key to refunds');

-- orders' check allows suspend_reason 'dispute': the wider check is added
-- NOT VALID beside the old one (ACCESS EXCLUSIVE on orders, no scan)...
SELECT migration_lock_retry(
    $$SELECT EXISTS (SELECT FROM pg_constraint WHERE conrelid = 'orders'::regclass AND conname = 'orders_suspend_reason_dispute_check')
        OR pg_get_constraintdef((SELECT oid FROM pg_constraint WHERE conrelid = 'orders'::regclass
                                 AND conname = 'orders_suspend_reason_check')) LIKE '%dispute%'$$,
    $$ALTER TABLE orders ADD CONSTRAINT orders_suspend_reason_dispute_check CHECK (
        (status = 'suspended') = (suspend_reason IN ('overdue', 'admin', 'dispute'))
        AND suspend_reason IN ('', 'overdue', 'admin', 'dispute')) NOT VALID$$,
    'migration 00012: orders');

-- ...validated without blocking reads or writes (SHARE UPDATE EXCLUSIVE;
-- every row passes the old, narrower check)...
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_constraint WHERE conrelid = 'orders'::regclass
               AND conname = 'orders_suspend_reason_dispute_check' AND NOT convalidated) THEN
        ALTER TABLE orders VALIDATE CONSTRAINT orders_suspend_reason_dispute_check;
    END IF;
END $$;
-- +goose StatementEnd

-- ...and takes the old one's place and name (one ACCESS EXCLUSIVE on
-- orders, for the two catalog changes).
-- +goose StatementBegin
SELECT migration_lock_retry(
    $$SELECT NOT EXISTS (SELECT FROM pg_constraint WHERE conrelid = 'orders'::regclass AND conname = 'orders_suspend_reason_dispute_check')$$,
    $$ALTER TABLE orders DROP CONSTRAINT IF EXISTS orders_suspend_reason_check;
      ALTER TABLE orders RENAME CONSTRAINT orders_suspend_reason_dispute_check TO orders_suspend_reason_check$$,
    'migration 00012: orders');
-- +goose StatementEnd

-- A comment takes SHARE UPDATE EXCLUSIVE: reads and writes go on.
COMMENT ON COLUMN orders.suspend_reason IS 'overdue | admin | dispute while suspended; empty otherwise.';

-- +goose Down
UPDATE orders SET suspend_reason = 'admin' WHERE suspend_reason = 'dispute';
ALTER TABLE orders DROP CONSTRAINT orders_suspend_reason_check;
ALTER TABLE orders ADD CONSTRAINT orders_suspend_reason_check CHECK (
    (status = 'suspended') = (suspend_reason IN ('overdue', 'admin'))
    AND suspend_reason IN ('', 'overdue', 'admin'));
COMMENT ON COLUMN orders.suspend_reason IS 'overdue | admin while suspended; empty otherwise.';
DROP TABLE disputes;
DROP FUNCTION migration_lock_retry(text, text, text);
