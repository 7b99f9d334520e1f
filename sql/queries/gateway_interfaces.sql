-- Gateway interfaces: configured instances of a gateway plugin that payments
-- refer to. config holds merchant secrets: it leaves the store only for the
-- plugin, or masked.

-- name: InsertGatewayInterface :one
-- Created disabled: an admin tests it and then enables it. The id is the
-- caller's: the config's encrypted secrets are bound to it before the insert.
INSERT INTO gateway_interfaces (id, plugin_name, display_name, config, config_schema, enabled,
                                created_at, updated_at)
VALUES (@id, @plugin_name, @display_name, @config, @config_schema, false, @now, @now)
RETURNING *;

-- name: GetGatewayInterface :one
SELECT * FROM gateway_interfaces
WHERE id = @id;

-- name: GetGatewayInterfaceView :one
-- The interface with its plugin's scanner status and the admin's choice
-- about the plugin: for admins, and for the registry handing the interface
-- to the payment domain.
SELECT sqlc.embed(gateway_interfaces), plugins.status AS plugin_status,
       plugins.enabled AS plugin_enabled
FROM gateway_interfaces
JOIN plugins ON plugins.name = gateway_interfaces.plugin_name
WHERE gateway_interfaces.id = @id;

-- name: LockGatewayInterface :one
-- NO KEY: payments referring to the interface (a foreign key takes KEY
-- SHARE) are not held up while an admin edits it.
SELECT * FROM gateway_interfaces
WHERE id = @id
FOR NO KEY UPDATE;

-- name: UpdateGatewayInterface :one
UPDATE gateway_interfaces
SET display_name = @display_name, config = @config, updated_at = @now
WHERE id = @id
RETURNING *;

-- name: SetGatewayInterfaceConfig :exec
-- The same config with its secrets (re-)encrypted: not an admin's change,
-- so updated_at stays.
UPDATE gateway_interfaces
SET config = @config
WHERE id = @id;

-- name: SetGatewayInterfaceEnabled :one
-- Enables or disables an interface.
UPDATE gateway_interfaces
SET enabled = @enabled, updated_at = @now
WHERE id = @id
RETURNING *;

-- name: ListGatewayInterfaceViews :many
-- plugin_name and enabled NULL: no filter. Newest first, stable.
SELECT sqlc.embed(gateway_interfaces), plugins.status AS plugin_status,
       plugins.enabled AS plugin_enabled
FROM gateway_interfaces
JOIN plugins ON plugins.name = gateway_interfaces.plugin_name
WHERE (sqlc.narg('plugin_name')::text IS NULL OR gateway_interfaces.plugin_name = sqlc.narg('plugin_name'))
  AND (sqlc.narg('enabled')::boolean IS NULL OR gateway_interfaces.enabled = sqlc.narg('enabled'))
ORDER BY gateway_interfaces.created_at DESC, gateway_interfaces.id DESC
LIMIT @row_limit::bigint
OFFSET @row_offset::bigint;

-- name: CountGatewayInterfaces :one
-- Same filter as ListGatewayInterfaceViews.
SELECT count(*) FROM gateway_interfaces
WHERE (sqlc.narg('plugin_name')::text IS NULL OR plugin_name = sqlc.narg('plugin_name'))
  AND (sqlc.narg('enabled')::boolean IS NULL OR enabled = sqlc.narg('enabled'));

-- name: ListGatewayInterfacesOfPlugin :many
-- Every interface of a plugin, oldest first.
SELECT * FROM gateway_interfaces
WHERE plugin_name = @plugin_name
ORDER BY created_at, id;

-- name: SetPluginInterfaceSchemas :execrows
-- A plugin's version went up: its new config schema replaces the schema of
-- every interface of it (docs/api.md, versioning).
UPDATE gateway_interfaces
SET config_schema = @config_schema, updated_at = @now
WHERE plugin_name = @plugin_name;

-- name: ListPaymentMethods :many
-- What a customer may choose to pay with: enabled interfaces of an enabled,
-- loaded gateway plugin. The config (it holds merchant secrets) is read only
-- for the currencies it names, and never leaves the service.
SELECT gateway_interfaces.id, gateway_interfaces.display_name, gateway_interfaces.plugin_name,
       gateway_interfaces.config
FROM gateway_interfaces
JOIN plugins ON plugins.name = gateway_interfaces.plugin_name
WHERE gateway_interfaces.enabled
  AND plugins.enabled
  AND plugins.status = 'loaded'
  AND plugins.type = 'gateway'
ORDER BY gateway_interfaces.display_name, gateway_interfaces.id;
