-- Invoices.

-- +goose Up
CREATE TABLE invoices (
    id          uuid          PRIMARY KEY DEFAULT gen_random_uuid(),
    customer_id uuid          NOT NULL REFERENCES customers (id) ON DELETE RESTRICT,
    -- NULL for an invoice that belongs to no order (a balance recharge, a renewal, ...).
    order_id    uuid,
    -- Human-readable invoice number, assigned when the invoice is issued.
    number      text,
    status      text          NOT NULL DEFAULT 'draft',
    amount      NUMERIC(12,2) NOT NULL,
    paid_amount NUMERIC(12,2) NOT NULL DEFAULT 0,
    currency    text          NOT NULL,
    description text          NOT NULL DEFAULT '',
    issued_at   timestamptz,
    due_at      timestamptz,
    paid_at     timestamptz,
    created_at  timestamptz   NOT NULL DEFAULT now(),
    updated_at  timestamptz   NOT NULL DEFAULT now(),
    CONSTRAINT invoices_status_check CHECK (status IN (
        'draft', 'issued', 'paid', 'overdue', 'cancelled')),
    CONSTRAINT invoices_amount_check CHECK (amount > 0),
    CONSTRAINT invoices_paid_amount_check CHECK (paid_amount >= 0 AND paid_amount <= amount),
    CONSTRAINT invoices_paid_status_check CHECK (status <> 'paid' OR paid_amount = amount),
    CONSTRAINT invoices_currency_check CHECK (currency ~ '^[A-Z]{3}$'),
    CONSTRAINT invoices_number_key UNIQUE (number),
    -- An order's invoice has the order's customer and currency.
    CONSTRAINT invoices_order_fkey FOREIGN KEY (order_id, customer_id, currency)
        REFERENCES orders (id, customer_id, currency) ON DELETE RESTRICT,
    -- Targets of the composite foreign keys of payments.
    CONSTRAINT invoices_id_customer_currency_key UNIQUE (id, customer_id, currency),
    CONSTRAINT invoices_id_order_id_key UNIQUE (id, order_id)
);

CREATE INDEX invoices_created_at_idx ON invoices (created_at DESC, id DESC);
CREATE INDEX invoices_customer_id_idx ON invoices (customer_id, created_at DESC, id DESC);
CREATE INDEX invoices_order_id_idx ON invoices (order_id);
-- Scan for issued invoices that are past due.
CREATE INDEX invoices_issued_due_at_idx ON invoices (due_at) WHERE status = 'issued';

COMMENT ON COLUMN invoices.status IS 'draft | issued | paid | overdue | cancelled.';

-- The service periods of recurring orders (docs/decisions.md, "renewals"):
-- one row per period, the first when the order goes active (paid by the
-- order itself), each later one together with the invoice that bills it.
-- The primary key and invoice_id's uniqueness make it exactly one invoice
-- per (order, period), whichever instance issues it and however often.
CREATE TABLE service_periods (
    order_id      uuid        NOT NULL REFERENCES orders (id) ON DELETE RESTRICT,
    -- 1 for the first period, then 2, 3, ...
    seq           integer     NOT NULL,
    starts_at     timestamptz NOT NULL,
    ends_at       timestamptz NOT NULL,
    -- ends_at is anchor_at plus anchor_months calendar months in the
    -- billing time zone, the anchor's day kept (clamped to the month's
    -- last day): Jan 31 → Feb 28 → Mar 31. A manual extension starts a new
    -- anchor at the end it sets.
    anchor_at     timestamptz NOT NULL,
    anchor_months integer     NOT NULL,
    -- The invoice billing this period; NULL for the first, which the
    -- order's own payment paid, and for a period that costs nothing.
    invoice_id    uuid,
    -- unpaid until its invoice is paid; cancelled when that invoice was
    -- cancelled unpaid (the service ended instead).
    status        text        NOT NULL,
    paid_at       timestamptz,
    -- Set when the next period (and its invoice) is issued.
    followed      boolean     NOT NULL DEFAULT false,
    -- The notices about this period's invoice already queued (issued,
    -- before, overdue:<days>): each is sent at most once.
    notices       text[]      NOT NULL DEFAULT '{}',
    -- How the period ended: renewed (a paid period followed), ended (the
    -- service ended with it), unpaid (its invoice was never paid), refunded
    -- (the order's money went back). NULL while it has not.
    outcome       text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (order_id, seq),
    CONSTRAINT service_periods_seq_check CHECK (seq >= 1),
    CONSTRAINT service_periods_ends_check CHECK (ends_at > starts_at),
    CONSTRAINT service_periods_anchor_check CHECK (anchor_months >= 0),
    CONSTRAINT service_periods_invoice_check CHECK (seq > 1 OR invoice_id IS NULL),
    CONSTRAINT service_periods_status_check CHECK (status IN ('unpaid', 'paid', 'cancelled')),
    CONSTRAINT service_periods_paid_check CHECK ((status = 'paid') = (paid_at IS NOT NULL)),
    CONSTRAINT service_periods_outcome_check CHECK (outcome IN ('renewed', 'ended', 'unpaid', 'refunded')),
    CONSTRAINT service_periods_order_starts_key UNIQUE (order_id, starts_at),
    CONSTRAINT service_periods_invoice_key UNIQUE (invoice_id),
    CONSTRAINT service_periods_invoice_fkey FOREIGN KEY (invoice_id, order_id)
        REFERENCES invoices (id, order_id) ON DELETE RESTRICT
);

-- The billing run's scans: paid periods not yet followed (renewal invoice
-- due, or the service ends), and unpaid ones (suspension, termination).
CREATE INDEX service_periods_open_ends_at_idx ON service_periods (ends_at)
    WHERE outcome IS NULL AND status = 'paid' AND NOT followed;
CREATE INDEX service_periods_unpaid_starts_at_idx ON service_periods (starts_at)
    WHERE status = 'unpaid';

COMMENT ON COLUMN service_periods.status IS 'unpaid | paid | cancelled.';
COMMENT ON COLUMN service_periods.outcome IS 'renewed | ended | unpaid | refunded; NULL while the period has not ended.';
COMMENT ON COLUMN invoices.amount IS 'Invoiced amount, NUMERIC(12,2), > 0, in invoices.currency.';
COMMENT ON COLUMN invoices.paid_amount IS 'Sum paid so far, NUMERIC(12,2), 0 <= paid_amount <= amount; equals amount when status is paid.';

-- +goose Down
DROP TABLE service_periods;
DROP TABLE invoices;
