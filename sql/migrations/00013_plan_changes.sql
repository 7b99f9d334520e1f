-- Plan changes (issue 38, section 2): ChangeOrderPlan's record.

-- +goose Up
-- One row per plan change asked for: what the order moves from and to,
-- when (now, or at the end of the current period), and what became of it.
-- A new table, not columns on orders: orders is a hot table, and an ALTER
-- TABLE of it waits for an ACCESS EXCLUSIVE lock that queues every other
-- query of it (docs/operations.md, "Which versions run side by side"). The
-- rows stay when the change is done: the recurring revenue's expansion and
-- contraction, and the unused share of a period whose price changed
-- (EndService), read them.
CREATE TABLE plan_changes (
    id            uuid          PRIMARY KEY DEFAULT gen_random_uuid(),
    order_id      uuid          NOT NULL REFERENCES orders (id) ON DELETE RESTRICT,
    from_product  uuid          REFERENCES products (id) ON DELETE RESTRICT,
    to_product    uuid          NOT NULL REFERENCES products (id) ON DELETE RESTRICT,
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
    invoice_id    uuid          REFERENCES invoices (id) ON DELETE RESTRICT,
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
CREATE UNIQUE INDEX plan_changes_pending_key ON plan_changes (order_id) WHERE status = 'pending';
CREATE INDEX plan_changes_order_idx ON plan_changes (order_id, created_at);
CREATE INDEX plan_changes_invoice_idx ON plan_changes (invoice_id) WHERE invoice_id IS NOT NULL;
-- The billing run's scans: prorations to lapse, period-end changes to apply.
CREATE INDEX plan_changes_lapse_idx ON plan_changes (lapse_at) WHERE status = 'pending' AND lapse_at IS NOT NULL;
CREATE INDEX plan_changes_due_idx ON plan_changes (effective_at)
    WHERE status = 'pending' AND timing = 'period_end' AND period_seq IS NOT NULL;
-- The recurring revenue's expansion and contraction: changes applied in a
-- window.
CREATE INDEX plan_changes_applied_idx ON plan_changes (effective_at) WHERE status = 'applied';

-- The two new event types. NOT VALID: the ALTER holds events' ACCESS
-- EXCLUSIVE lock only for the catalogue change, not for a scan of every
-- row (the old rows satisfy it: the new list holds the old one), and
-- lock_timeout bounds the wait for it behind a running transaction, so a
-- busy events table fails the migration (retried at the next start)
-- instead of queueing every query of the table behind it.
SET LOCAL lock_timeout = '5s';
ALTER TABLE events DROP CONSTRAINT events_event_type_check,
    ADD CONSTRAINT events_event_type_check CHECK (event_type IN (
        'order_paid', 'order_provisioned', 'order_cancelled', 'order_refunded',
        'service_renewed', 'service_suspended', 'service_resumed', 'service_terminated',
        'renewal_reminder', 'plan_changed', 'plan_change_lapsed')) NOT VALID;
COMMENT ON COLUMN events.event_type IS 'order_paid | order_provisioned | order_cancelled | order_refunded | service_renewed | service_suspended | service_resumed | service_terminated | renewal_reminder | plan_changed | plan_change_lapsed.';

-- +goose Down
-- Validated, as before the up: a row of the two plan change types left in
-- events fails the down (delete them first).
SET LOCAL lock_timeout = '5s';
ALTER TABLE events DROP CONSTRAINT events_event_type_check,
    ADD CONSTRAINT events_event_type_check CHECK (event_type IN (
        'order_paid', 'order_provisioned', 'order_cancelled', 'order_refunded',
        'service_renewed', 'service_suspended', 'service_resumed', 'service_terminated',
        'renewal_reminder'));
COMMENT ON COLUMN events.event_type IS 'order_paid | order_provisioned | order_cancelled | order_refunded | service_renewed | service_suspended | service_resumed | service_terminated | renewal_reminder.';
DROP TABLE plan_changes;
