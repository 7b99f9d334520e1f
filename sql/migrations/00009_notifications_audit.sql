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

-- Idempotency keys (internal/idempotency): the first outcome of a money
-- procedure called with an Idempotency-Key header, so that a client that
-- retries (its deadline passed, its connection broke) gets that outcome
-- again instead of moving the money twice. A key belongs to the account
-- that sent it (principal: "admin:<id>" or "customer:<id>"; an admin's API
-- keys act as the admin) and lives until expires_at (24 h after it was
-- first sent); expired rows are swept by the event worker's leader.
CREATE TABLE idempotency_keys (
    principal     text        NOT NULL,
    key           text        NOT NULL,
    procedure     text        NOT NULL,
    -- SHA-256 of the procedure and the request message (deterministic
    -- protobuf encoding): the same key with another request is refused.
    request_hash  bytea       NOT NULL,
    -- running: the first call has not finished (another call with the key
    -- waits for it); done: response (the encoded response message) or
    -- error_code and error_message hold its outcome.
    state         text        NOT NULL DEFAULT 'running',
    response      bytea,
    error_code    text,
    error_message text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    expires_at    timestamptz NOT NULL,
    PRIMARY KEY (principal, key),
    CONSTRAINT idempotency_keys_state_check CHECK (state IN ('running', 'done')),
    CONSTRAINT idempotency_keys_done_check CHECK (
        state = 'running' OR (finished_at IS NOT NULL AND (response IS NOT NULL) <> (error_code IS NOT NULL)))
);

CREATE INDEX idempotency_keys_expires_at_idx ON idempotency_keys (expires_at);

-- +goose Down
DROP TABLE idempotency_keys;
DROP TABLE audit_log;
DROP TABLE notifications;
