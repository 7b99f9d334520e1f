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
    -- Empty until the gateway has told us (spec: filled after the callback).
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
-- however many payments a range holds. Two parts:
--   * payment_trend_changes: what each write to payments and refunds
--     changed, appended by the triggers below in the writer's own
--     transaction (an insert into a table without indexes: no row another
--     writer waits for);
--   * the rollup tables, into which payment_trends_fold() moves the
--     changes (paymentd calls it every few seconds). A reader sums both in
--     one snapshot, so the answer is exact whether a change is folded yet
--     or not.
-- A payment counts, like the statements this replaced:
--   * per currency, each event in the quarter it happened: created
--     (created_at), succeeded and received (paid_at, amount), failed
--     (failed_at), refunded (a succeeded refund's updated_at, refunds of
--     paid payments only: returned captured money was never received);
--   * per gateway interface, in the quarter it was created, by its status
--     now: created, succeeded (paid_at set), failed (failed_at set), and
--     its seconds from creation to success in a histogram (trend_seconds_bin).
-- A change is the row's figures now minus its figures before, so any write
-- (a fix by hand included) keeps the rollup equal to the tables; TRUNCATE
-- rebuilds it. payment_trends_rebuild() recomputes it from the tables.

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

-- Unfolded changes. kind: 'c' a currency's events (currency set), 'g' a
-- gateway interface's payments by creation (gateway_interface_id set), 's'
-- its times to success (seconds set; succeeded is the count). Figures are
-- signed: an update appends the row's figures after minus before.
CREATE TABLE payment_trend_changes (
    kind                 "char"        NOT NULL,
    quarter              timestamptz   NOT NULL,
    currency             text,
    gateway_interface_id uuid,
    seconds              smallint,
    created              integer       NOT NULL DEFAULT 0,
    succeeded            integer       NOT NULL DEFAULT 0,
    failed               integer       NOT NULL DEFAULT 0,
    received_cents       bigint        NOT NULL DEFAULT 0,
    refunded_cents       bigint        NOT NULL DEFAULT 0,
    CONSTRAINT payment_trend_changes_kind_check CHECK (kind IN ('c', 'g', 's'))
);

