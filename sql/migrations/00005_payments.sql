-- Payments and refunds.

-- +goose Up
CREATE TABLE payments (
    id                   uuid          PRIMARY KEY DEFAULT gen_random_uuid(),
    -- At least one of order_id / invoice_id is set (payments_target_check).
    order_id             uuid,
    invoice_id           uuid,
    -- Owner of the payment; customers see only their own (ListPayments, GetPayment).
    customer_id          uuid          NOT NULL REFERENCES customers (id) ON DELETE RESTRICT,
    -- gateway: paid through gateway_interface_id; balance: paid from the
    -- customer balance in the same transaction that creates the row.
    method               text          NOT NULL DEFAULT 'gateway',
    gateway_interface_id uuid          REFERENCES gateway_interfaces (id) ON DELETE RESTRICT,
    amount               NUMERIC(12,2) NOT NULL,
    refunded_amount      NUMERIC(12,2) NOT NULL DEFAULT 0,
    currency             text          NOT NULL,
    status               text          NOT NULL DEFAULT 'pending',
    -- Empty until the gateway has told us (docs/api.md: filled when it settles).
    gateway_payment_id   text          NOT NULL DEFAULT '',
    gateway_tx_id        text          NOT NULL DEFAULT '',
    paid_at              timestamptz,
    -- What create_payment of the gateway plugin answered, so that a repeated
    -- CreatePayment can return the same pending payment unchanged.
    payment_url          text          NOT NULL DEFAULT '',
    qr_code              text          NOT NULL DEFAULT '',
    instructions         text          NOT NULL DEFAULT '',
    return_url           text          NOT NULL DEFAULT '',
    -- Why the payment failed (gateway status, order cancelled, ...), and when.
    failure_reason       text          NOT NULL DEFAULT '',
    failed_at            timestamptz,
    -- Captured money: the gateway took the payment's amount although the
    -- payment could no longer apply (a success reported after it failed,
    -- or for an order or invoice already closed). The payment stays failed
    -- (a final state is never left); the money is to be returned with
    -- RefundPayment (refunded_amount counts what went back). captured_at is
    -- when the gateway says it took the money.
    captured_amount      NUMERIC(12,2) NOT NULL DEFAULT 0,
    captured_at          timestamptz,
    -- Reconciler bookkeeping for gateway payments, pending ones and failed
    -- ones within [payments].late_capture_days: how often the gateway was
    -- asked, and when to ask next (NULL: not scheduled).
    reconcile_attempts   integer       NOT NULL DEFAULT 0,
    next_reconcile_at    timestamptz,
    created_at           timestamptz   NOT NULL DEFAULT now(),
    updated_at           timestamptz   NOT NULL DEFAULT now(),
    CONSTRAINT payments_status_check CHECK (status IN ('pending', 'success', 'failed', 'refunded')),
    CONSTRAINT payments_method_check CHECK (method IN ('gateway', 'balance')),
    CONSTRAINT payments_target_check CHECK (order_id IS NOT NULL OR invoice_id IS NOT NULL),
    -- A gateway payment names its gateway interface; a balance payment has none.
    CONSTRAINT payments_gateway_interface_check CHECK (
        (method = 'gateway') = (gateway_interface_id IS NOT NULL)),
    CONSTRAINT payments_amount_check CHECK (amount > 0),
    CONSTRAINT payments_refunded_amount_check CHECK (refunded_amount >= 0 AND refunded_amount <= amount),
    -- Only a paid payment, or a failed one whose money was captured, can
    -- have refunds; a paid one is "refunded" exactly when the refunds reach
    -- the full amount (a partial refund stays "success"); captured money
    -- returned in full leaves the payment failed.
    CONSTRAINT payments_refund_requires_paid_check CHECK (
        refunded_amount = 0 OR status IN ('success', 'refunded') OR (status = 'failed' AND captured_amount > 0)),
    CONSTRAINT payments_refunded_status_check CHECK (
        (status = 'refunded') = (refunded_amount = amount AND status <> 'failed')),
    -- failed_at is set exactly when the payment failed.
    CONSTRAINT payments_failed_at_check CHECK ((status = 'failed') = (failed_at IS NOT NULL)),
    -- Money is captured in full or not at all, only on a failed payment.
    CONSTRAINT payments_captured_check CHECK (
        (captured_amount = 0 AND captured_at IS NULL)
        OR (status = 'failed' AND captured_amount = amount AND captured_at IS NOT NULL)),
    -- paid_at is set exactly when the money was received.
    CONSTRAINT payments_paid_at_check CHECK (
        (status IN ('success', 'refunded')) = (paid_at IS NOT NULL)),
    CONSTRAINT payments_currency_check CHECK (currency ~ '^[A-Z]{3}$'),
    CONSTRAINT payments_reconcile_attempts_check CHECK (reconcile_attempts >= 0),
    -- The customer and currency of a payment are those of its order and
    -- invoice, and an invoice paid together with an order belongs to it.
    -- (MATCH SIMPLE: a key with a NULL column is not checked.)
    CONSTRAINT payments_order_fkey FOREIGN KEY (order_id, customer_id, currency)
        REFERENCES orders (id, customer_id, currency) ON DELETE RESTRICT,
    CONSTRAINT payments_invoice_fkey FOREIGN KEY (invoice_id, customer_id, currency)
        REFERENCES invoices (id, customer_id, currency) ON DELETE RESTRICT,
    CONSTRAINT payments_invoice_order_fkey FOREIGN KEY (invoice_id, order_id)
        REFERENCES invoices (id, order_id) ON DELETE RESTRICT
);

