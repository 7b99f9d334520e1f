-- Invoice lines and gapless invoice numbers (issue 38, section 1).

-- +goose Up
-- What an invoice bills, line by line. An invoice's amount is the sum of
-- its lines: invoice_lines_sum_check, a deferred constraint trigger on both
-- tables, checks it at commit, so a transaction inserts the invoice, then
-- its lines. A line may be negative (a credit, the unused part of a plan)
-- or zero; the invoice's own amount stays > 0 (invoices_amount_check).
CREATE TABLE invoice_lines (
    invoice_id   uuid          NOT NULL REFERENCES invoices (id) ON DELETE CASCADE,
    -- 1, 2, ... in the order the invoice lists them.
    position     integer       NOT NULL,
    description  text          NOT NULL,
    -- The period the line bills (a renewal's service period); both NULL
    -- for a line that bills no period.
    period_start timestamptz,
    period_end   timestamptz,
    quantity     integer       NOT NULL DEFAULT 1,
    unit_amount  NUMERIC(12,2) NOT NULL,
    amount       NUMERIC(12,2) NOT NULL,
    created_at   timestamptz   NOT NULL DEFAULT now(),
    PRIMARY KEY (invoice_id, position),
    CONSTRAINT invoice_lines_position_check CHECK (position >= 1),
    CONSTRAINT invoice_lines_quantity_check CHECK (quantity >= 1),
    CONSTRAINT invoice_lines_amount_check CHECK (amount = quantity * unit_amount),
    CONSTRAINT invoice_lines_period_check CHECK (
        (period_start IS NULL) = (period_end IS NULL) AND period_end > period_start)
);

COMMENT ON TABLE invoice_lines IS 'What an invoice bills; invoices.amount is the sum of its lines (invoice_lines_sum_check, at commit).';
COMMENT ON COLUMN invoice_lines.amount IS 'quantity * unit_amount, NUMERIC(12,2), may be negative (a credit), in the invoice''s currency.';

-- One line for each invoice made before lines existed: its description and
-- amount, quantity 1, and the period it bills when it is a renewal's.
-- Before the check's triggers, which then have nothing queued for them.
INSERT INTO invoice_lines (invoice_id, position, description, period_start, period_end,
                           quantity, unit_amount, amount, created_at)
SELECT i.id, 1, i.description, sp.starts_at, sp.ends_at, 1, i.amount, i.amount, i.created_at
FROM invoices i
LEFT JOIN service_periods sp ON sp.invoice_id = i.id;

-- invoice_lines_sum_check: the invoice's amount equals the sum of its
-- lines. Run at commit (DEFERRABLE INITIALLY DEFERRED) for each invoice
-- inserted or whose amount changed, and each invoice a line was added to,
-- changed on or removed from. An invoice deleted meanwhile has nothing to
-- check (its lines went with it).
--
-- v0.1.0 writes invoices without lines, and it keeps serving beside this
-- release during a rolling upgrade (docs/operations.md, "Which versions run
-- side by side"): an invoice that reaches its commit with no line at all
-- and a number of v0.1.0's form (INV-<yyyymmdd>-<12 hex digits>, which
-- this release no longer gives) gets the one line the backfill above gives
-- the invoices made before it. Any other invoice without lines fails.
-- +goose StatementBegin
CREATE FUNCTION invoice_lines_sum_check() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    ids uuid[];
    inv_id uuid;
    inv invoices%ROWTYPE;
    lines_sum numeric;
BEGIN
    IF TG_TABLE_NAME = 'invoices' THEN
        ids := ARRAY[NEW.id];
    ELSIF TG_OP = 'INSERT' THEN
        ids := ARRAY[NEW.invoice_id];
    ELSIF TG_OP = 'DELETE' THEN
        ids := ARRAY[OLD.invoice_id];
    ELSE
        ids := ARRAY[OLD.invoice_id, NEW.invoice_id];
    END IF;
    FOREACH inv_id IN ARRAY ids LOOP
        SELECT * INTO inv FROM invoices WHERE id = inv_id;
        CONTINUE WHEN NOT FOUND;
        SELECT sum(amount) INTO lines_sum FROM invoice_lines WHERE invoice_id = inv_id;
        IF lines_sum IS NULL AND inv.number ~ '^INV-[0-9]{8}-[0-9A-F]{12}$' THEN
            INSERT INTO invoice_lines (invoice_id, position, description, period_start, period_end,
                                       quantity, unit_amount, amount, created_at)
            SELECT inv.id, 1, inv.description, sp.starts_at, sp.ends_at, 1, inv.amount, inv.amount, inv.created_at
            FROM (SELECT 1) one
            LEFT JOIN service_periods sp ON sp.invoice_id = inv.id;
            lines_sum := inv.amount;
        END IF;
        IF lines_sum IS DISTINCT FROM inv.amount THEN
            RAISE EXCEPTION 'invoice % has amount % but its lines sum to %',
                inv_id, inv.amount, coalesce(lines_sum::text, 'nothing (no lines)')
                USING ERRCODE = 'check_violation', CONSTRAINT = 'invoice_lines_sum_check';
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE CONSTRAINT TRIGGER invoice_lines_sum_check
    AFTER INSERT OR UPDATE OF amount ON invoices
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION invoice_lines_sum_check();

CREATE CONSTRAINT TRIGGER invoice_lines_sum_check
    AFTER INSERT OR UPDATE OR DELETE ON invoice_lines
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION invoice_lines_sum_check();

-- The counters of the invoice number series (docs/operations.md, "Invoice
-- numbers"): one row per series (INV-2026, ...), its last number taken.
-- A number is taken in the transaction that issues the invoice (an upsert
-- that locks the row until commit), so a rolled-back issue gives its number
-- back and the numbers have no gap; a sequence would leave one.
CREATE TABLE invoice_number_series (
    series      text        PRIMARY KEY,
    last_number bigint      NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT invoice_number_series_last_check CHECK (last_number >= 1)
);

COMMENT ON TABLE invoice_number_series IS 'Last invoice number taken per series; numbers are gapless and never reused.';

-- +goose Down
DROP TABLE invoice_number_series;
DROP TRIGGER invoice_lines_sum_check ON invoices;
DROP TABLE invoice_lines;
DROP FUNCTION invoice_lines_sum_check();
