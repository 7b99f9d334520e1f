-- +goose Up
-- Saved payment methods and charges without the customer (issue 39, 1;
-- docs/plugins.md, "Saved payment methods"). New tables only, and no
-- foreign key to orders, payments, invoices or customers: creating one
-- takes a SHARE ROW EXCLUSIVE lock on the table it references, which
-- waits behind every running write of that hot table and queues every
-- later one behind itself (the rolling upgrade's v0.1.0 instance would
-- answer 500 meanwhile). The service writes these rows in the same
-- transactions as the rows they name.

-- The gateway's customer of a paymentd customer (a Stripe Customer), per
-- gateway interface: made once, remembered, handed to create_payment.
CREATE TABLE gateway_customers (
    gateway_interface_id uuid        NOT NULL REFERENCES gateway_interfaces (id),
    customer_id          uuid        NOT NULL,
    gateway_customer_id  text        NOT NULL CHECK (gateway_customer_id <> '' AND length(gateway_customer_id) <= 255),
    created_at           timestamptz NOT NULL,
    PRIMARY KEY (gateway_interface_id, customer_id)
);

-- A saved payment method: the gateway's references plus what a customer
-- recognises a card by. Never a card number: there is no column for one.
CREATE TABLE saved_payment_methods (
    id                   uuid        PRIMARY KEY,
    customer_id          uuid        NOT NULL,
    gateway_interface_id uuid        NOT NULL REFERENCES gateway_interfaces (id),
    gateway_customer_id  text        NOT NULL CHECK (gateway_customer_id <> '' AND length(gateway_customer_id) <= 255),
    gateway_method_id    text        NOT NULL CHECK (gateway_method_id <> '' AND length(gateway_method_id) <= 255),
    brand                text        NOT NULL CHECK (length(brand) <= 40),
    last4                text        NOT NULL CHECK (last4 ~ '^[0-9]{4}$'),
    exp_month            integer     NOT NULL CHECK (exp_month BETWEEN 1 AND 12),
    exp_year             integer     NOT NULL CHECK (exp_year BETWEEN 2000 AND 2200),
    created_at           timestamptz NOT NULL,
    -- removed_at: the customer removed it (and the gateway detached it);
    -- kept for the attempts that name it.
    removed_at           timestamptz,
    -- expiry_noticed_at: the notice that it expires before the next
    -- renewal went out (once per method).
    expiry_noticed_at    timestamptz,
    UNIQUE (gateway_interface_id, gateway_method_id)
);
CREATE INDEX saved_payment_methods_customer_idx ON saved_payment_methods (customer_id, created_at DESC) WHERE removed_at IS NULL;

-- Whether an order's renewals charge the saved method (the customer's
-- choice, SetAutoCharge). No row: on.
CREATE TABLE order_auto_charge (
    order_id    uuid        PRIMARY KEY,
    auto_charge boolean     NOT NULL,
    updated_at  timestamptz NOT NULL
);

-- One row per charge of a saved method for a renewal invoice: attempt 0
-- on the due day, then one per [billing].card_retry_days. The primary key
-- (invoice_id, attempt) is what keeps two billing leaders from charging an
-- invoice twice for one attempt: the row is written, with its pending
-- payment, before the gateway is called, and the payment's id is the
-- charge's Idempotency-Key.
CREATE TABLE saved_charge_attempts (
    invoice_id      uuid        NOT NULL,
    attempt         integer     NOT NULL CHECK (attempt >= 0),
    payment_id      uuid        NOT NULL UNIQUE,
    saved_method_id uuid        NOT NULL REFERENCES saved_payment_methods (id),
    -- outcome: '' while the charge runs or its outcome is unknown, then
    -- succeeded, declined, authentication_required or failed.
    outcome         text        NOT NULL DEFAULT '' CHECK (outcome IN ('', 'succeeded', 'declined', 'authentication_required', 'failed')),
    code            text        NOT NULL DEFAULT '' CHECK (length(code) <= 100),
    message         text        NOT NULL DEFAULT '' CHECK (length(message) <= 500),
    created_at      timestamptz NOT NULL,
    answered_at     timestamptz,
    PRIMARY KEY (invoice_id, attempt)
);

-- +goose Down
DROP TABLE saved_charge_attempts;
DROP TABLE order_auto_charge;
DROP TABLE saved_payment_methods;
DROP TABLE gateway_customers;
