-- Fulfilment of paid orders by the event handlers: the instance an order
-- provisions, and the marker of an automatic refund.

-- name: EnsureOrderInstance :one
-- The order's instance, created in status provisioning on the first call;
-- a retried order_paid finds the one it made (instances_order_id_key) and
-- never provisions a second.
-- Call it with the order row locked.
INSERT INTO instances (customer_id, order_id, product_id, provider_plugin, name, created_at, updated_at)
VALUES (@customer_id, @order_id, sqlc.narg('product_id'), sqlc.narg('provider_plugin'), @name, @at, @at)
ON CONFLICT (order_id) DO UPDATE
    SET updated_at = instances.updated_at
RETURNING *;

-- name: GetOrderInstance :one
-- The instance of an order; no row when it has none.
SELECT * FROM instances
WHERE order_id = @order_id;

-- name: GetOrdersInstances :many
-- The instances of a batch of orders (instances_order_id_key), one
-- statement; an order without one has no row.
SELECT * FROM instances
WHERE order_id = ANY(@order_ids::uuid[]);

-- name: MarkInstanceTerminated :one
-- → terminated: the provider ended the instance (its order was refunded,
-- terminated or completed). No row when it is already terminated.
UPDATE instances
SET status = 'terminated',
    terminated_at = @at::timestamptz,
    updated_at = @at::timestamptz
WHERE id = @id
  AND status <> 'terminated'
RETURNING *;

-- name: MarkInstanceFailed :one
-- provisioning → error with last_error: provisioning failed for good. No
-- row when the instance is no longer provisioning.
UPDATE instances
SET status = 'error',
    last_error = @last_error,
    updated_at = @at
WHERE id = @id
  AND status = 'provisioning'
RETURNING *;

-- name: SetInstanceLastError :exec
-- Records why an attempt to provision failed while it will be retried.
UPDATE instances
SET last_error = @last_error,
    updated_at = @at
WHERE id = @id
  AND status = 'provisioning';

-- name: AuditEntryExists :one
-- Whether the audit log holds an entry of action on an entity whose
-- after.event_id is event_id: the durable marker that an event's one-time
-- side effect (an automatic refund) is done.
SELECT EXISTS (
    SELECT 1 FROM audit_log
    WHERE entity_type = @entity_type
      AND entity_id = @entity_id
      AND action = @action
      AND after ->> 'event_id' = @event_id::text
)::boolean;

-- name: SetInstanceStatus :one
-- A live instance → status (running or suspended): what the provider did
-- when the order was suspended or resumed. No row when the instance is not
-- live (provisioning, error, terminated: terminated is final) or has the
-- status already.
UPDATE instances
SET status = @status,
    last_error = '',
    updated_at = @at
WHERE id = @id
  AND status IN ('running', 'stopped', 'suspended')
  AND status <> @status
RETURNING *;

-- name: EnsureOrderInstances :many
-- EnsureOrderInstance for the orders of one batch of the event worker, in
-- one statement: the arrays are one row per order, in the order of
-- order_ids (which must be distinct). Call it with the order rows locked.
INSERT INTO instances (customer_id, order_id, product_id, provider_plugin, name, created_at, updated_at)
SELECT i.customer_id, i.order_id, i.product_id, i.provider_plugin, i.name, @at, @at
FROM (SELECT unnest(@customer_ids::uuid[]) AS customer_id, unnest(@order_ids::uuid[]) AS order_id,
             unnest(@product_ids::uuid[]) AS product_id, unnest(@provider_plugins::text[]) AS provider_plugin,
             unnest(@names::text[]) AS name) AS i
ON CONFLICT (order_id) DO UPDATE
    SET updated_at = instances.updated_at
RETURNING *;

-- name: MarkInstancesProvisioned :many
-- provisioning → status (running) with what the provider answered, for
-- the instances of the event worker (a batch, or one), in one statement:
-- the arrays are one row per instance (ids distinct). An instance no
-- longer provisioning is missing from the result.
UPDATE instances
SET external_id = a.external_id,
    status = @status,
    details = a.details,
    last_error = '',
    updated_at = @at
FROM (SELECT unnest(@ids::uuid[]) AS id, unnest(@external_ids::text[]) AS external_id,
             unnest(@details::jsonb[]) AS details) AS a
WHERE instances.id = a.id
  AND instances.status = 'provisioning'
RETURNING instances.*;
