-- The recurring revenue's rollup (issue 38, section 6; docs/decisions.md,
-- "recurring revenue rollup"): GetRecurringRevenue read every live order
-- and every service that moved in its range, 174 ms for 7 days and 1.6 s
-- for 366 at 100,000 services, and counted a service that started in the
-- range at the price it has now, not the one it started at (a plan change
-- after its start was counted twice: in its new business and as
-- expansion). MRR now moves by records written when it moves:
--
--   service_periods (first period inserted: new or reactivation; a period
--   closed ended or refunded: churn), plan_changes (one applied: expansion
--   or contraction at its effective time), orders (a running service's
--   renewal price or cycle moved by UpdateProduct's
--   apply_to_existing_orders, its product unchanged: the same)
--   ──triggers──▶ mrr_changes ──mrr_fold()──▶ mrr_quarters, mrr_totals
--
-- as the payment trends' rollup does (migration 00005): the triggers only
-- append, so no two writers wait for one row (the trigger on orders fires
-- only for an UPDATE that sets renewal_price or billing_cycle, never for a
-- status move, and a trigger does not stop a HOT update); mrr_fold() (paymentd's
-- trends folder calls it every 2 s) moves the changes into UTC quarter
-- hours (a local day in any zone of today is whole quarters) and the
-- totals per currency, and readers add what is not folded yet. Each change
-- is keyed by what made it (the order's start or end, the plan change), so
-- the backfill below and a trigger that fired while it ran count it once.
-- A repricing before this migration has no record: the backfill counts
-- such a service at its price now from its start, as the query it
-- replaces did.
--
-- The release keeps serving while this runs (the rule of 00012): no
-- transaction; the tables are new; each trigger is created through
-- migration_lock_retry (SHARE ROW EXCLUSIVE on its table for the moment of
-- the catalogue change). The backfill then reads what the release wrote
-- before the triggers existed: a CREATE TRIGGER waits for every
-- transaction writing the table, so what commits after it fires the
-- trigger, and what the backfill finds twice is one key.

-- +goose NO TRANSACTION
-- +goose Up
-- A change of MRR not yet folded. Signed: a start adds one service and its
-- monthly price, an end takes them away, a plan change moves the price by
-- the difference. Amounts in twelfths of a cent a month (a price of c
-- cents per cycle of m months is 12c/m, exact; payment.Twelfths).
CREATE TABLE IF NOT EXISTS mrr_changes (
    -- start: the order's first service period; end: its service closed
    -- ended or refunded; price: its renewal price or cycle moved while it
    -- ran (a plan change applied, or a repricing). ref: the order.
    source   text        NOT NULL,
    ref      uuid        NOT NULL,
    -- When MRR moved: the first period's start, the closed period's
    -- updated_at, a plan change's effective_at, a repricing's order
    -- updated_at.
    at       timestamptz NOT NULL,
    currency text        NOT NULL,
    -- new | reactivation | churn | expansion | contraction
    kind     text        NOT NULL,
    services integer     NOT NULL,
    twelfths bigint      NOT NULL,
    PRIMARY KEY (source, ref, at),
    CONSTRAINT mrr_changes_kind_check CHECK (kind IN ('new', 'reactivation', 'churn', 'expansion', 'contraction'))
);

-- The folded changes, per UTC quarter hour (trend_quarter), currency and
-- kind.
CREATE TABLE IF NOT EXISTS mrr_quarters (
    quarter  timestamptz NOT NULL,
    currency text        NOT NULL,
    kind     text        NOT NULL,
    services bigint      NOT NULL,
    twelfths bigint      NOT NULL,
    PRIMARY KEY (quarter, currency, kind)
);

-- Every folded change, per currency: MRR now, less what is not folded.
CREATE TABLE IF NOT EXISTS mrr_totals (
    currency text   PRIMARY KEY,
    services bigint NOT NULL,
    twelfths bigint NOT NULL
);

-- The renewals ahead (the live recurring orders that renew, by the end of
-- their paid service, orders.paid_until): a change of an order's place in
-- that schedule, not yet folded. Written by the trigger on orders when its
-- status moves in or out of live, or its renews, paid_until, renewal price
-- or cycle changes: minus its place before, plus its place after. Per UTC
-- quarter hour of paid_until; cents of one period.
CREATE TABLE IF NOT EXISTS renewal_schedule_changes (
    quarter  timestamptz NOT NULL,
    currency text        NOT NULL,
    renewals integer     NOT NULL,
    cents    bigint      NOT NULL
);

-- The folded schedule: the live renewing orders whose paid service ends in
-- each UTC quarter hour, per currency, and their renewal prices in cents.
CREATE TABLE IF NOT EXISTS renewal_schedule_quarters (
    quarter  timestamptz NOT NULL,
    currency text        NOT NULL,
    renewals bigint      NOT NULL,
    cents    bigint      NOT NULL,
    PRIMARY KEY (quarter, currency)
);

-- +goose StatementBegin
-- One month of a renewal price, in twelfths of a cent; NULL for a cycle
-- that does not renew (one_time).
CREATE OR REPLACE FUNCTION mrr_twelfths(price numeric, cycle text) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $$
    SELECT (price * 100)::bigint * CASE cycle WHEN 'monthly' THEN 12 WHEN 'quarterly' THEN 4
                                             WHEN 'semi_annual' THEN 2 WHEN 'annual' THEN 1 END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- Whether order_id's service, starting at t, is the customer coming back:
-- a recurring service of theirs ended before t, and none other running at
-- t (started before it, and live or ended at or after it). Strict at t:
-- first periods start at the local midnight of their activation day, so
-- services of one day share their start, and a billing pass ends and
-- starts services at one instant; a tie is "not before" whichever runs
-- first, so the trigger (at the start) and mrr_backfill (later) agree.
CREATE OR REPLACE FUNCTION mrr_start_kind(customer uuid, order_id uuid, t timestamptz) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN EXISTS (
               SELECT 1 FROM orders o2
               JOIN service_periods e2 ON e2.order_id = o2.id AND e2.outcome IN ('ended', 'refunded')
               WHERE o2.customer_id = customer AND o2.status IN ('completed', 'terminated', 'refunded')
                 AND o2.billing_cycle <> 'one_time' AND e2.updated_at < t)
           AND NOT EXISTS (
               SELECT 1 FROM orders o3
               JOIN service_periods f3 ON f3.order_id = o3.id AND f3.seq = 1
               WHERE o3.customer_id = customer AND o3.id <> order_id AND o3.billing_cycle <> 'one_time'
                 AND f3.starts_at < t
                 AND (o3.status IN ('active', 'suspended') OR EXISTS (
                     SELECT 1 FROM service_periods e3
                     WHERE e3.order_id = o3.id AND e3.outcome IN ('ended', 'refunded') AND e3.updated_at >= t)))
           THEN 'reactivation' ELSE 'new' END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- A service period written: the first one starts the order's service at
-- its renewal price then; one closed ended or refunded ends it at the
-- price it has then (no change applies after an end: the end cancels a
-- pending one).
CREATE OR REPLACE FUNCTION mrr_service_period_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    o record;
    t bigint;
BEGIN
    SELECT id, customer_id, currency, billing_cycle, renewal_price INTO o FROM orders WHERE id = NEW.order_id;
    t := mrr_twelfths(o.renewal_price, o.billing_cycle);
    IF t IS NULL THEN
        RETURN NULL;
    END IF;
    IF TG_OP = 'INSERT' AND NEW.seq = 1 THEN
        INSERT INTO mrr_changes (source, ref, at, currency, kind, services, twelfths)
        VALUES ('start', o.id, NEW.starts_at, o.currency, mrr_start_kind(o.customer_id, o.id, NEW.starts_at), 1, t)
        ON CONFLICT DO NOTHING;
    END IF;
    IF NEW.outcome IN ('ended', 'refunded') AND (TG_OP = 'INSERT' OR OLD.outcome IS NULL OR OLD.outcome NOT IN ('ended', 'refunded')) THEN
        INSERT INTO mrr_changes (source, ref, at, currency, kind, services, twelfths)
        VALUES ('end', o.id, NEW.updated_at, o.currency, 'churn', -1, -t)
        ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- A running service's monthly price moved by d twelfths at at: expansion
-- or contraction. A service not started yet starts at its new price, and
-- one that ended is out of MRR: neither moves it.
CREATE OR REPLACE FUNCTION mrr_price_moved(order_id uuid, at timestamptz, currency text, d bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF d <> 0
       AND EXISTS (SELECT FROM service_periods p WHERE p.order_id = mrr_price_moved.order_id AND p.seq = 1)
       AND NOT EXISTS (SELECT FROM service_periods p WHERE p.order_id = mrr_price_moved.order_id AND p.outcome IN ('ended', 'refunded')) THEN
        INSERT INTO mrr_changes (source, ref, at, currency, kind, services, twelfths)
        VALUES ('price', order_id, at, currency, CASE WHEN d > 0 THEN 'expansion' ELSE 'contraction' END, 0, d)
        ON CONFLICT DO NOTHING;
    END IF;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- A running service's renewal price or cycle moved by UpdateProduct's
-- apply_to_existing_orders (the trigger's WHEN leaves out an update that
-- moves the product too: a plan change, recorded by the plan change's own
-- trigger at its effective time).
CREATE OR REPLACE FUNCTION mrr_order_price_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM mrr_price_moved(NEW.id, NEW.updated_at, NEW.currency,
        mrr_twelfths(NEW.renewal_price, NEW.billing_cycle) - mrr_twelfths(OLD.renewal_price, OLD.billing_cycle));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- A plan change applied: the order's monthly price moves by the
-- difference at the change's effective time (a period-end change applied
-- by a pass that caught up takes effect at the start of its period, before
-- the pass ran).
CREATE OR REPLACE FUNCTION mrr_plan_change_applied() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (TG_OP = 'UPDATE' AND OLD.status = 'applied') OR NEW.effective_at IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM mrr_price_moved(NEW.order_id, NEW.effective_at, NEW.currency,
        mrr_twelfths(NEW.to_price, NEW.to_cycle) - mrr_twelfths(NEW.from_price, NEW.from_cycle));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- An order's place in the renewals ahead: it counts when it is live,
-- renews, is recurring and has a paid end.
CREATE OR REPLACE FUNCTION renewal_schedule_counts(status text, renews boolean, cycle text, paid_until timestamptz, price numeric)
RETURNS boolean LANGUAGE sql IMMUTABLE AS $$
    SELECT status IN ('active', 'suspended') AND renews AND cycle <> 'one_time'
       AND paid_until IS NOT NULL AND price IS NOT NULL
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION renewal_schedule_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND renewal_schedule_counts(OLD.status, OLD.renews, OLD.billing_cycle, OLD.paid_until, OLD.renewal_price) THEN
        INSERT INTO renewal_schedule_changes (quarter, currency, renewals, cents)
        VALUES (trend_quarter(OLD.paid_until), OLD.currency, -1, -(OLD.renewal_price * 100)::bigint);
    END IF;
    IF renewal_schedule_counts(NEW.status, NEW.renews, NEW.billing_cycle, NEW.paid_until, NEW.renewal_price) THEN
        INSERT INTO renewal_schedule_changes (quarter, currency, renewals, cents)
        VALUES (trend_quarter(NEW.paid_until), NEW.currency, 1, (NEW.renewal_price * 100)::bigint);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- The schedule's triggers and its backfill from the orders, in one
-- statement: the CREATE TRIGGERs' lock on orders (SHARE ROW EXCLUSIVE:
-- the release's writes of orders wait, its reads go on) is held through
-- the backfill's read of the orders, so no write falls between them and
-- none is counted twice (the changes are deltas, not keyed). A read of
-- orders: tens of milliseconds per 100,000 orders. Also the rebuild, after
-- TRUNCATE renewal_schedule_changes, renewal_schedule_quarters (with the
-- triggers there already, in a transaction that locks orders first).
CREATE OR REPLACE FUNCTION renewal_schedule_install() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_trigger WHERE tgrelid = 'orders'::regclass AND tgname = 'orders_renewal_schedule_insert') THEN
        CREATE TRIGGER orders_renewal_schedule_insert AFTER INSERT ON orders
            FOR EACH ROW WHEN (NEW.paid_until IS NOT NULL)
            EXECUTE FUNCTION renewal_schedule_change();
        CREATE TRIGGER orders_renewal_schedule_update AFTER UPDATE OF status, renews, paid_until, renewal_price, billing_cycle ON orders
            FOR EACH ROW WHEN ((OLD.status IN ('active', 'suspended')) IS DISTINCT FROM (NEW.status IN ('active', 'suspended'))
                OR OLD.renews IS DISTINCT FROM NEW.renews OR OLD.paid_until IS DISTINCT FROM NEW.paid_until
                OR OLD.renewal_price IS DISTINCT FROM NEW.renewal_price OR OLD.billing_cycle IS DISTINCT FROM NEW.billing_cycle)
            EXECUTE FUNCTION renewal_schedule_change();
    END IF;
    INSERT INTO renewal_schedule_changes (quarter, currency, renewals, cents)
    SELECT trend_quarter(paid_until), currency, count(*), sum(renewal_price * 100)::bigint
    FROM orders
    WHERE renewal_schedule_counts(status, renews, billing_cycle, paid_until, renewal_price)
    GROUP BY 1, 2;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- Moves the changes into the quarters and the totals, and the renewal
