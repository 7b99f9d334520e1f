-- Plugins (Lua scripts found by the scanner) and gateway interfaces
-- (configured instances of a plugin that payments refer to).

-- +goose Up
CREATE TABLE plugins (
    name          text        PRIMARY KEY,
    type          text        NOT NULL,
    -- Semantic version declared by the script's version(); 0.0.0 when missing.
    version       text        NOT NULL DEFAULT '0.0.0',
    -- Path of the script below the plugin directory, for the admin UI.
    path          text        NOT NULL DEFAULT '',
    source        text        NOT NULL,
    -- Lowercase hex SHA-256 of source.
    sha256        text        NOT NULL,
    enabled       boolean     NOT NULL DEFAULT true,
    -- loaded: compiled and usable; error: last load failed (see last_error),
    -- only this plugin is disabled; missing: the file is gone from disk.
    status        text        NOT NULL DEFAULT 'loaded',
    last_error    text        NOT NULL DEFAULT '',
    -- Result of the script's info() and config_schema().
    info          jsonb       NOT NULL DEFAULT '{}',
    config_schema jsonb       NOT NULL DEFAULT '{}',
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT plugins_name_check CHECK (name <> ''),
    CONSTRAINT plugins_type_check CHECK (type IN (
        'first_party_provider', 'upstream_provider', 'gateway', 'notifier')),
    CONSTRAINT plugins_sha256_check CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    CONSTRAINT plugins_status_check CHECK (status IN ('loaded', 'error', 'missing'))
);

COMMENT ON COLUMN plugins.status IS 'loaded | error | missing (scanner state, not a status of the API contract).';

CREATE TABLE gateway_interfaces (
    id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- The domain checks that the plugin is of type gateway.
    plugin_name   text        NOT NULL REFERENCES plugins (name) ON DELETE RESTRICT,
    display_name  text        NOT NULL,
    -- Secrets (merchant keys) live here; never log or return it unredacted.
    config        jsonb       NOT NULL DEFAULT '{}',
    -- Copied from the plugin when its version goes up (docs/api.md, versioning).
    config_schema jsonb       NOT NULL DEFAULT '{}',
    enabled       boolean     NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT gateway_interfaces_display_name_check CHECK (display_name <> '')
);

CREATE INDEX gateway_interfaces_plugin_name_idx ON gateway_interfaces (plugin_name);

-- products is created before plugins (00002), so its foreign key is added here.
ALTER TABLE products
    ADD CONSTRAINT products_provider_plugin_fkey FOREIGN KEY (provider_plugin)
        REFERENCES plugins (name) ON DELETE RESTRICT;

CREATE INDEX products_provider_plugin_idx ON products (provider_plugin);

-- +goose Down
DROP INDEX products_provider_plugin_idx;
ALTER TABLE products DROP CONSTRAINT products_provider_plugin_fkey;
DROP TABLE gateway_interfaces;
DROP TABLE plugins;
