-- Outgoing notifications and the audit log.

-- +goose Up
CREATE TABLE notifications (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- The event whose handling produced it; NULL for other sources (a test
    -- message from the admin UI). Kept when old events are pruned.
    event_id        uuid        REFERENCES events (id) ON DELETE SET NULL,
    recipient       text        NOT NULL,
    channel         text        NOT NULL,
    subject         text        NOT NULL DEFAULT '',
    body            text        NOT NULL,
    status          text        NOT NULL DEFAULT 'pending',
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text        NOT NULL DEFAULT '',
    sent_at         timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT notifications_channel_check CHECK (channel IN ('webhook', 'email')),
    CONSTRAINT notifications_status_check CHECK (status IN ('pending', 'sent', 'failed')),
    CONSTRAINT notifications_recipient_check CHECK (recipient <> ''),
    CONSTRAINT notifications_attempts_check CHECK (attempts >= 0),
    -- A retried event handler does not queue the same notification twice.
    CONSTRAINT notifications_event_recipient_key UNIQUE (event_id, channel, recipient)
);

-- The sender's queue: pending notifications that are due.
CREATE INDEX notifications_pending_idx ON notifications (next_attempt_at) WHERE status = 'pending';
CREATE INDEX notifications_created_at_idx ON notifications (created_at DESC, id DESC);

COMMENT ON COLUMN notifications.status IS 'pending | sent | failed.';

-- Who changed what. Append-only (trigger); before/after hold the changed
-- entity as JSON, never a secret (no password hash, key, or gateway config
-- secret).
CREATE TABLE audit_log (
    id          bigint      PRIMARY KEY GENERATED ALWAYS AS IDENTITY,
    actor_kind  text        NOT NULL,
    -- admin_users.id, customers.id, api_keys.id or admin_api_keys.id (actor
    -- api_key: the key that acted), gateway_interfaces.id or a node id
    -- for the system; text because the kinds differ.
    actor_id    text        NOT NULL DEFAULT '',
    action      text        NOT NULL,
    entity_type text        NOT NULL,
    entity_id   text        NOT NULL,
    before      jsonb,
    after       jsonb,
    request_id  text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT audit_log_actor_kind_check CHECK (actor_kind IN (
        'admin', 'customer', 'api_key', 'gateway', 'system')),
    CONSTRAINT audit_log_action_check CHECK (action <> '')
);

CREATE INDEX audit_log_entity_idx ON audit_log (entity_type, entity_id, created_at);
CREATE INDEX audit_log_created_at_idx ON audit_log (created_at DESC, id DESC);
-- The console's audit view filters by actor and by action, newest first.
CREATE INDEX audit_log_actor_idx ON audit_log (actor_id, created_at DESC, id DESC);
CREATE INDEX audit_log_action_idx ON audit_log (action, created_at DESC, id DESC);

CREATE TRIGGER audit_log_append_only
    BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION reject_update_delete();

-- +goose Down
DROP TABLE audit_log;
DROP TABLE notifications;