-- schedule's into its quarters: how many it moved, 0 when another fold
-- holds the lock. One transaction, so a reader's
-- snapshot sees a change either unfolded or folded, never both.
CREATE OR REPLACE FUNCTION mrr_fold() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    moved_rows       bigint;
    empty_quarters   timestamptz[];
    empty_currencies text[];
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtextextended('paymentd.mrr_fold', 0)) THEN
        RETURN 0;
    END IF;
    WITH moved AS (
        DELETE FROM mrr_changes RETURNING *
    ), quarters AS (
        INSERT INTO mrr_quarters AS q
        SELECT trend_quarter(at), currency, kind, sum(services), sum(twelfths)
        FROM moved GROUP BY 1, 2, 3
        ON CONFLICT (quarter, currency, kind) DO UPDATE SET
            services = q.services + EXCLUDED.services, twelfths = q.twelfths + EXCLUDED.twelfths
    ), totals AS (
        INSERT INTO mrr_totals AS t
        SELECT currency, sum(services), sum(twelfths) FROM moved GROUP BY 1
        ON CONFLICT (currency) DO UPDATE SET
            services = t.services + EXCLUDED.services, twelfths = t.twelfths + EXCLUDED.twelfths
    ), schedule_moved AS (
        DELETE FROM renewal_schedule_changes RETURNING *
    ), schedule AS (
        INSERT INTO renewal_schedule_quarters AS q
        SELECT quarter, currency, sum(renewals), sum(cents) FROM schedule_moved GROUP BY 1, 2
        ON CONFLICT (quarter, currency) DO UPDATE SET
            renewals = q.renewals + EXCLUDED.renewals, cents = q.cents + EXCLUDED.cents
        RETURNING q.quarter, q.currency, q.renewals, q.cents
    )
    SELECT (SELECT count(*) FROM moved) + (SELECT count(*) FROM schedule_moved),
           (SELECT array_agg(quarter) FROM schedule WHERE renewals = 0 AND cents = 0),
           (SELECT array_agg(currency) FROM schedule WHERE renewals = 0 AND cents = 0)
    INTO moved_rows, empty_quarters, empty_currencies;
    -- A quarter whose renewals all moved on holds nothing: dropped, so the
    -- schedule keeps the quarters ahead (and the overdue), not every one
    -- past.
    IF empty_quarters IS NOT NULL THEN
        DELETE FROM renewal_schedule_quarters q
        USING unnest(empty_quarters, empty_currencies) AS e(quarter, currency)
        WHERE q.quarter = e.quarter AND q.currency = e.currency AND q.renewals = 0 AND q.cents = 0;
    END IF;
    RETURN moved_rows;