-- Per currency and quarter: payments created, received and failed in it,
-- money received and refunded in it, in cents (integers: a sum is exact
-- and never leaves its type, and the only NUMERIC columns stay the money
-- columns, NUMERIC(12,2)).
CREATE TABLE payment_trend_quarters (
    quarter   timestamptz NOT NULL,
    currency  text        NOT NULL,
    created   bigint      NOT NULL,
    succeeded bigint      NOT NULL,
    failed    bigint      NOT NULL,
    received_cents bigint NOT NULL,
    refunded_cents bigint NOT NULL,
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

-- The times to success of those payments, per bin: per quarter of
-- creation (read only at a range's ends, where its days do not fall on UTC
-- days) and per UTC day (the rest: a few hundred rows a day).
CREATE TABLE payment_trend_seconds_quarters (
    quarter              timestamptz NOT NULL,
    gateway_interface_id uuid        NOT NULL,
    seconds              smallint    NOT NULL,
    n                    bigint      NOT NULL,
    PRIMARY KEY (quarter, gateway_interface_id, seconds)
);
CREATE TABLE payment_trend_seconds_days (
    day                  date        NOT NULL,
    gateway_interface_id uuid        NOT NULL,
    seconds              smallint    NOT NULL,
    n                    bigint      NOT NULL,
    PRIMARY KEY (day, gateway_interface_id, seconds)
);

-- payment_trend_rows are a payment's figures, times sign (1 or -1): one
-- VALUES list filtered, not a union of selects (in a trigger, 16-21
-- against 30 µs a balance payment's insert).
-- +goose StatementBegin
CREATE FUNCTION payment_trend_rows(created_at timestamptz, paid_at timestamptz, failed_at timestamptz,
                                   currency text, gateway uuid, amount numeric, sign integer)
RETURNS TABLE (kind "char", quarter timestamptz, currency text, gateway_interface_id uuid, seconds smallint,
               created integer, succeeded integer, failed integer, received_cents bigint, refunded_cents bigint)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT v.kind, v.quarter, v.currency, v.gateway, v.seconds, v.created, v.succeeded, v.failed, v.received, 0::bigint
    FROM (VALUES
        ('c'::"char", trend_quarter(created_at), currency, NULL::uuid, NULL::smallint, sign, 0, 0, 0::bigint, true),
        ('c', trend_quarter(paid_at), currency, NULL, NULL, 0, sign, 0, sign * (amount * 100)::bigint, paid_at IS NOT NULL),
        ('c', trend_quarter(failed_at), currency, NULL, NULL, 0, 0, sign, 0, failed_at IS NOT NULL),
        ('g', trend_quarter(created_at), NULL, gateway, NULL, sign,
         CASE WHEN paid_at IS NOT NULL THEN sign ELSE 0 END, CASE WHEN failed_at IS NOT NULL THEN sign ELSE 0 END, 0,
         gateway IS NOT NULL),
        ('s', trend_quarter(created_at), NULL, gateway, trend_seconds_bin(extract(epoch FROM paid_at - created_at)::float8),
         0, sign, 0, 0, gateway IS NOT NULL AND paid_at IS NOT NULL)
    ) v(kind, quarter, currency, gateway, seconds, created, succeeded, failed, received, counted)
    WHERE v.counted;
END;
-- +goose StatementEnd

-- refund_trend_rows are a refund's figures, times sign: its amount on the
-- quarter it succeeded in, if it succeeded and its payment had been paid
-- (status and currency: the payment's now).
-- +goose StatementBegin
CREATE FUNCTION refund_trend_rows(refund_payment uuid, refund_status text, refund_at timestamptz,
                                  refund_amount numeric, sign integer)
RETURNS TABLE (kind "char", quarter timestamptz, currency text, gateway_interface_id uuid, seconds smallint,
               created integer, succeeded integer, failed integer, received_cents bigint, refunded_cents bigint)
LANGUAGE sql STABLE
BEGIN ATOMIC
    SELECT 'c'::"char", trend_quarter(refund_at), p.currency, NULL::uuid, NULL::smallint, 0, 0, 0, 0::bigint,
           sign * (refund_amount * 100)::bigint
    FROM payments p
    WHERE p.id = refund_payment AND refund_status = 'succeeded' AND p.status IN ('success', 'refunded');
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
    -- appends exactly the rows that path's sum leaves.
    IF TG_OP = 'UPDATE' AND OLD.paid_at IS NULL AND OLD.failed_at IS NULL
       AND (NEW.paid_at IS NULL) <> (NEW.failed_at IS NULL)
       AND NEW.created_at = OLD.created_at AND NEW.currency = OLD.currency AND NEW.amount = OLD.amount
       AND NEW.gateway_interface_id IS NOT DISTINCT FROM OLD.gateway_interface_id
       AND NEW.gateway_interface_id IS NOT NULL THEN
        created_q := trend_quarter(NEW.created_at);
        IF NEW.paid_at IS NOT NULL THEN
            INSERT INTO payment_trend_changes (kind, quarter, currency, gateway_interface_id, seconds, succeeded, received_cents) VALUES
                ('c', trend_quarter(NEW.paid_at), NEW.currency, NULL, NULL, 1, (NEW.amount * 100)::bigint),
                ('g', created_q, NULL, NEW.gateway_interface_id, NULL, 1, 0),
                ('s', created_q, NULL, NEW.gateway_interface_id,
                 trend_seconds_bin(extract(epoch FROM NEW.paid_at - NEW.created_at)::float8), 1, 0);
        ELSE
            INSERT INTO payment_trend_changes (kind, quarter, currency, gateway_interface_id, failed) VALUES
                ('c', trend_quarter(NEW.failed_at), NEW.currency, NULL, 1),
                ('g', created_q, NULL, NEW.gateway_interface_id, 1);
        END IF;
        RETURN NULL;
    END IF;
    -- A new payment's figures, a deleted one's taken back; anything else
    -- (a correction by hand): its figures after minus before.
    IF TG_OP = 'INSERT' THEN
        INSERT INTO payment_trend_changes
        SELECT * FROM payment_trend_rows(NEW.created_at, NEW.paid_at, NEW.failed_at, NEW.currency,
                                         NEW.gateway_interface_id, NEW.amount, 1);
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO payment_trend_changes
        SELECT * FROM payment_trend_rows(OLD.created_at, OLD.paid_at, OLD.failed_at, OLD.currency,
                                         OLD.gateway_interface_id, OLD.amount, -1);
    ELSE
        -- What did not change cancels out.
        INSERT INTO payment_trend_changes
        SELECT kind, quarter, currency, gateway_interface_id, seconds,
               sum(created), sum(succeeded), sum(failed), sum(received_cents), sum(refunded_cents)
        FROM (
            SELECT * FROM payment_trend_rows(NEW.created_at, NEW.paid_at, NEW.failed_at, NEW.currency,
                                             NEW.gateway_interface_id, NEW.amount, 1)
            UNION ALL
            SELECT * FROM payment_trend_rows(OLD.created_at, OLD.paid_at, OLD.failed_at, OLD.currency,
                                             OLD.gateway_interface_id, OLD.amount, -1)
        ) r
        GROUP BY kind, quarter, currency, gateway_interface_id, seconds
        HAVING sum(created) <> 0 OR sum(succeeded) <> 0 OR sum(failed) <> 0 OR sum(received_cents) <> 0;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION refunds_trend_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        INSERT INTO payment_trend_changes
        SELECT * FROM refund_trend_rows(OLD.payment_id, OLD.status, OLD.updated_at, OLD.amount, -1);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO payment_trend_changes
        SELECT * FROM refund_trend_rows(NEW.payment_id, NEW.status, NEW.updated_at, NEW.amount, 1);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- A payment's update is a change for the trends only when a column they
-- count moved: the others (the reconciler's bookkeeping, gateway ids,
-- refunded_amount) cost no trigger at all.
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
-- +goose StatementBegin
CREATE FUNCTION payment_trends_fold() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    moved_rows bigint;
BEGIN
    IF NOT pg_try_advisory_xact_lock(hashtextextended('paymentd.payment_trends_fold', 0)) THEN
        RETURN 0;
    END IF;
    WITH moved AS (
        DELETE FROM payment_trend_changes RETURNING *
    ), per_currency AS (
        INSERT INTO payment_trend_quarters AS t (quarter, currency, created, succeeded, failed, received_cents, refunded_cents)
        SELECT quarter, currency, sum(created), sum(succeeded), sum(failed), sum(received_cents), sum(refunded_cents)
        FROM moved WHERE kind = 'c' GROUP BY quarter, currency
        ON CONFLICT (quarter, currency) DO UPDATE SET
            created = t.created + EXCLUDED.created, succeeded = t.succeeded + EXCLUDED.succeeded,
            failed = t.failed + EXCLUDED.failed, received_cents = t.received_cents + EXCLUDED.received_cents,
            refunded_cents = t.refunded_cents + EXCLUDED.refunded_cents
    ), per_gateway AS (
        INSERT INTO payment_trend_gateway_quarters AS t (quarter, gateway_interface_id, created, succeeded, failed)
        SELECT quarter, gateway_interface_id, sum(created), sum(succeeded), sum(failed)
        FROM moved WHERE kind = 'g' GROUP BY quarter, gateway_interface_id
        ON CONFLICT (quarter, gateway_interface_id) DO UPDATE SET
            created = t.created + EXCLUDED.created, succeeded = t.succeeded + EXCLUDED.succeeded,
            failed = t.failed + EXCLUDED.failed
    ), seconds_quarters AS (
        INSERT INTO payment_trend_seconds_quarters AS t (quarter, gateway_interface_id, seconds, n)
        SELECT quarter, gateway_interface_id, seconds, sum(succeeded)
        FROM moved WHERE kind = 's' GROUP BY quarter, gateway_interface_id, seconds
        ON CONFLICT (quarter, gateway_interface_id, seconds) DO UPDATE SET n = t.n + EXCLUDED.n
    ), seconds_days AS (
        INSERT INTO payment_trend_seconds_days AS t (day, gateway_interface_id, seconds, n)
        SELECT (quarter AT TIME ZONE 'UTC')::date, gateway_interface_id, seconds, sum(succeeded)
        FROM moved WHERE kind = 's' GROUP BY 1, gateway_interface_id, seconds
        ON CONFLICT (day, gateway_interface_id, seconds) DO UPDATE SET n = t.n + EXCLUDED.n
    )
    SELECT count(*) INTO moved_rows FROM moved;
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
    TRUNCATE payment_trend_changes, payment_trend_quarters, payment_trend_gateway_quarters,
        payment_trend_seconds_quarters, payment_trend_seconds_days;
    INSERT INTO payment_trend_changes
    SELECT r.* FROM payments p,
        LATERAL payment_trend_rows(p.created_at, p.paid_at, p.failed_at, p.currency, p.gateway_interface_id, p.amount, 1) r;
    INSERT INTO payment_trend_changes
    SELECT r.* FROM refunds f, LATERAL refund_trend_rows(f.payment_id, f.status, f.updated_at, f.amount, 1) r
    WHERE f.status = 'succeeded';
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
DROP FUNCTION refund_trend_rows;
DROP TABLE refunds;
DROP TABLE payments;
DROP TABLE payment_trend_changes, payment_trend_quarters, payment_trend_gateway_quarters,
    payment_trend_seconds_quarters, payment_trend_seconds_days;
DROP FUNCTION payment_trends_fold, payment_trends_rebuild, payments_trend_change, refunds_trend_change,
    payments_trends_truncated, payment_trend_rows, trend_quarter, trend_seconds_bin, trend_seconds_value;
