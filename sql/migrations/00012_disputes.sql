-- Disputes (chargebacks) a gateway reports about a payment (issue 39, 2):
-- one row per gateway dispute, moved by the gateway's notifications. A lost
-- dispute's money went back: it is also a succeeded gateway refund of the
-- payment (refund_id), so the refund and ledger rules count it. An order's
-- service may be suspended for a dispute (suspend_reason 'dispute').

-- +goose Up
CREATE TABLE disputes (
    id                   uuid          PRIMARY KEY DEFAULT gen_random_uuid(),
    payment_id           uuid          NOT NULL REFERENCES payments (id),
    gateway_interface_id uuid          NOT NULL,
    -- The gateway's id of the dispute (Stripe: dp_…).
    gateway_dispute_id   text          NOT NULL,
    amount               NUMERIC(12,2) NOT NULL,
    currency             text          NOT NULL,
    reason               text          NOT NULL DEFAULT '',
    -- The gateway's status, as it says it (Stripe: warning_needs_response,
    -- needs_response, under_review, won, lost, ...).
    status               text          NOT NULL,
    evidence_due_by      timestamptz,
    -- The succeeded refund a lost dispute became.
    refund_id            uuid          REFERENCES refunds (id),
    created_at           timestamptz   NOT NULL DEFAULT now(),
    updated_at           timestamptz   NOT NULL DEFAULT now(),
    CONSTRAINT disputes_gateway_key UNIQUE (gateway_interface_id, gateway_dispute_id),
    CONSTRAINT disputes_amount_check CHECK (amount > 0),
    CONSTRAINT disputes_gateway_dispute_id_check CHECK (gateway_dispute_id <> '')
);

-- ListDisputes: the evidence deadline first.
CREATE INDEX disputes_evidence_due_by_idx ON disputes (evidence_due_by, id);
CREATE INDEX disputes_payment_id_idx ON disputes (payment_id);

COMMENT ON COLUMN disputes.status IS 'the gateway''s dispute status (won and lost are final).';

ALTER TABLE orders DROP CONSTRAINT orders_suspend_reason_check;
ALTER TABLE orders ADD CONSTRAINT orders_suspend_reason_check CHECK (
    (status = 'suspended') = (suspend_reason IN ('overdue', 'admin', 'dispute'))
    AND suspend_reason IN ('', 'overdue', 'admin', 'dispute'));
COMMENT ON COLUMN orders.suspend_reason IS 'overdue | admin | dispute while suspended; empty otherwise.';

-- +goose Down
UPDATE orders SET suspend_reason = 'admin' WHERE suspend_reason = 'dispute';
ALTER TABLE orders DROP CONSTRAINT orders_suspend_reason_check;
ALTER TABLE orders ADD CONSTRAINT orders_suspend_reason_check CHECK (
    (status = 'suspended') = (suspend_reason IN ('overdue', 'admin'))
    AND suspend_reason IN ('', 'overdue', 'admin'));
COMMENT ON COLUMN orders.suspend_reason IS 'overdue | admin while suspended; empty otherwise.';
DROP TABLE disputes;
