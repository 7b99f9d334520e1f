-- The stored configs that hold plugin secrets, for the passes over them
-- (internal/secretpass: the one at start, `paymentd secrets rotate`): a
-- gateway interface's config, a product's provider_config, and the copy of
-- it an order froze in item.provider_config. Each with the config schema
-- that says which properties are secret (the interface's own; the provider
-- plugin's current one for products and orders: NULL when the plugin is
-- gone, and then only the values already encrypted are found). Pages by
-- id; each row is then locked on its own to be rewritten.

-- name: PageGatewayInterfaceConfigs :many
SELECT id, display_name AS name, config, config_schema
FROM gateway_interfaces
WHERE id > @after
ORDER BY id
LIMIT @row_limit;

-- name: LockGatewayInterfaceConfig :one
-- NO KEY: payments referring to the interface are not held up.
SELECT id, display_name AS name, config, config_schema
FROM gateway_interfaces
WHERE id = @id
FOR NO KEY UPDATE;

-- name: PageProductProviderConfigs :many
SELECT products.id, products.name, products.provider_config AS config, plugins.config_schema
FROM products
LEFT JOIN plugins ON plugins.name = products.provider_plugin
WHERE products.id > @after AND products.provider_config <> '{}'::jsonb
ORDER BY products.id
LIMIT @row_limit;

-- name: LockProductProviderConfig :one
-- NO KEY: orders referring to the product are not held up.
SELECT products.id, products.name, products.provider_config AS config, plugins.config_schema
FROM products
LEFT JOIN plugins ON plugins.name = products.provider_plugin
WHERE products.id = @id
FOR NO KEY UPDATE OF products;

-- name: SetProductProviderConfig :exec
-- The same settings with their secrets (re-)encrypted: not an admin's
-- change, so updated_at stays.
UPDATE products
SET provider_config = @config
WHERE id = @id;

-- name: PageOrderProviderConfigs :many
-- Only orders whose item holds a non-empty provider_config (orders of
-- products a provider plugin provisions).
SELECT orders.id, orders.description AS name, (orders.item -> 'provider_config')::jsonb AS config, plugins.config_schema
FROM orders
LEFT JOIN plugins ON plugins.name = orders.item ->> 'provider_plugin'
WHERE orders.id > @after
  AND jsonb_typeof(orders.item -> 'provider_config') = 'object'
  AND orders.item -> 'provider_config' <> '{}'::jsonb
ORDER BY orders.id
LIMIT @row_limit;

-- name: LockOrderProviderConfig :one
SELECT orders.id, orders.description AS name, (orders.item -> 'provider_config')::jsonb AS config, plugins.config_schema
FROM orders
LEFT JOIN plugins ON plugins.name = orders.item ->> 'provider_plugin'
WHERE orders.id = @id
  AND jsonb_typeof(orders.item -> 'provider_config') = 'object'
FOR NO KEY UPDATE OF orders;

-- name: SetOrderProviderConfig :exec
-- The item's provider_config with its secrets (re-)encrypted; the rest of
-- the item, and updated_at, stay.
UPDATE orders
SET item = jsonb_set(item, '{provider_config}', @config::jsonb)
WHERE id = @id;
