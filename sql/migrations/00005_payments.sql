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
-- The INCLUDEd columns let GetPaymentTrends read a range of creation times
-- (per currency, per gateway, by status, time to success) from the index
-- alone, without visiting the rows (docs/performance.md, "Trends").
CREATE INDEX payments_created_at_idx ON payments (created_at DESC, id DESC)
    INCLUDE (currency, status, gateway_interface_id, paid_at);
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
-- GetPaymentTrends counts the money received and the payments failed per
-- day: a range of paid_at, a range of failed_at (docs/performance.md has
-- the plans). Partial: a pending payment has neither.
CREATE INDEX payments_paid_at_idx ON payments (paid_at) INCLUDE (amount, currency) WHERE paid_at IS NOT NULL;
CREATE INDEX payments_failed_at_idx ON payments (failed_at) INCLUDE (currency) WHERE failed_at IS NOT NULL;

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
-- GetPaymentTrends sums the refunds that succeeded per day: a succeeded
-- refund's updated_at is when it succeeded (nothing changes it after).
CREATE INDEX refunds_succeeded_at_idx ON refunds (updated_at) INCLUDE (amount, payment_id) WHERE status = 'succeeded';
CREATE UNIQUE INDEX refunds_gateway_refund_id_key ON refunds (payment_id, gateway_refund_id)
    WHERE gateway_refund_id <> '';

COMMENT ON COLUMN refunds.status IS 'pending | succeeded | failed.';
COMMENT ON COLUMN refunds.amount IS 'Refunded amount, NUMERIC(12,2), > 0, in the payment''s currency.';

-- +goose Down
DROP TABLE refunds;
DROP TABLE payments;
