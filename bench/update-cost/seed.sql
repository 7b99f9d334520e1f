-- Seed of bench/update-cost/run.sh: 1,000 customers, one epay interface,
-- one product; :history settled orders and payments (what the indexes hold
-- already) and :pending pending orders, each with its pending gateway
-- payment (what the burst settles). Ids are numbered as the bench's
-- (payment n: 20000000-…-n, order n: 30000000-…-n).
INSERT INTO plugins (name, type, source, sha256)
VALUES ('epay', 'gateway', '', repeat('0', 64));
INSERT INTO gateway_interfaces (id, plugin_name, display_name, config, config_schema, enabled)
VALUES ('10000000-0000-4000-8000-000000000001', 'epay', 'epay', '{}', '{}', true);
INSERT INTO products (id, name, price, currency)
VALUES ('10000000-0000-4000-8000-000000000002', 'VPS', 12.30, 'CNY');
INSERT INTO customers (id, email, password_hash, currency)
SELECT ('40000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, 'c' || g || '@example.com', 'x', 'CNY'
FROM generate_series(1, 1000) g;

INSERT INTO orders (id, customer_id, product_id, status, total_amount, currency, paid_at, created_at, updated_at)
SELECT ('30000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
       ('40000000-0000-4000-8000-' || lpad(to_hex(1 + g % 1000), 12, '0'))::uuid,
       '10000000-0000-4000-8000-000000000002',
       CASE WHEN g <= :history THEN 'active' ELSE 'pending' END, 12.30, 'CNY',
       CASE WHEN g <= :history THEN now() - (:history + :pending - g) * interval '10 second' END,
       now() - (:history + :pending - g) * interval '10 second', now()
FROM generate_series(1, :history + :pending) g;

INSERT INTO payments (id, order_id, customer_id, method, gateway_interface_id, amount, currency, status,
                      gateway_payment_id, gateway_tx_id, paid_at, next_reconcile_at, payment_url, return_url,
                      created_at, updated_at)
SELECT ('20000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
       ('30000000-0000-4000-8000-' || lpad(to_hex(g), 12, '0'))::uuid,
       ('40000000-0000-4000-8000-' || lpad(to_hex(1 + g % 1000), 12, '0'))::uuid,
       'gateway', '10000000-0000-4000-8000-000000000001', 12.30, 'CNY',
       CASE WHEN g <= :history THEN 'success' ELSE 'pending' END,
       CASE WHEN g <= :history THEN 'H' || g ELSE '' END,
       CASE WHEN g <= :history THEN 'H' || g ELSE '' END,
       CASE WHEN g <= :history THEN now() - (:history + :pending - g) * interval '10 second' END,
       CASE WHEN g > :history THEN now() + interval '1 minute' END,
       'http://epay.example/submit.php?trade_no=' || g, 'https://shop.example/done',
       now() - (:history + :pending - g) * interval '10 second', now()
FROM generate_series(1, :history + :pending) g;
VACUUM ANALYZE;
