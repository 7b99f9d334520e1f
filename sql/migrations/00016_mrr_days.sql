-- +goose Up
-- The recurring revenue's days (issue 38, section 6: "under 50 ms at
-- 100,000 services"; docs/decisions.md, "recurring revenue rollup").
-- GetRecurringRevenue summed the folded quarter hours of its whole range:
-- about 200 rows a day at 100,000 services, 71,000 for 366 days, 54 ms.
-- A local day in any zone is whole UTC quarter hours (migration 00015), so
-- it is the end of one UTC day and the start of the next: mrr_days holds,
-- per UTC day, currency and kind, the sums of the day's quarters before
-- each quarter hour (a prefix sum, its last element the day's total), and
-- a range reads a row a UTC day instead of one a quarter hour.
--
-- mrr_fold() rebuilds the days it touched from their quarters, in its own
-- transaction, so a day is always its quarters' sum; the backfill below
-- builds every day under the fold's lock. New table, functions replaced:
-- nothing the running release writes is locked.

-- A UTC day's folded recurring revenue changes of one currency and kind:
-- services[i] and twelfths[i] (i = 1..96) are the sums of the day's
-- quarter hours before its quarter i (0 at midnight, 95 at 23:45), so
-- services[96] is the day's total and element 0 (NULL) reads as 0.
CREATE TABLE mrr_days (
    day      date     NOT NULL,
    currency text     NOT NULL,
    kind     text     NOT NULL,
    services bigint[] NOT NULL CHECK (cardinality(services) = 96),
    twelfths bigint[] NOT NULL CHECK (cardinality(twelfths) = 96),
    PRIMARY KEY (day, currency, kind)
);

-- +goose StatementBegin
-- Builds the named days (UTC day, currency, kind; repeats allowed) from
-- their quarters in mrr_quarters, replacing what they held.
CREATE FUNCTION mrr_days_refresh(days date[], currencies text[], kinds text[]) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO mrr_days AS m (day, currency, kind, services, twelfths)
    SELECT x.day, x.currency, x.kind, array_agg(x.services ORDER BY x.j), array_agg(x.twelfths ORDER BY x.j)
    FROM (
        SELECT k.day, k.currency, k.kind, j,
               (sum(coalesce(q.services, 0)) OVER w)::bigint AS services,
               (sum(coalesce(q.twelfths, 0)) OVER w)::bigint AS twelfths
        FROM (SELECT DISTINCT u.day, u.currency, u.kind FROM unnest(days, currencies, kinds) AS u(day, currency, kind)) k
        CROSS JOIN generate_series(0, 95) j
        LEFT JOIN mrr_quarters q
          ON q.quarter = (k.day::timestamp AT TIME ZONE 'UTC') + j * interval '15 minutes'
         AND q.currency = k.currency AND q.kind = k.kind
        WINDOW w AS (PARTITION BY k.day, k.currency, k.kind ORDER BY j)
    ) x
    GROUP BY x.day, x.currency, x.kind
    ON CONFLICT (day, currency, kind) DO UPDATE SET services = EXCLUDED.services, twelfths = EXCLUDED.twelfths
$$;
-- +goose StatementEnd

-- +goose StatementBegin
-- Moves the changes into the quarters, the days and the totals, and the
-- renewal schedule's into its quarters: how many it moved, 0 when another
-- fold holds the lock. One transaction, so a reader's snapshot sees a
-- change either unfolded or folded, never both.
CREATE OR REPLACE FUNCTION mrr_fold() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    moved_rows         bigint;
    empty_quarters     timestamptz[];
    empty_currencies   text[];
    touched_days       date[];
    touched_currencies text[];
    touched_kinds      text[];
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
    ), touched AS (
        SELECT DISTINCT (at AT TIME ZONE 'UTC')::date AS day, currency, kind FROM moved
    )
    SELECT (SELECT count(*) FROM moved) + (SELECT count(*) FROM schedule_moved),
           (SELECT array_agg(quarter) FROM schedule WHERE renewals = 0 AND cents = 0),
           (SELECT array_agg(currency) FROM schedule WHERE renewals = 0 AND cents = 0),
           (SELECT array_agg(day) FROM touched),
           (SELECT array_agg(currency) FROM touched),
           (SELECT array_agg(kind) FROM touched)
    INTO moved_rows, empty_quarters, empty_currencies, touched_days, touched_currencies, touched_kinds;
    -- A quarter whose renewals all moved on holds nothing: dropped, so the
    -- schedule keeps the quarters ahead (and the overdue), not every one
    -- past.
    IF empty_quarters IS NOT NULL THEN
        DELETE FROM renewal_schedule_quarters q
        USING unnest(empty_quarters, empty_currencies) AS e(quarter, currency)
        WHERE q.quarter = e.quarter AND q.currency = e.currency AND q.renewals = 0 AND q.cents = 0;
    END IF;
    -- The days of what moved, from their quarters as the statement above
    -- left them.
    IF touched_days IS NOT NULL THEN
        PERFORM mrr_days_refresh(touched_days, touched_currencies, touched_kinds);
    END IF;
    RETURN moved_rows;
END;
$$;
-- +goose StatementEnd

-- Every day the quarters hold, under the fold's lock (taken by its own
-- statement, so the backfill's snapshot is taken after it: a fold that
-- ran before it is seen whole); the lock is held to this migration's
-- commit, and a fold meanwhile finds it taken and waits for its next turn.
SELECT pg_advisory_xact_lock(hashtextextended('paymentd.mrr_fold', 0));
SELECT mrr_days_refresh(array_agg(d.day), array_agg(d.currency), array_agg(d.kind))
FROM (SELECT DISTINCT (quarter AT TIME ZONE 'UTC')::date AS day, currency, kind FROM mrr_quarters) d;

-- +goose Down
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

DROP FUNCTION mrr_days_refresh;
DROP TABLE mrr_days;