-- At most one pending payment per (order, invoice, gateway interface); a
-- repeated CreatePayment returns that one. NULLS NOT DISTINCT so that an
-- order-only payment (invoice_id NULL) is covered too.
CREATE UNIQUE INDEX payments_one_pending_key ON payments (order_id, invoice_id, gateway_interface_id)
    NULLS NOT DISTINCT WHERE status = 'pending';
-- A gateway payment id identifies one payment within its gateway interface.
CREATE UNIQUE INDEX payments_gateway_payment_id_key ON payments (gateway_interface_id, gateway_payment_id)
    WHERE gateway_payment_id <> '';
-- ListPayments orders by created_at DESC, id DESC, overall and per customer.
CREATE INDEX payments_created_at_idx ON payments (created_at DESC, id DESC);
CREATE INDEX payments_customer_id_idx ON payments (customer_id, created_at DESC, id DESC);
CREATE INDEX payments_order_id_idx ON payments (order_id);
-- Partial: most payments pay an order alone, and a payment without an
-- invoice then costs this index nothing, on insert or on update.
CREATE INDEX payments_invoice_id_idx ON payments (invoice_id) WHERE invoice_id IS NOT NULL;
CREATE INDEX payments_gateway_interface_id_idx ON payments (gateway_interface_id, created_at DESC, id DESC);
-- The reconciler asks the gateway about the payments that are due (pending
-- ones, and failed ones within [payments].late_capture_days).
CREATE INDEX payments_reconcile_idx ON payments (next_reconcile_at) WHERE next_reconcile_at IS NOT NULL;
-- Captured money not yet returned in full (few): ListPayments' to_return
-- filter, GetPaymentStats' "money to return".
CREATE INDEX payments_to_return_idx ON payments (created_at DESC, id DESC) WHERE captured_amount > refunded_amount;

COMMENT ON COLUMN payments.status IS 'pending | success | failed | refunded. pending -> success | failed; success -> refunded when refunded_amount reaches amount.';
COMMENT ON COLUMN payments.captured_amount IS 'Money the gateway captured for a failed payment (0 or amount), to be returned; refunded_amount counts what went back.';
COMMENT ON COLUMN payments.amount IS 'Amount to pay, NUMERIC(12,2), > 0, in payments.currency.';
COMMENT ON COLUMN payments.refunded_amount IS 'Sum of the refunds of this payment, NUMERIC(12,2), 0 <= refunded_amount <= amount.';

