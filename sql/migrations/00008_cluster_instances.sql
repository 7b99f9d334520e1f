-- Cluster coordination (leader leases, node heartbeats) and provisioned
-- instances.

-- +goose Up
-- One row per leader role while it is held. Times come from the database
-- clock (now()) only, so instance clocks never disagree about a lease. A term
-- is (holder, elected_at): a leader renews only its own term.
CREATE TABLE leader_leases (
    role       text        PRIMARY KEY,
    holder     text        NOT NULL,
    elected_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    CONSTRAINT leader_leases_role_check CHECK (role IN ('migration', 'billing', 'event_worker')),
    CONSTRAINT leader_leases_holder_check CHECK (holder <> ''),
    CONSTRAINT leader_leases_expires_at_check CHECK (expires_at > elected_at)
);

-- Instance heartbeats, every 10 s; older than 30 s means the node is lost.
CREATE TABLE nodes (
    id           text        PRIMARY KEY,
    hostname     text        NOT NULL DEFAULT '',
    version      text        NOT NULL DEFAULT '',
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT nodes_id_check CHECK (id <> '')
);

CREATE INDEX nodes_heartbeat_at_idx ON nodes (heartbeat_at);

CREATE TABLE instances (
    id               uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    customer_id      uuid        NOT NULL REFERENCES customers (id) ON DELETE RESTRICT,
    -- One instance per order: a retried order_paid event finds the instance
    -- it already created instead of provisioning a second one.
    order_id         uuid        NOT NULL REFERENCES orders (id) ON DELETE RESTRICT,
    product_id       uuid        REFERENCES products (id) ON DELETE RESTRICT,
    provider_plugin  text        REFERENCES plugins (name) ON DELETE RESTRICT,
    -- The instance's id at the provider; empty until provisioning answered.
    external_id      text        NOT NULL DEFAULT '',
    status           text        NOT NULL DEFAULT 'provisioning',
    name             text        NOT NULL DEFAULT '',
    -- What the provider reported (addresses, credentials reference, ...).
    details          jsonb       NOT NULL DEFAULT '{}',
    last_error       text        NOT NULL DEFAULT '',
    -- End of the paid service period, NULL when not time-limited.
    expires_at       timestamptz,
    terminated_at    timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT instances_status_check CHECK (status IN (
        'provisioning', 'running', 'stopped', 'suspended', 'terminated', 'error')),
    CONSTRAINT instances_terminated_at_check CHECK ((status = 'terminated') = (terminated_at IS NOT NULL)),
    CONSTRAINT instances_order_id_key UNIQUE (order_id)
);

CREATE INDEX instances_customer_id_idx ON instances (customer_id, created_at DESC, id DESC);
CREATE INDEX instances_product_id_idx ON instances (product_id);
CREATE INDEX instances_provider_plugin_idx ON instances (provider_plugin);
CREATE UNIQUE INDEX instances_external_id_key ON instances (provider_plugin, external_id)
    WHERE external_id <> '';
-- Expiry scan of live instances.
CREATE INDEX instances_expires_at_idx ON instances (expires_at)
    WHERE status NOT IN ('terminated', 'error');

COMMENT ON COLUMN instances.status IS 'provisioning | running | stopped | suspended | terminated | error; terminated is final.';

-- "terminated is final and irreversible" (docs/api.md, "Statuses"): refuse any change of a
-- terminated instance's status.
-- +goose StatementBegin
CREATE FUNCTION instances_terminated_is_final() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a terminated instance cannot change status'
        USING ERRCODE = 'check_violation',
              CONSTRAINT = 'instances_terminated_is_final',
              TABLE = 'instances';
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER instances_terminated_is_final
    BEFORE UPDATE OF status ON instances
    FOR EACH ROW
    WHEN (OLD.status = 'terminated' AND NEW.status <> 'terminated')
    EXECUTE FUNCTION instances_terminated_is_final();

-- +goose Down
DROP TABLE instances;
DROP FUNCTION instances_terminated_is_final();
DROP TABLE nodes;
DROP TABLE leader_leases;
