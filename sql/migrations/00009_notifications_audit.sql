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
--
-- Partitioned by the UTC month of created_at, so that a month past its
-- retention ([retention].audit_months, internal/retention) goes with one
-- DROP TABLE instead of millions of DELETEs (which the append-only trigger
-- refuses anyway). The months are audit_log_pYYYYMM; the retention job
-- creates the current month and the next ones ahead, and
-- audit_log_default takes a row whose month has none yet, so an insert
-- never fails. The primary key holds the partition key, as PostgreSQL
-- requires: (created_at, id), which also serves the log newest first.
CREATE TABLE audit_log (
    id          bigint      GENERATED ALWAYS AS IDENTITY,
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
    CONSTRAINT audit_log_pkey PRIMARY KEY (created_at, id),
    CONSTRAINT audit_log_actor_kind_check CHECK (actor_kind IN (
        'admin', 'customer', 'api_key', 'gateway', 'system')),
    CONSTRAINT audit_log_action_check CHECK (action <> '')
) PARTITION BY RANGE (created_at);

CREATE TABLE audit_log_default PARTITION OF audit_log DEFAULT;

CREATE INDEX audit_log_entity_idx ON audit_log (entity_type, entity_id, created_at);
-- The console's audit view filters by actor and by action, newest first.
CREATE INDEX audit_log_actor_idx ON audit_log (actor_id, created_at DESC, id DESC);
CREATE INDEX audit_log_action_idx ON audit_log (action, created_at DESC, id DESC);

-- The argument names the table in the error: the trigger fires on the
-- month's partition, whose name TG_TABLE_NAME would give.
CREATE TRIGGER audit_log_append_only
    BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION reject_update_delete('audit_log');

-- audit_log_create_partitions makes sure the months audit_log_pYYYYMM of
-- the UTC months first_month .. first_month + months - 1 exist, and
-- answers how many it created. Rows of those months waiting in
-- audit_log_default (written while their month had no partition) move
-- into them in the same transaction: the default is detached, the months
-- created, its rows of those months copied through audit_log (ids kept)
-- and deleted from it (a detached partition has no trigger), and it is
-- attached again. DDL takes audit_log's lock: lock_timeout bounds the wait
-- so that writers never queue long behind it (the job tries again next
-- round). Concurrent calls take turns (advisory lock).
-- +goose StatementBegin
CREATE FUNCTION audit_log_create_partitions(first_month timestamptz, months integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    start_month timestamp := date_trunc('month', first_month AT TIME ZONE 'UTC');
    lo timestamptz := start_month AT TIME ZONE 'UTC';
    hi timestamptz := (start_month + make_interval(months => greatest(months, 0))) AT TIME ZONE 'UTC';
    m timestamp;
    name text;
    created integer := 0;
    waiting boolean;
BEGIN
    IF months < 1 THEN
        RETURN 0;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('paymentd.audit_log_partitions', 0));
    PERFORM set_config('lock_timeout', '5s', true);
    IF NOT EXISTS (
        SELECT 1 FROM generate_series(0, months - 1) AS i
        WHERE to_regclass('audit_log_p' || to_char(start_month + make_interval(months => i), 'YYYYMM')) IS NULL
    ) THEN
        RETURN 0;
    END IF;
    SELECT EXISTS (SELECT 1 FROM audit_log_default WHERE created_at >= lo AND created_at < hi) INTO waiting;
    IF waiting THEN
        ALTER TABLE audit_log DETACH PARTITION audit_log_default;
    END IF;
    FOR i IN 0 .. months - 1 LOOP
        m := start_month + make_interval(months => i);
        name := 'audit_log_p' || to_char(m, 'YYYYMM');
        IF to_regclass(name) IS NULL THEN
            EXECUTE format('CREATE TABLE %I PARTITION OF audit_log FOR VALUES FROM (%L) TO (%L)',
                           name, m AT TIME ZONE 'UTC', (m + interval '1 month') AT TIME ZONE 'UTC');
            created := created + 1;
        END IF;
    END LOOP;
    IF waiting THEN
        INSERT INTO audit_log OVERRIDING SYSTEM VALUE
        SELECT * FROM audit_log_default WHERE created_at >= lo AND created_at < hi;
        DELETE FROM audit_log_default WHERE created_at >= lo AND created_at < hi;
        ALTER TABLE audit_log ATTACH PARTITION audit_log_default DEFAULT;
    END IF;
    RETURN created;
END;
$$;
-- +goose StatementEnd

-- audit_log_drop_partitions drops every month audit_log_pYYYYMM that ends
-- at or before keep_from (all its rows are older) and answers their names.
-- Only whole months go: a month that keep_from falls in stays entire. The
-- default partition is never dropped.
-- +goose StatementBegin
CREATE FUNCTION audit_log_drop_partitions(keep_from timestamptz) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    part text;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('paymentd.audit_log_partitions', 0));
    PERFORM set_config('lock_timeout', '5s', true);
    FOR part IN
        SELECT c.relname::text
        FROM pg_inherits AS i
        JOIN pg_class AS c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'audit_log'::regclass
          AND c.relname ~ '^audit_log_p[0-9]{6}$'
          AND ((to_date(substr(c.relname, 12), 'YYYYMM') + interval '1 month') AT TIME ZONE 'UTC') <= keep_from
        ORDER BY c.relname
    LOOP
        EXECUTE format('DROP TABLE %I', part);
        RETURN NEXT part;
    END LOOP;
END;
$$;
-- +goose StatementEnd

-- The current month and the next two exist from the start; the retention
-- job keeps them ahead.
SELECT audit_log_create_partitions(now(), 3);

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
DROP FUNCTION audit_log_drop_partitions(timestamptz);
DROP FUNCTION audit_log_create_partitions(timestamptz, integer);
DROP TABLE audit_log;
DROP TABLE notifications;