CREATE TABLE refunds (
    id                uuid          PRIMARY KEY DEFAULT gen_random_uuid(),
    payment_id        uuid          NOT NULL REFERENCES payments (id) ON DELETE RESTRICT,
    -- In the payment's currency.
    amount            NUMERIC(12,2) NOT NULL,
    status            text          NOT NULL DEFAULT 'pending',
    gateway_refund_id text          NOT NULL DEFAULT '',
    reason            text          NOT NULL DEFAULT '',
    -- The admin who asked for it; NULL for an automatic refund by the system
    -- (provisioning failed, order cancelled).
    requested_by      uuid          REFERENCES admin_users (id) ON DELETE RESTRICT,
    -- Last error of the gateway refund call.
    error             text          NOT NULL DEFAULT '',
    -- Where the money goes: back through the payment's gateway, or to the
    -- customer's balance (a balance payment's refund always; a gateway
    -- payment's when the admin chooses it), decided in one transaction.
    destination       text          NOT NULL DEFAULT 'gateway',
    created_at        timestamptz   NOT NULL DEFAULT now(),
    updated_at        timestamptz   NOT NULL DEFAULT now(),
    CONSTRAINT refunds_status_check CHECK (status IN ('pending', 'succeeded', 'failed')),
    CONSTRAINT refunds_destination_check CHECK (
        destination = 'gateway' OR (destination = 'balance' AND status = 'succeeded')),
    CONSTRAINT refunds_amount_check CHECK (amount > 0)
);

CREATE INDEX refunds_payment_id_idx ON refunds (payment_id, created_at);
CREATE INDEX refunds_requested_by_idx ON refunds (requested_by);
-- The admin's list of every payment's refunds (ListRefunds without a
-- payment), newest first, read a page at a time in index order.
CREATE INDEX refunds_created_at_idx ON refunds (created_at DESC, id DESC);
-- Refunds in one status, newest first: the admin's list filtered by status
-- and its count, and the pending ones (waiting for the gateway or an
-- admin; few) that the dashboard and a metric count. Each is a range of
-- this index, however many refunds are in the other statuses. (It replaced
-- a partial index of the pending ones, which served only those.)
CREATE INDEX refunds_status_created_at_idx ON refunds (status, created_at DESC, id DESC);

-- The trends' rollup (GetPaymentTrends; docs/decisions.md, "trends
-- rollup"). What the dashboard's charts count is kept per quarter hour of
-- UTC, so that the days of any time zone can be cut from it (every zone's
-- midnights fall on a quarter hour), and read in a few thousand rows
-- however many payments a range holds.
--
--   payments, refunds ──triggers──▶ payment_trend_*_changes ──payment_trends_fold()──▶ payment_trend_*_quarters, _days
--
-- Each rollup table has a changes table of the same columns: a change row
-- is what one write adds to one rollup row (signed), appended by the
-- triggers below in the writer's own transaction (a table without indexes:
-- no row another writer waits for). payment_trends_fold() (paymentd calls
-- it every few seconds) moves the changes into the rollup. A reader sums
-- both in one snapshot, so the answer is exact whether a change is folded
-- yet or not.
--
-- A payment counts, like the statements this replaced:
--   * per currency (payment_trend_currency_*), each event in the quarter it
--     happened: created (created_at), succeeded and received (paid_at,
--     amount), failed (failed_at), refunded (a succeeded refund's
--     updated_at, refunds of paid payments only: returned captured money
--     was never received);
--   * per gateway interface (payment_trend_gateway_*), in the quarter it was
--     created, by its status now: created, succeeded (paid_at set), failed
--     (failed_at set);
--   * and its seconds from creation to success, in the same quarter, in a
--     histogram (payment_trend_seconds_*: how many payments in each bin of
--     trend_seconds_bin).
-- "Paid" is paid_at set, which is status success or refunded
-- (payments_paid_at_check), so a status edit that matters moves paid_at.
-- The figures are defined once, by payment_currency_trends,
-- payment_gateway_trends, payment_seconds_trends and refund_trends; a
-- change is a row's figures after its write minus before it, so any write
-- (a fix by hand included) keeps the rollup equal to the tables, with one
-- rule: a statement that changes a payment's paid_at or currency, or
-- deletes it, does not also write that payment's refunds (each trigger
-- reads the other table as the statement left it). TRUNCATE rebuilds;
-- payment_trends_rebuild() recomputes the rollup from the tables.

