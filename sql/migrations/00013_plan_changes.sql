-- Plan changes (issue 38, section 2): ChangeOrderPlan's record.
--
-- The release keeps serving while this runs: the rule of 00012 (and
-- docs/decisions.md, "migration locks"). No transaction; the new table is
-- created without foreign keys, each key added apart; events' check is
-- widened NOT VALID under a new name, validated without blocking, and put
-- in the old one's place; every step that locks a table the release writes
-- runs through 00012's migration_lock_retry (lock_timeout 100ms, retried
-- until it gets its lock, skipped when an earlier, interrupted run did it).

-- +goose NO TRANSACTION
-- +goose Up
-- One row per plan change asked for: what the order moves from and to,
-- when (now, or at the end of the current period), and what became of it.
-- A new table, not columns on orders: orders is a hot table, and an ALTER
-- TABLE of it waits for an ACCESS EXCLUSIVE lock that queues every other
-- query of it (docs/operations.md, "Which versions run side by side"). The
-- rows stay when the change is done: the recurring revenue's expansion and
-- contraction, and the unused share of a period whose price changed
-- (EndService), read them.
CREATE TABLE IF NOT EXISTS plan_changes (
    id            uuid          PRIMARY KEY DEFAULT gen_random_uuid(),
    order_id      uuid          NOT NULL,
    from_product  uuid,
    to_product    uuid          NOT NULL,
    -- The renewal price and cycle before and after, in the order's currency.
    from_price    NUMERIC(12,2) NOT NULL,
    to_price      NUMERIC(12,2) NOT NULL,
    from_cycle    text          NOT NULL,
    to_cycle      text          NOT NULL,
    currency      text          NOT NULL,
    -- now: prorated over the rest of the current period; period_end: the
    -- next period bills the new product.
    timing        text          NOT NULL,
    -- pending: waiting for its invoice to be paid (an upgrade now) or for
    -- the period end; applied: the order has the new product; cancelled:
    -- withdrawn, or its invoice cancelled; lapsed: its invoice was unpaid
    -- after [billing].plan_change_days.
    status        text          NOT NULL DEFAULT 'pending',
    -- The period prorated (now), or the first period billed at the new
    -- price (period_end, set when its renewal invoice is issued).
    period_seq    integer,
    period_start  timestamptz,
    period_end    timestamptz,
    -- now: the difference for the rest of the period, (to - from) x unused
    -- share, rounded once: > 0 an upgrade (the proration invoice's
    -- amount), < 0 a downgrade (credited when downgrade_credit = balance),
    -- 0 nothing to bill. 0 for period_end.
    amount        NUMERIC(12,2) NOT NULL DEFAULT 0,
    -- What of a downgrade's difference went to the balance.
    credited      NUMERIC(12,2) NOT NULL DEFAULT 0,
    -- The proration invoice (now, upgrade) or the renewal invoice that
    -- bills the new product (period_end).
    invoice_id    uuid,
    -- When an unpaid proration lapses (billing clock).
    lapse_at      timestamptz,
    -- When the change takes (took) effect, on the billing clock.
    effective_at  timestamptz,
    created_at    timestamptz   NOT NULL DEFAULT now(),
    updated_at    timestamptz   NOT NULL DEFAULT now(),
    CONSTRAINT plan_changes_timing_check CHECK (timing IN ('now', 'period_end')),
    CONSTRAINT plan_changes_status_check CHECK (status IN ('pending', 'applied', 'cancelled', 'lapsed')),
    CONSTRAINT plan_changes_prices_check CHECK (from_price >= 0 AND to_price >= 0),
    CONSTRAINT plan_changes_credited_check CHECK (credited >= 0 AND credited <= greatest(-amount, 0)),
    CONSTRAINT plan_changes_currency_check CHECK (currency ~ '^[A-Z]{3}$'),
    CONSTRAINT plan_changes_cycle_check CHECK (
        from_cycle IN ('monthly', 'quarterly', 'semi_annual', 'annual')
        AND to_cycle IN ('monthly', 'quarterly', 'semi_annual', 'annual')
        -- A change of cycle takes effect at the period end only.
        AND (timing = 'period_end' OR from_cycle = to_cycle)),
    CONSTRAINT plan_changes_lapse_check CHECK ((lapse_at IS NOT NULL) = (timing = 'now' AND amount > 0))
);

COMMENT ON TABLE plan_changes IS 'ChangeOrderPlan''s changes: one pending per order at most (plan_changes_pending_key).';
COMMENT ON COLUMN plan_changes.amount IS 'now: (to_price - from_price) x unused share of the period, rounded once half-even to the cent; NUMERIC(12,2).';

-- One pending change per order: a second ChangeOrderPlan is refused, and
-- two racing ones cannot both be written.
CREATE UNIQUE INDEX IF NOT EXISTS plan_changes_pending_key ON plan_changes (order_id) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS plan_changes_order_idx ON plan_changes (order_id, created_at);
CREATE INDEX IF NOT EXISTS plan_changes_invoice_idx ON plan_changes (invoice_id) WHERE invoice_id IS NOT NULL;
-- The billing run's scans: prorations to lapse, period-end changes to apply.
CREATE INDEX IF NOT EXISTS plan_changes_lapse_idx ON plan_changes (lapse_at) WHERE status = 'pending' AND lapse_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS plan_changes_due_idx ON plan_changes (effective_at)
    WHERE status = 'pending' AND timing = 'period_end' AND period_seq IS NOT NULL;
