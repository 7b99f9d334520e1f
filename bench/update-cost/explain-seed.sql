-- Adds to run.sh's database what EXPLAIN needs of the other two tables:
-- one event per order (done, but the last 2,000 pending) and two audit
-- rows per order (the order's and the payment's), plus admin actions.
INSERT INTO events (event_type, order_id, status, run_at, created_at, updated_at)
SELECT 'order_paid', o.id, CASE WHEN n > count(*) OVER () - 2000 THEN 'pending' ELSE 'done' END,
       o.created_at, o.created_at, o.created_at
FROM (SELECT id, created_at, row_number() OVER (ORDER BY created_at) AS n FROM orders) o;
INSERT INTO audit_log (actor_kind, actor_id, action, entity_type, entity_id, after, created_at)
SELECT 'gateway', '10000000-0000-4000-8000-000000000001', a.action, a.entity, x.id::text, '{}', x.created_at
FROM (SELECT id, created_at FROM orders) x,
     (VALUES ('order.pay', 'order'), ('payment.settle', 'payment')) a(action, entity);
INSERT INTO audit_log (actor_kind, actor_id, action, entity_type, entity_id, after, created_at)
SELECT 'admin', 'admin-' || (g % 5), 'product.update', 'product', (g % 50)::text, '{}', now() - g * interval '1 hour'
FROM generate_series(1, 2000) g;
VACUUM ANALYZE;
