-- +goose Up
-- The recurring revenue's plan changes keyed by the change (docs/decisions.md,
-- "recurring revenue rollup"). Migration 00015 keyed every price move by
-- its order and its time, and dropped a second one at the same instant: two
-- plan changes of one service applied at one instant (or a plan change and
-- a repricing), with a clock that stands still as a test clock does, left
-- MRR short by the second (the renewal model found it, 7.80 short). A plan
-- change's move is now keyed by the change ('plan', the change's id), and
-- two repricings of one service at one instant add up in one row. Functions
-- replaced only: no table is locked or rewritten. The rows 00015's trigger
-- wrote ('price' keyed by the order) fold as before.

-- +goose StatementBegin
-- Moves order_id's monthly price by d twelfths at at, as what (source,
-- ref) names: a running service's move is expansion or contraction, and a
-- second move under the same key adds to the first (its kind by the sum's
-- sign). A service not started yet starts at its new price, and one that
-- ended is out of MRR: neither moves it.
CREATE FUNCTION mrr_move(order_id uuid, source text, ref uuid, at timestamptz, currency text, d bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF d <> 0
       AND EXISTS (SELECT FROM service_periods p WHERE p.order_id = mrr_move.order_id AND p.seq = 1)
       AND NOT EXISTS (SELECT FROM service_periods p WHERE p.order_id = mrr_move.order_id AND p.outcome IN ('ended', 'refunded')) THEN
        INSERT INTO mrr_changes AS c (source, ref, at, currency, kind, services, twelfths)
        VALUES (source, ref, at, currency, CASE WHEN d > 0 THEN 'expansion' ELSE 'contraction' END, 0, d)
        ON CONFLICT ON CONSTRAINT mrr_changes_pkey DO UPDATE SET
            twelfths = c.twelfths + EXCLUDED.twelfths,
            kind = CASE WHEN c.twelfths + EXCLUDED.twelfths >= 0 THEN 'expansion' ELSE 'contraction' END;
    END IF;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- A repricing (mrr_order_price_change): keyed by the order and its time.
CREATE OR REPLACE FUNCTION mrr_price_moved(order_id uuid, at timestamptz, currency text, d bigint) RETURNS void
LANGUAGE sql AS $$
    SELECT mrr_move(order_id, 'price', order_id, at, currency, d)
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- A plan change applied: the order's monthly price moves by the
-- difference at the change's effective time (a period-end change applied
-- by a pass that caught up takes effect at the start of its period, before
-- the pass ran), keyed by the change.
CREATE OR REPLACE FUNCTION mrr_plan_change_applied() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (TG_OP = 'UPDATE' AND OLD.status = 'applied') OR NEW.effective_at IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM mrr_move(NEW.order_id, 'plan', NEW.id, NEW.effective_at, NEW.currency,
        mrr_twelfths(NEW.to_price, NEW.to_cycle) - mrr_twelfths(NEW.from_price, NEW.from_cycle));
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- The changes the records hold, as the triggers would have written them:
-- the rebuild after TRUNCATE mrr_changes, mrr_quarters, mrr_days,
-- mrr_totals (then SELECT mrr_fold()). The price moves first, from the
-- applied plan changes (the only price moves recorded), each keyed by its
-- change; then each service's start, at its price now less every price
-- move of it there is (those and any a trigger wrote meanwhile, keyed by
-- the order or by one of its changes); and its end, at its price now. What
-- is there already is kept: how many rows it added.
CREATE OR REPLACE FUNCTION mrr_backfill() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    added bigint := 0;
BEGIN
    INSERT INTO mrr_changes (source, ref, at, currency, kind, services, twelfths)
    SELECT 'plan', pc.id, pc.effective_at, pc.currency,
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
             - coalesce((SELECT sum(c.twelfths) FROM plan_changes pc JOIN mrr_changes c ON c.source = 'plan' AND c.ref = pc.id
                         WHERE pc.order_id = o.id), 0)
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

-- +goose Down
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

DROP FUNCTION mrr_move(uuid, text, uuid, timestamptz, text, bigint);
