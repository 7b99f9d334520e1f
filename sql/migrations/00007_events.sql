-- The transactional event queue consumed by the event_worker leader.
--
--   pending ──claim (FOR UPDATE SKIP LOCKED)──▶ processing ──▶ done
--      ▲                                            │
--      └──── handling failed: attempts+1, run_at ◀──┤
--            moved by the backoff                   └──▶ failed (attempts
--                                                        reached [events].max_attempts)
--
-- A processing event whose worker died (locked_until in the past) is
-- reclaimed. Events of one order are handled one at a time.

-- +goose Up
CREATE TABLE events (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    event_type   text        NOT NULL,
    payload      jsonb       NOT NULL DEFAULT '{}',
    status       text        NOT NULL DEFAULT 'pending',
    order_id     uuid        NOT NULL REFERENCES orders (id) ON DELETE RESTRICT,
    -- Handling attempts started so far.
    attempts     integer     NOT NULL DEFAULT 0,
    -- Not to be claimed before this time (retry backoff).
    run_at       timestamptz NOT NULL DEFAULT now(),
    -- Node (nodes.id) that claimed the event, and until when its claim holds.
    locked_by    text,
    locked_until timestamptz,
    -- A fresh random token per claim, NULL when not processing. Every
    -- statement that ends an attempt, and every transaction of its handler,
    -- names it: an attempt whose claim expired and was reclaimed can no
    -- longer change the event or commit work (attempts is no such token: a
    -- released claim does not count and an admin's retry resets it).
    claim_token  uuid,
    last_error   text        NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT events_event_type_check CHECK (event_type IN (
        'order_paid', 'order_provisioned', 'order_cancelled', 'order_refunded',
        'service_renewed', 'service_suspended', 'service_resumed', 'service_terminated',
        'renewal_reminder')),
    CONSTRAINT events_status_check CHECK (status IN ('pending', 'processing', 'done', 'failed')),
    CONSTRAINT events_attempts_check CHECK (attempts >= 0),
    CONSTRAINT events_lock_check CHECK (
        status <> 'processing' OR (locked_by IS NOT NULL AND locked_until IS NOT NULL))
);

-- Claim: pending events that are due, oldest first. status is fixed by the
-- predicate, so it is not a key column.
CREATE INDEX events_pending_idx ON events (run_at, created_at) WHERE status = 'pending';
-- Reclaim of processing events whose claim expired.
CREATE INDEX events_processing_idx ON events (locked_until) WHERE status = 'processing';
-- Per-order serialisation ("is another event of this order processing?") and
-- the order's event history.
CREATE INDEX events_order_id_idx ON events (order_id, created_at);
-- Admin listing.
CREATE INDEX events_created_at_idx ON events (created_at DESC, id DESC);

COMMENT ON COLUMN events.status IS 'pending | processing | done | failed.';
COMMENT ON COLUMN events.event_type IS 'order_paid | order_provisioned | order_cancelled | order_refunded | service_renewed | service_suspended | service_resumed | service_terminated | renewal_reminder.';

-- Wakes the worker (LISTEN paymentd_events) when an event is inserted; the
-- notification is delivered at commit, so it never runs ahead of the data.
-- The 5-second poll remains the safety net.
-- +goose StatementBegin
CREATE FUNCTION events_notify_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('paymentd_events', NEW.order_id::text);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER events_notify_insert
    AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION events_notify_insert();

-- +goose Down
DROP TABLE events;
DROP FUNCTION events_notify_insert();
