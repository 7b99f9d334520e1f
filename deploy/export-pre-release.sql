-- What to keep from a database made by a pre-release build of paymentd (one
-- from before v0.1.0), which has no upgrade path (CHANGELOG.md, v0.1.0). Run
-- with psql in an empty folder, against that database, read-only:
--
--   psql "postgres://…/paymentd" -v ON_ERROR_STOP=1 -f deploy/export-pre-release.sql
--
-- It writes three CSV files (header line, UTF-8) to the current folder:
--   customers.csv     every customer: e-mail, name, currency, balance, credit limit
--   open-invoices.csv every invoice not paid or cancelled, with what is still owed
--   live-orders.csv   every order a customer still has a service for
-- and prints the totals to compare with the files. Passwords, tokens, keys,
-- payments and the audit trail are not exported: customers set a new password
-- on the new installation (Register, or an admin), and the old database stays
-- the record of what was paid (keep its backup).
--
-- Only columns every pre-release build had are read. deploy/main_test.go runs
-- this file against a database of the first release.
\set ON_ERROR_STOP 1
BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY;
\copy (SELECT id, email, name, currency, balance, credit_limit, created_at, disabled_at FROM customers ORDER BY created_at, id) TO 'customers.csv' WITH (FORMAT csv, HEADER)
\copy (SELECT i.id, i.number, c.email, i.order_id, i.status, i.currency, i.amount, i.paid_amount, i.amount - i.paid_amount AS owed, i.issued_at, i.due_at, i.description FROM invoices i JOIN customers c ON c.id = i.customer_id WHERE i.status NOT IN ('paid', 'cancelled') ORDER BY i.created_at, i.id) TO 'open-invoices.csv' WITH (FORMAT csv, HEADER)
\copy (SELECT o.id, c.email, o.product_id, o.status, o.billing_cycle, o.currency, o.total_amount, o.renewal_price, o.paid_until, o.description FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.status IN ('paid', 'provisioning', 'active', 'suspended') ORDER BY o.created_at, o.id) TO 'live-orders.csv' WITH (FORMAT csv, HEADER)
SELECT (SELECT count(*) FROM customers) AS customers,
       (SELECT coalesce(sum(balance), 0) FROM customers) AS balances,
       (SELECT count(*) FROM invoices WHERE status NOT IN ('paid', 'cancelled')) AS open_invoices,
       (SELECT coalesce(sum(amount - paid_amount), 0) FROM invoices WHERE status NOT IN ('paid', 'cancelled')) AS owed,
       (SELECT count(*) FROM orders WHERE status IN ('paid', 'provisioning', 'active', 'suspended')) AS live_orders;
COMMIT;