-- The recurring revenue's expansion and contraction: changes applied in a
-- window.
CREATE INDEX IF NOT EXISTS plan_changes_applied_idx ON plan_changes (effective_at) WHERE status = 'applied';

-- The foreign keys, one referenced table at a time (SHARE ROW EXCLUSIVE on
-- it for the moment of the commit; the new table is empty), through
-- migration_lock_retry (00012).
SELECT migration_lock_retry(
    $$SELECT EXISTS (SELECT FROM pg_constraint WHERE conrelid = 'plan_changes'::regclass AND conname = 'plan_changes_order_id_fkey')$$,
    $$ALTER TABLE plan_changes ADD CONSTRAINT plan_changes_order_id_fkey
        FOREIGN KEY (order_id) REFERENCES orders (id) ON DELETE RESTRICT$$,
    'migration 00013: the plan_changes key to orders');
SELECT migration_lock_retry(
    $$SELECT EXISTS (SELECT FROM pg_constraint WHERE conrelid = 'plan_changes'::regclass AND conname = 'plan_changes_to_product_fkey')$$,
    $$ALTER TABLE plan_changes ADD CONSTRAINT plan_changes_from_product_fkey
        FOREIGN KEY (from_product) REFERENCES products (id) ON DELETE RESTRICT,
        ADD CONSTRAINT plan_changes_to_product_fkey
        FOREIGN KEY (to_product) REFERENCES products (id) ON DELETE RESTRICT$$,
    'migration 00013: the plan_changes keys to products');
SELECT migration_lock_retry(
    $$SELECT EXISTS (SELECT FROM pg_constraint WHERE conrelid = 'plan_changes'::regclass AND conname = 'plan_changes_invoice_id_fkey')$$,
    $$ALTER TABLE plan_changes ADD CONSTRAINT plan_changes_invoice_id_fkey
        FOREIGN KEY (invoice_id) REFERENCES invoices (id) ON DELETE RESTRICT$$,
    'migration 00013: the plan_changes key to invoices');

-- The two new event types: the wider check is added NOT VALID beside the
-- old one (ACCESS EXCLUSIVE on events for the catalogue change, no scan)...
SELECT migration_lock_retry(
    $$SELECT EXISTS (SELECT FROM pg_constraint WHERE conrelid = 'events'::regclass AND conname = 'events_event_type_plan_check')
        OR pg_get_constraintdef((SELECT oid FROM pg_constraint WHERE conrelid = 'events'::regclass
                                 AND conname = 'events_event_type_check')) LIKE '%plan_changed%'$$,
    $$ALTER TABLE events ADD CONSTRAINT events_event_type_plan_check CHECK (event_type IN (
            'order_paid', 'order_provisioned', 'order_cancelled', 'order_refunded',
            'service_renewed', 'service_suspended', 'service_resumed', 'service_terminated',
            'renewal_reminder', 'plan_changed', 'plan_change_lapsed')) NOT VALID$$,
    'migration 00013: events');

-- ...validated without blocking reads or writes (SHARE UPDATE EXCLUSIVE;
-- every row passes the old, narrower check)...
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_constraint WHERE conrelid = 'events'::regclass
               AND conname = 'events_event_type_plan_check' AND NOT convalidated) THEN
        ALTER TABLE events VALIDATE CONSTRAINT events_event_type_plan_check;
    END IF;
END $$;
-- +goose StatementEnd

-- ...and takes the old one's place and name.
-- +goose StatementBegin
SELECT migration_lock_retry(
    $$SELECT NOT EXISTS (SELECT FROM pg_constraint WHERE conrelid = 'events'::regclass AND conname = 'events_event_type_plan_check')$$,
    $$ALTER TABLE events DROP CONSTRAINT IF EXISTS events_event_type_check;
      ALTER TABLE events RENAME CONSTRAINT events_event_type_plan_check TO events_event_type_check$$,
    'migration 00013: events');
-- +goose StatementEnd

-- A comment takes SHARE UPDATE EXCLUSIVE: reads and writes go on.
COMMENT ON COLUMN events.event_type IS 'order_paid | order_provisioned | order_cancelled | order_refunded | service_renewed | service_suspended | service_resumed | service_terminated | renewal_reminder | plan_changed | plan_change_lapsed.';

-- +goose Down
-- Validated, as before the up: a row of the two plan change types left in
-- events fails the down (delete them first).
ALTER TABLE events DROP CONSTRAINT events_event_type_check,
    ADD CONSTRAINT events_event_type_check CHECK (event_type IN (
        'order_paid', 'order_provisioned', 'order_cancelled', 'order_refunded',
        'service_renewed', 'service_suspended', 'service_resumed', 'service_terminated',
        'renewal_reminder'));
COMMENT ON COLUMN events.event_type IS 'order_paid | order_provisioned | order_cancelled | order_refunded | service_renewed | service_suspended | service_resumed | service_terminated | renewal_reminder.';
DROP TABLE plan_changes;
