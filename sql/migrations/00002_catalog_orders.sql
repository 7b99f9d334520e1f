-- Catalog and orders.

-- +goose Up
CREATE TABLE products (
    id              uuid          PRIMARY KEY DEFAULT gen_random_uuid(),
    name            text          NOT NULL,
    description     text          NOT NULL DEFAULT '',
    price           NUMERIC(12,2) NOT NULL,
    currency        text          NOT NULL,
    -- Provider plugin that provisions this product; NULL means nothing to
    -- provision. The foreign key to plugins is added by migration 00004.
    provider_plugin text,
    -- Product-specific input for the provider plugin (plan, region, ...).
    provider_config jsonb         NOT NULL DEFAULT '{}',
    enabled         boolean       NOT NULL DEFAULT true,
    billing_cycle   text          NOT NULL DEFAULT 'one_time',
    created_at      timestamptz   NOT NULL DEFAULT now(),
    updated_at      timestamptz   NOT NULL DEFAULT now(),
    CONSTRAINT products_name_check CHECK (name <> ''),
    CONSTRAINT products_price_check CHECK (price >= 0),
    CONSTRAINT products_currency_check CHECK (currency ~ '^[A-Z]{3}$'),
    CONSTRAINT products_billing_cycle_check CHECK (billing_cycle IN (
        'one_time', 'monthly', 'quarterly', 'semi_annual', 'annual'))
);

COMMENT ON COLUMN products.price IS 'List price, NUMERIC(12,2), in products.currency: the price of one billing_cycle.';
COMMENT ON COLUMN products.billing_cycle IS 'one_time | monthly | quarterly | semi_annual | annual.';

CREATE TABLE orders (
    id            uuid          PRIMARY KEY DEFAULT gen_random_uuid(),
    customer_id   uuid          NOT NULL REFERENCES customers (id) ON DELETE RESTRICT,
    product_id    uuid          REFERENCES products (id) ON DELETE RESTRICT,
    status        text          NOT NULL DEFAULT 'pending',
    total_amount  NUMERIC(12,2) NOT NULL,
    currency      text          NOT NULL,
    description   text          NOT NULL DEFAULT '',
    -- What was bought, frozen at order time (product name, price, options),
    -- so later catalog edits never change an order.
    item          jsonb         NOT NULL DEFAULT '{}',
    paid_at       timestamptz,
    cancelled_at  timestamptz,
    cancel_reason text          NOT NULL DEFAULT '',
    -- The product's cycle and per-cycle price when the order was placed;
    -- a later catalogue change moves them only when the admin says so
    -- (docs/decisions.md, "billing cycles").
    billing_cycle text          NOT NULL DEFAULT 'one_time',
    renewal_price NUMERIC(12,2),
    -- Whether a recurring order is billed for its next period; false
    -- (renewal turned off: cancel at period end) lets the service end when
    -- its paid period does.
    renews        boolean       NOT NULL DEFAULT true,
    -- Why a suspended order is suspended: overdue (an unpaid renewal
    -- invoice; paying it resumes the service) or admin (only an admin
    -- resumes it). Empty unless suspended.
    suspend_reason text         NOT NULL DEFAULT '',
    -- End of the paid service of a recurring order: the end of its last
    -- paid service period (service_periods), kept here for the API and
    -- the console. NULL without periods.
    paid_until    timestamptz,
    created_at    timestamptz   NOT NULL DEFAULT now(),
    updated_at    timestamptz   NOT NULL DEFAULT now(),
    CONSTRAINT orders_status_check CHECK (status IN (
        'pending', 'paid', 'provisioning', 'active', 'cancelled',
        'suspended', 'refunded', 'completed', 'terminated')),
    CONSTRAINT orders_total_amount_check CHECK (total_amount >= 0),
    CONSTRAINT orders_currency_check CHECK (currency ~ '^[A-Z]{3}$'),
    CONSTRAINT orders_cancel_reason_check CHECK (cancel_reason IN (
        '', 'timeout', 'provisioning_failed', 'customer', 'admin')),
    CONSTRAINT orders_billing_cycle_check CHECK (billing_cycle IN (
        'one_time', 'monthly', 'quarterly', 'semi_annual', 'annual')),
    -- A recurring order always has the price of its later periods; a
    -- one-time order has none.
    CONSTRAINT orders_suspend_reason_check CHECK (
        (status = 'suspended') = (suspend_reason IN ('overdue', 'admin'))
        AND suspend_reason IN ('', 'overdue', 'admin')),
    CONSTRAINT orders_renewal_price_check CHECK (
        ((billing_cycle = 'one_time') = (renewal_price IS NULL)) AND renewal_price >= 0),
    -- Target of the composite foreign keys of invoices and payments, which
    -- make a payment's customer and currency those of its order.
    CONSTRAINT orders_id_customer_currency_key UNIQUE (id, customer_id, currency)
)
-- Room on each page for the new versions of its rows: an update that
-- changes no indexed column (every status move after pending: paid →
-- provisioning → active, suspensions, …) is then HOT, adding no index
-- entry (docs/performance.md, "Writes that cost the database less").
WITH (fillfactor = 90);

CREATE INDEX orders_created_at_idx ON orders (created_at DESC, id DESC);
CREATE INDEX orders_customer_id_idx ON orders (customer_id, created_at DESC, id DESC);
-- The event worker's 24-hour payment timeout scan (ListPendingOrdersCreatedBefore).
-- An order leaves pending only by being paid (paid_at set) or cancelled
-- (cancelled_at set), so this predicate holds the pending orders without
-- naming status: a status column in any index, predicate included, would
-- make every later status update of the order non-HOT.
CREATE INDEX orders_pending_created_at_idx ON orders (created_at, id)
    WHERE paid_at IS NULL AND cancelled_at IS NULL;

COMMENT ON COLUMN orders.status IS 'pending | paid | provisioning | active | cancelled | suspended | refunded | completed | terminated; transitions are decided by internal/order.';
COMMENT ON COLUMN orders.total_amount IS 'Amount due for the order, NUMERIC(12,2), in orders.currency.';
COMMENT ON COLUMN orders.billing_cycle IS 'one_time | monthly | quarterly | semi_annual | annual; the product''s when the order was placed.';
COMMENT ON COLUMN orders.paid_until IS 'End of the last paid service period; NULL for an order without periods.';
COMMENT ON COLUMN orders.suspend_reason IS 'overdue | admin while suspended; empty otherwise.';
COMMENT ON COLUMN orders.renewal_price IS 'Price of each later period, NUMERIC(12,2), in orders.currency; NULL for a one_time order.';

-- +goose Down
DROP TABLE orders;
DROP TABLE products;
