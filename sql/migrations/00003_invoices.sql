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
COMMENT ON COLUMN invoices.amount IS 'Invoiced amount, NUMERIC(12,2), > 0, in invoices.currency.';
COMMENT ON COLUMN invoices.paid_amount IS 'Sum paid so far, NUMERIC(12,2), 0 <= paid_amount <= amount; equals amount when status is paid.';

-- +goose Down
DROP TABLE invoices;
