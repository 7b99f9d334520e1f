-- Plugins as the scanner (internal/gateway) found them on disk. The scanner
-- decides under the row lock (LockPlugin) what a file changes, so two
-- instances scanning at once apply the version rule one after the other.

-- name: ListPlugins :many
-- type and status NULL: every plugin. A directory holds a handful of
-- plugins, so there is no paging.
SELECT * FROM plugins
WHERE (sqlc.narg('type')::text IS NULL OR type = sqlc.narg('type'))
  AND (sqlc.narg('status')::text IS NULL OR status = sqlc.narg('status'))
ORDER BY name;

-- name: GetPlugin :one
SELECT * FROM plugins
WHERE name = @name;

-- name: LockPlugin :one
SELECT * FROM plugins
WHERE name = @name
FOR UPDATE;

-- name: InsertPlugin :one
-- No row when another instance inserted the plugin first: lock that one.
INSERT INTO plugins (name, type, version, path, source, sha256, status, last_error,
                     info, config_schema, created_at, updated_at)
VALUES (@name, @type, @version, @path, @source, @sha256, @status, @last_error,
        @info, @config_schema, @now, @now)
ON CONFLICT (name) DO NOTHING
RETURNING *;

-- name: UpdatePluginDefinition :one
-- A file of a greater version: the whole definition (docs/api.md, versioning).
UPDATE plugins
SET type = @type, version = @version, path = @path, source = @source, sha256 = @sha256,
    status = 'loaded', last_error = '', info = @info, config_schema = @config_schema,
    updated_at = @now
WHERE name = @name
RETURNING *;

-- name: UpdatePluginSource :one
-- A file of an equal or lower version: the source and its hash only (and the
-- scanner's own state: loaded, no error, where the file is). The version,
-- info and config schema stay the stored definition's.
UPDATE plugins
SET path = @path, source = @source, sha256 = @sha256, status = 'loaded', last_error = '',
    updated_at = @now
WHERE name = @name
RETURNING *;

-- name: SetPluginStatus :one
-- error (the file does not compile or breaks the contract) or missing (the
-- file is gone). The definition and the last good source stay.
UPDATE plugins
SET status = @status, last_error = @last_error, updated_at = @now
WHERE name = @name
RETURNING *;

-- name: SetPluginCallError :execrows
-- The last failed call of a loaded plugin, for admins; only while the row
-- still describes the code that failed.
UPDATE plugins
SET last_error = @last_error, updated_at = @now
WHERE name = @name AND sha256 = @sha256 AND status = 'loaded';

-- name: SetPluginEnabled :one
-- An admin's choice (EnablePlugin, DisablePlugin). No scanner query writes
-- enabled, so the choice survives rescans, upgrades and restarts.
UPDATE plugins
SET enabled = @enabled, updated_at = @now
WHERE name = @name
RETURNING *;