END;
$$;
-- +goose StatementEnd

-- Two triggers on service_periods, so that each WHEN is exact: a renewal
-- closing a period 'renewed' (every period's end) calls nothing.
SELECT migration_lock_retry(
    $$SELECT EXISTS (SELECT FROM pg_trigger WHERE tgrelid = 'service_periods'::regclass AND tgname = 'service_periods_mrr_insert')$$,
    $$CREATE TRIGGER service_periods_mrr_insert AFTER INSERT ON service_periods
        FOR EACH ROW WHEN (NEW.seq = 1 OR NEW.outcome IN ('ended', 'refunded'))
        EXECUTE FUNCTION mrr_service_period_change()$$,
    'migration 00015: the recurring revenue trigger on service_periods inserts');
SELECT migration_lock_retry(
    $$SELECT EXISTS (SELECT FROM pg_trigger WHERE tgrelid = 'service_periods'::regclass AND tgname = 'service_periods_mrr_update')$$,
    $$CREATE TRIGGER service_periods_mrr_update AFTER UPDATE OF outcome ON service_periods
        FOR EACH ROW WHEN (NEW.outcome IN ('ended', 'refunded') AND OLD.outcome IS DISTINCT FROM NEW.outcome)
        EXECUTE FUNCTION mrr_service_period_change()$$,
    'migration 00015: the recurring revenue trigger on service_periods updates');
SELECT migration_lock_retry(
    $$SELECT EXISTS (SELECT FROM pg_trigger WHERE tgrelid = 'orders'::regclass AND tgname = 'orders_mrr')$$,
    $$CREATE TRIGGER orders_mrr AFTER UPDATE OF renewal_price, billing_cycle ON orders
        FOR EACH ROW WHEN ((OLD.renewal_price IS DISTINCT FROM NEW.renewal_price OR OLD.billing_cycle IS DISTINCT FROM NEW.billing_cycle)
                           AND OLD.product_id IS NOT DISTINCT FROM NEW.product_id)
        EXECUTE FUNCTION mrr_order_price_change()$$,
    'migration 00015: the recurring revenue trigger on orders');
SELECT migration_lock_retry(
    $$SELECT EXISTS (SELECT FROM pg_trigger WHERE tgrelid = 'plan_changes'::regclass AND tgname = 'plan_changes_mrr')$$,
    $$CREATE TRIGGER plan_changes_mrr AFTER INSERT OR UPDATE OF status ON plan_changes
        FOR EACH ROW WHEN (NEW.status = 'applied')
        EXECUTE FUNCTION mrr_plan_change_applied()$$,
    'migration 00015: the recurring revenue trigger on plan_changes');

-- The renewal schedule's triggers and backfill, under one lock of orders.
SELECT migration_lock_retry(
    $$SELECT EXISTS (SELECT FROM pg_trigger WHERE tgrelid = 'orders'::regclass AND tgname = 'orders_renewal_schedule_insert')$$,
    $$SELECT renewal_schedule_install()$$,
    'migration 00015: the renewal schedule triggers on orders');

-- +goose StatementBegin
-- The changes the records hold, as the triggers would have written them:
-- the backfill of this migration, and a rebuild after
-- TRUNCATE mrr_changes, mrr_quarters, mrr_totals (then SELECT mrr_fold()).
-- The price moves first, from the applied plan changes (the only price
-- moves recorded); then each service's start, at its price now less every
-- price move of it there is (those and any a trigger wrote meanwhile); and
-- its end, at its price now. What is there already is kept: how many rows
-- it added.
CREATE OR REPLACE FUNCTION mrr_backfill() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    added bigint := 0;
BEGIN
    INSERT INTO mrr_changes (source, ref, at, currency, kind, services, twelfths)
    SELECT 'price', pc.order_id, pc.effective_at, pc.currency,
           CASE WHEN x.d > 0 THEN 'expansion' ELSE 'contraction' END, 0, x.d
    FROM plan_changes pc
    CROSS JOIN LATERAL (SELECT mrr_twelfths(pc.to_price, pc.to_cycle) - mrr_twelfths(pc.from_price, pc.from_cycle) AS d) x
    WHERE pc.status = 'applied' AND pc.effective_at IS NOT NULL AND x.d <> 0
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    added := added + n;
    INSERT INTO mrr_changes (source, ref, at, currency, kind, services, twelfths)
    SELECT 'start', o.id, f.starts_at, o.currency, mrr_start_kind(o.customer_id, o.id, f.starts_at), 1,
           mrr_twelfths(o.renewal_price, o.billing_cycle)
             - coalesce((SELECT sum(c.twelfths) FROM mrr_changes c WHERE c.source = 'price' AND c.ref = o.id), 0)
    FROM service_periods f
    JOIN orders o ON o.id = f.order_id
    WHERE f.seq = 1 AND o.billing_cycle <> 'one_time'
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    added := added + n;
    INSERT INTO mrr_changes (source, ref, at, currency, kind, services, twelfths)
    SELECT DISTINCT ON (o.id) 'end', o.id, e.updated_at, o.currency, 'churn', -1, -mrr_twelfths(o.renewal_price, o.billing_cycle)
    FROM service_periods e
    JOIN orders o ON o.id = e.order_id
    WHERE e.outcome IN ('ended', 'refunded') AND o.billing_cycle <> 'one_time'
    ORDER BY o.id, e.seq
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN added + n;
END;
$$;
-- +goose StatementEnd

-- The backfill, skipped when a fold has run (an interrupted run of this
-- migration carried on: what it backfilled is folded already), then the
-- first fold.
SELECT mrr_backfill() WHERE NOT EXISTS (SELECT FROM mrr_totals);
SELECT mrr_fold();

-- +goose Down
DROP TRIGGER IF EXISTS plan_changes_mrr ON plan_changes;
DROP TRIGGER IF EXISTS orders_mrr ON orders;
DROP TRIGGER IF EXISTS orders_renewal_schedule_update ON orders;
DROP TRIGGER IF EXISTS orders_renewal_schedule_insert ON orders;
DROP TRIGGER IF EXISTS service_periods_mrr_update ON service_periods;
DROP TRIGGER IF EXISTS service_periods_mrr_insert ON service_periods;
DROP FUNCTION IF EXISTS renewal_schedule_install, renewal_schedule_change, renewal_schedule_counts, mrr_backfill, mrr_fold, mrr_plan_change_applied, mrr_order_price_change, mrr_price_moved, mrr_service_period_change, mrr_start_kind, mrr_twelfths;
DROP TABLE IF EXISTS renewal_schedule_quarters, renewal_schedule_changes, mrr_totals, mrr_quarters, mrr_changes;