-- trend_quarter is the UTC quarter hour t falls in.
CREATE FUNCTION trend_quarter(t timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN date_bin('15 minutes', t, TIMESTAMPTZ '2000-01-01 00:00:00+00');

-- trend_seconds_bin is the histogram bin of a time to success: whole
-- seconds below 128 s (rounded; 127.5 s and up counts as 127), then 32 bins
-- per doubling from 128 s (each 2.2 % wide), so a time counts as within
-- 0.5 s of itself below 127.5 s and within 1.1 % above, and a median read
-- from the bins is within 0.5 s + 1.1 % of the exact one. A negative time
-- (clocks) is 0.
CREATE FUNCTION trend_seconds_bin(s double precision) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN s < 128 THEN least(greatest(round(s), 0), 127)
            ELSE 128 + greatest(floor(32 * ln(s / 128) / ln(2)), 0) END;

-- trend_seconds_value is what a bin counts as: its second below 128 s,
-- the middle of its range above.
CREATE FUNCTION trend_seconds_value(bin smallint) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN bin < 128 THEN bin
            ELSE 128 * power(2, (bin - 128) / 32.0) * (1 + power(2, 1 / 32.0)) / 2 END;

-- Per currency and quarter: payments created, received and failed in it,
-- money received and refunded in it, in cents (integers: a sum is exact
-- and never leaves its type, and the only NUMERIC columns stay the money
-- columns, NUMERIC(12,2)).
CREATE TABLE payment_trend_currency_quarters (
    quarter        timestamptz NOT NULL,
    currency       text        NOT NULL,
    created        bigint      NOT NULL,
    succeeded      bigint      NOT NULL,
    failed         bigint      NOT NULL,
    received_cents bigint      NOT NULL,
    refunded_cents bigint      NOT NULL,
    PRIMARY KEY (quarter, currency)
);

-- Per gateway interface and quarter of creation: its payments created
-- then, and of those how many succeeded and failed by now.
CREATE TABLE payment_trend_gateway_quarters (
    quarter              timestamptz NOT NULL,
    gateway_interface_id uuid        NOT NULL,
    created              bigint      NOT NULL,
    succeeded            bigint      NOT NULL,
    failed               bigint      NOT NULL,
    PRIMARY KEY (quarter, gateway_interface_id)
);

-- The times to success of those payments: n of them fell in bin
-- seconds_bin (trend_seconds_bin). Per quarter of creation (read only at a
-- range's ends, where its days do not fall on UTC days) and per UTC day
-- (the rest: a few hundred rows a day).
CREATE TABLE payment_trend_seconds_quarters (
    quarter              timestamptz NOT NULL,
    gateway_interface_id uuid        NOT NULL,
    seconds_bin          smallint    NOT NULL,
    n                    bigint      NOT NULL,
    PRIMARY KEY (quarter, gateway_interface_id, seconds_bin)
);
CREATE TABLE payment_trend_seconds_days (
    day                  date        NOT NULL,
    gateway_interface_id uuid        NOT NULL,
    seconds_bin          smallint    NOT NULL,
    n                    bigint      NOT NULL,
    PRIMARY KEY (day, gateway_interface_id, seconds_bin)
);

-- The changes not folded yet, one table per rollup table and of its
-- columns (the days' rows are folded from the seconds' quarters). A row is
-- signed figures to add to the rollup row of its key; several rows of one
-- key add up. No key, no index.
CREATE TABLE payment_trend_currency_changes (LIKE payment_trend_currency_quarters);
CREATE TABLE payment_trend_gateway_changes (LIKE payment_trend_gateway_quarters);
CREATE TABLE payment_trend_seconds_changes (LIKE payment_trend_seconds_quarters);

-- payment_currency_trends are a payment's figures per currency, times sign
-- (1 or -1): one VALUES list filtered, not a union of selects (in a
-- trigger, 16-21 against 30 µs a balance payment's insert).
-- +goose StatementBegin
CREATE FUNCTION payment_currency_trends(created_at timestamptz, paid_at timestamptz, failed_at timestamptz,
                                        currency text, amount numeric, sign integer)
RETURNS SETOF payment_trend_currency_changes
LANGUAGE sql IMMUTABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT v.quarter, currency, v.created, v.succeeded, v.failed, v.received, 0::bigint
    FROM (VALUES
        (trend_quarter(created_at), sign::bigint, 0::bigint, 0::bigint, 0::bigint, true),
        (trend_quarter(paid_at), 0, sign, 0, sign * (amount * 100)::bigint, paid_at IS NOT NULL),
        (trend_quarter(failed_at), 0, 0, sign, 0, failed_at IS NOT NULL)
    ) v(quarter, created, succeeded, failed, received, counted)
    WHERE v.counted;
END;
-- +goose StatementEnd

-- payment_gateway_trends are a gateway payment's figures per gateway
-- interface, times sign: none for a balance payment.
-- +goose StatementBegin
CREATE FUNCTION payment_gateway_trends(created_at timestamptz, paid_at timestamptz, failed_at timestamptz,
                                       gateway uuid, sign integer)
RETURNS SETOF payment_trend_gateway_changes
LANGUAGE sql IMMUTABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT trend_quarter(created_at), gateway, sign::bigint,
           CASE WHEN paid_at IS NOT NULL THEN sign ELSE 0 END::bigint,
           CASE WHEN failed_at IS NOT NULL THEN sign ELSE 0 END::bigint
    WHERE gateway IS NOT NULL;
END;
-- +goose StatementEnd

-- payment_seconds_trends are a paid gateway payment's time to success,
-- times sign: its bin, counted once.
-- +goose StatementBegin
CREATE FUNCTION payment_seconds_trends(created_at timestamptz, paid_at timestamptz, gateway uuid, sign integer)
RETURNS SETOF payment_trend_seconds_changes
LANGUAGE sql IMMUTABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT trend_quarter(created_at), gateway, trend_seconds_bin(extract(epoch FROM paid_at - created_at)::float8),
           sign::bigint
    WHERE gateway IS NOT NULL AND paid_at IS NOT NULL;
END;
-- +goose StatementEnd

-- refund_trends are a refund's figures, times sign: its amount on the
-- quarter it succeeded in, if it succeeded and its payment is paid
-- (payment_currency and payment_paid: the payment's).
-- +goose StatementBegin
CREATE FUNCTION refund_trends(payment_currency text, payment_paid boolean, refund_status text,
                              refund_at timestamptz, refund_amount numeric, sign integer)
RETURNS SETOF payment_trend_currency_changes
LANGUAGE sql IMMUTABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT trend_quarter(refund_at), payment_currency, 0::bigint, 0::bigint, 0::bigint, 0::bigint,
           sign * (refund_amount * 100)::bigint
    WHERE refund_status = 'succeeded' AND payment_paid;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION payments_trend_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    created_q timestamptz;
BEGIN
    -- The callback's move, written out (14-28 against 37-51 µs a row
    -- through the after-minus-before below): a pending gateway payment
    -- decided, paid or failed, with nothing else counted changing. It
    -- appends what that path would, less what cancels out: the figures
    -- the decision adds, and the succeeded refunds that count now the
    -- payment is paid (none, unless written by hand while it was pending;
    -- one probe of refunds_payment_id_idx). TestPaymentTrendsFromTheRollupAreWhatThePaymentsSay
    -- holds the two paths to the same rollup.
    IF TG_OP = 'UPDATE' AND OLD.paid_at IS NULL AND OLD.failed_at IS NULL
       AND (NEW.paid_at IS NULL) <> (NEW.failed_at IS NULL)
       AND NEW.created_at = OLD.created_at AND NEW.currency = OLD.currency AND NEW.amount = OLD.amount
       AND NEW.gateway_interface_id IS NOT DISTINCT FROM OLD.gateway_interface_id
       AND NEW.gateway_interface_id IS NOT NULL THEN
        created_q := trend_quarter(NEW.created_at);
        IF NEW.paid_at IS NOT NULL THEN
            WITH per_gateway AS (
                INSERT INTO payment_trend_gateway_changes VALUES (created_q, NEW.gateway_interface_id, 0, 1, 0)
            ), seconds AS (
                INSERT INTO payment_trend_seconds_changes VALUES (created_q, NEW.gateway_interface_id,
                    trend_seconds_bin(extract(epoch FROM NEW.paid_at - NEW.created_at)::float8), 1)
            )
            INSERT INTO payment_trend_currency_changes
            VALUES (trend_quarter(NEW.paid_at), NEW.currency, 0, 1, 0, (NEW.amount * 100)::bigint, 0)
            UNION ALL
            SELECT r.* FROM refunds f, LATERAL refund_trends(NEW.currency, true, f.status, f.updated_at, f.amount, 1) r
            WHERE f.payment_id = NEW.id;
        ELSE
            WITH per_gateway AS (
                INSERT INTO payment_trend_gateway_changes VALUES (created_q, NEW.gateway_interface_id, 0, 0, 1)
            )
            INSERT INTO payment_trend_currency_changes VALUES (trend_quarter(NEW.failed_at), NEW.currency, 0, 0, 1, 0, 0);
        END IF;
        RETURN NULL;
    END IF;
    -- Anything else: a new payment's figures, a deleted one's taken back,
    -- an updated one's (a correction by hand) before taken back and after
    -- added, what did not change cancelling out in the fold. An update
    -- also takes back and adds its succeeded refunds, which count by its
    -- paid_at and currency (a new payment has no refunds yet, a deleted
    -- one none left).
    WITH p AS (
        SELECT NEW.id, NEW.created_at, NEW.paid_at, NEW.failed_at, NEW.currency, NEW.gateway_interface_id AS gateway,
               NEW.amount, 1 AS sign
        WHERE TG_OP <> 'DELETE'
        UNION ALL
        SELECT OLD.id, OLD.created_at, OLD.paid_at, OLD.failed_at, OLD.currency, OLD.gateway_interface_id,
               OLD.amount, -1
        WHERE TG_OP <> 'INSERT'
    ), per_gateway AS (
        INSERT INTO payment_trend_gateway_changes
        SELECT r.* FROM p, LATERAL payment_gateway_trends(p.created_at, p.paid_at, p.failed_at, p.gateway, p.sign) r
    ), seconds AS (
        INSERT INTO payment_trend_seconds_changes
        SELECT r.* FROM p, LATERAL payment_seconds_trends(p.created_at, p.paid_at, p.gateway, p.sign) r
    )
    INSERT INTO payment_trend_currency_changes
    SELECT r.* FROM p, LATERAL payment_currency_trends(p.created_at, p.paid_at, p.failed_at, p.currency, p.amount, p.sign) r
    UNION ALL
    SELECT r.* FROM p JOIN refunds f ON f.payment_id = p.id,
        LATERAL refund_trends(p.currency, p.paid_at IS NOT NULL, f.status, f.updated_at, f.amount, p.sign) r
    WHERE TG_OP = 'UPDATE';
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- A refund counts by its payment's paid_at and currency as they are now.
-- +goose StatementBegin
CREATE FUNCTION refunds_trend_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        INSERT INTO payment_trend_currency_changes
        SELECT r.* FROM payments p,
            LATERAL refund_trends(p.currency, p.paid_at IS NOT NULL, OLD.status, OLD.updated_at, OLD.amount, -1) r
        WHERE p.id = OLD.payment_id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO payment_trend_currency_changes
        SELECT r.* FROM payments p,
            LATERAL refund_trends(p.currency, p.paid_at IS NOT NULL, NEW.status, NEW.updated_at, NEW.amount, 1) r
        WHERE p.id = NEW.payment_id;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- A payment's update is a change for the trends only when a column they
-- count moved: the others (the reconciler's bookkeeping, gateway ids,
-- refunded_amount) cost no trigger at all. status is not one: paid_at
-- moves with it wherever it matters (payments_paid_at_check), and success
-- → refunded changes no figure.
CREATE TRIGGER payments_trend_insert_delete AFTER INSERT OR DELETE ON payments
    FOR EACH ROW EXECUTE FUNCTION payments_trend_change();
CREATE TRIGGER payments_trend_update AFTER UPDATE ON payments
    FOR EACH ROW WHEN (OLD.created_at IS DISTINCT FROM NEW.created_at OR OLD.paid_at IS DISTINCT FROM NEW.paid_at
        OR OLD.failed_at IS DISTINCT FROM NEW.failed_at OR OLD.currency IS DISTINCT FROM NEW.currency
        OR OLD.gateway_interface_id IS DISTINCT FROM NEW.gateway_interface_id OR OLD.amount IS DISTINCT FROM NEW.amount)
    EXECUTE FUNCTION payments_trend_change();
-- A pending refund's updates (its error, its gateway id) are no change.
CREATE TRIGGER refunds_trend_insert AFTER INSERT ON refunds
    FOR EACH ROW WHEN (NEW.status = 'succeeded') EXECUTE FUNCTION refunds_trend_change();
CREATE TRIGGER refunds_trend_delete AFTER DELETE ON refunds
    FOR EACH ROW WHEN (OLD.status = 'succeeded') EXECUTE FUNCTION refunds_trend_change();
CREATE TRIGGER refunds_trend_update AFTER UPDATE ON refunds
    FOR EACH ROW WHEN ((OLD.status = 'succeeded' OR NEW.status = 'succeeded')
        AND (OLD.status, OLD.updated_at, OLD.amount, OLD.payment_id) IS DISTINCT FROM (NEW.status, NEW.updated_at, NEW.amount, NEW.payment_id))
    EXECUTE FUNCTION refunds_trend_change();

-- payment_trends_fold moves the changes into the rollup and answers how
-- many it moved. The rows it deletes are those its snapshot sees; a
-- concurrent fold skips (the advisory lock), and a writer's changes
-- committed meanwhile wait for the next one. Nothing is lost or counted
-- twice: a change is deleted in the transaction that adds it to the rollup.
-- A key whose changes cancel out (a correction that moved nothing it
-- counts) writes no rollup row.
-- +goose StatementBegin
CREATE FUNCTION payment_trends_fold() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    moved_rows bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtextextended('paymentd.payment_trends_fold', 0)) THEN
        RETURN 0;
    END IF;
    WITH currency_moved AS (
        DELETE FROM payment_trend_currency_changes RETURNING *
    ), gateway_moved AS (
        DELETE FROM payment_trend_gateway_changes RETURNING *
    ), seconds_moved AS (
        DELETE FROM payment_trend_seconds_changes RETURNING *
    ), per_currency AS (
        INSERT INTO payment_trend_currency_quarters AS t
        SELECT quarter, currency, sum(created), sum(succeeded), sum(failed), sum(received_cents), sum(refunded_cents)
        FROM currency_moved GROUP BY quarter, currency
        HAVING sum(created) <> 0 OR sum(succeeded) <> 0 OR sum(failed) <> 0 OR sum(received_cents) <> 0
            OR sum(refunded_cents) <> 0
        ON CONFLICT (quarter, currency) DO UPDATE SET
            created = t.created + EXCLUDED.created, succeeded = t.succeeded + EXCLUDED.succeeded,
            failed = t.failed + EXCLUDED.failed, received_cents = t.received_cents + EXCLUDED.received_cents,
            refunded_cents = t.refunded_cents + EXCLUDED.refunded_cents
    ), per_gateway AS (
        INSERT INTO payment_trend_gateway_quarters AS t
        SELECT quarter, gateway_interface_id, sum(created), sum(succeeded), sum(failed)
        FROM gateway_moved GROUP BY quarter, gateway_interface_id
        HAVING sum(created) <> 0 OR sum(succeeded) <> 0 OR sum(failed) <> 0
        ON CONFLICT (quarter, gateway_interface_id) DO UPDATE SET
            created = t.created + EXCLUDED.created, succeeded = t.succeeded + EXCLUDED.succeeded,
            failed = t.failed + EXCLUDED.failed
    ), seconds_quarters AS (
        INSERT INTO payment_trend_seconds_quarters AS t
        SELECT quarter, gateway_interface_id, seconds_bin, sum(n)
        FROM seconds_moved GROUP BY quarter, gateway_interface_id, seconds_bin HAVING sum(n) <> 0
        ON CONFLICT (quarter, gateway_interface_id, seconds_bin) DO UPDATE SET n = t.n + EXCLUDED.n
    ), seconds_days AS (
        INSERT INTO payment_trend_seconds_days AS t
        SELECT (quarter AT TIME ZONE 'UTC')::date, gateway_interface_id, seconds_bin, sum(n)
        FROM seconds_moved GROUP BY 1, gateway_interface_id, seconds_bin HAVING sum(n) <> 0
        ON CONFLICT (day, gateway_interface_id, seconds_bin) DO UPDATE SET n = t.n + EXCLUDED.n
    )
    SELECT (SELECT count(*) FROM currency_moved) + (SELECT count(*) FROM gateway_moved)
         + (SELECT count(*) FROM seconds_moved)
    INTO moved_rows;
    RETURN moved_rows;
END;
$$;
-- +goose StatementEnd

-- payment_trends_rebuild recomputes the rollup from payments and refunds
-- (after a TRUNCATE; by hand if it were ever in doubt). Writers that change
-- a payment meanwhile wait for it (the TRUNCATE's lock) and then append
-- their change to what it computed from the rows before theirs.
-- +goose StatementBegin
CREATE FUNCTION payment_trends_rebuild() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE payment_trend_currency_changes, payment_trend_gateway_changes, payment_trend_seconds_changes,
        payment_trend_currency_quarters, payment_trend_gateway_quarters,
        payment_trend_seconds_quarters, payment_trend_seconds_days;
    INSERT INTO payment_trend_currency_changes
    SELECT r.* FROM payments p,
        LATERAL payment_currency_trends(p.created_at, p.paid_at, p.failed_at, p.currency, p.amount, 1) r
    UNION ALL
    SELECT r.* FROM refunds f JOIN payments p ON p.id = f.payment_id,
        LATERAL refund_trends(p.currency, p.paid_at IS NOT NULL, f.status, f.updated_at, f.amount, 1) r
    WHERE f.status = 'succeeded';
    INSERT INTO payment_trend_gateway_changes
    SELECT r.* FROM payments p,
        LATERAL payment_gateway_trends(p.created_at, p.paid_at, p.failed_at, p.gateway_interface_id, 1) r;
    INSERT INTO payment_trend_seconds_changes
    SELECT r.* FROM payments p, LATERAL payment_seconds_trends(p.created_at, p.paid_at, p.gateway_interface_id, 1) r;
    PERFORM payment_trends_fold();
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION payments_trends_truncated() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM payment_trends_rebuild();
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER payments_trends_truncated AFTER TRUNCATE ON payments
    FOR EACH STATEMENT EXECUTE FUNCTION payments_trends_truncated();
CREATE TRIGGER refunds_trends_truncated AFTER TRUNCATE ON refunds
    FOR EACH STATEMENT EXECUTE FUNCTION payments_trends_truncated();
CREATE UNIQUE INDEX refunds_gateway_refund_id_key ON refunds (payment_id, gateway_refund_id)
    WHERE gateway_refund_id <> '';

COMMENT ON COLUMN refunds.status IS 'pending | succeeded | failed.';
COMMENT ON COLUMN refunds.amount IS 'Refunded amount, NUMERIC(12,2), > 0, in the payment''s currency.';

-- +goose Down
DROP TABLE refunds;
DROP TABLE payments;
DROP FUNCTION payment_trends_fold, payment_trends_rebuild, payments_trend_change, refunds_trend_change,
    payments_trends_truncated, payment_currency_trends, payment_gateway_trends, payment_seconds_trends,
    refund_trends;
DROP TABLE payment_trend_currency_changes, payment_trend_gateway_changes, payment_trend_seconds_changes,
    payment_trend_currency_quarters, payment_trend_gateway_quarters,
    payment_trend_seconds_quarters, payment_trend_seconds_days;
DROP FUNCTION trend_quarter, trend_seconds_bin, trend_seconds_value;
