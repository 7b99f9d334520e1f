-- The ledger check (internal/ledger.Verify): read-only queries that list the
-- rows breaking one of the money rules, in the spirit of Jepsen's bank test
-- (totals conserved, nothing negative, nothing doubled). Every query answers
-- rows of (rule, ids, detail): the rule's name, the ids of the rows involved
-- and a short human text; no row means the rule holds. Verify runs them all
-- in one REPEATABLE READ, READ ONLY transaction so they see one snapshot.

-- name: LedgerSnapshot :exec
-- Makes the transaction REPEATABLE READ and READ ONLY: the first statement
-- of Verify's transaction, and of the trends' reads (PaymentTrendsIn).
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY;

-- name: LedgerMoneyScale :many
-- No amount carries more than two decimals. NUMERIC(12,2) rounds on the way
-- in, so this only fails if a column's type was changed under us.
SELECT 'money_scale'::text AS rule, ARRAY[t.id]::text[] AS ids,
       (t.col || ' = ' || t.v::text)::text AS detail
FROM (
    SELECT id::text AS id, 'products.price' AS col, price AS v FROM products
    UNION ALL SELECT id::text, 'orders.total_amount', total_amount FROM orders
    UNION ALL SELECT id::text, 'orders.renewal_price', renewal_price FROM orders WHERE renewal_price IS NOT NULL
    UNION ALL SELECT id::text, 'invoices.amount', amount FROM invoices
    UNION ALL SELECT id::text, 'invoices.paid_amount', paid_amount FROM invoices
    UNION ALL SELECT id::text, 'payments.amount', amount FROM payments
    UNION ALL SELECT id::text, 'payments.refunded_amount', refunded_amount FROM payments
    UNION ALL SELECT id::text, 'refunds.amount', amount FROM refunds
    UNION ALL SELECT id::text, 'customers.balance', balance FROM customers
    UNION ALL SELECT id::text, 'customers.credit_limit', credit_limit FROM customers
    UNION ALL SELECT id::text, 'balance_transactions.amount', amount FROM balance_transactions
    UNION ALL SELECT id::text, 'balance_transactions.balance_before', balance_before FROM balance_transactions
    UNION ALL SELECT id::text, 'balance_transactions.balance_after', balance_after FROM balance_transactions
) AS t
WHERE scale(t.v) > 2 OR t.v <> round(t.v, 2);

-- name: LedgerNegativeAmounts :many
-- Nothing negative: amounts that must be positive are, and no balance is
-- below its credit limit.
SELECT 'negative_amount'::text AS rule, ARRAY[t.id]::text[] AS ids, t.detail::text AS detail
FROM (
    SELECT id::text AS id, 'payment amount ' || amount::text || ', refunded ' || refunded_amount::text AS detail
    FROM payments WHERE amount <= 0 OR refunded_amount < 0
    UNION ALL
    SELECT id::text, 'refund amount ' || amount::text FROM refunds WHERE amount <= 0
    UNION ALL
    SELECT id::text, 'order total ' || total_amount::text FROM orders WHERE total_amount < 0
    UNION ALL
    SELECT id::text, 'invoice amount ' || amount::text || ', paid ' || paid_amount::text
    FROM invoices WHERE amount <= 0 OR paid_amount < 0 OR paid_amount > amount
    UNION ALL
    SELECT id::text, 'balance ' || balance::text || ' below the credit limit ' || credit_limit::text
    FROM customers WHERE credit_limit < 0 OR balance < -credit_limit
) AS t;

-- name: LedgerPaymentRefunds :many
-- A payment's refunded_amount is the sum of its succeeded refunds and never
-- exceeds its amount; succeeded and pending (reserved) refunds together
-- never exceed it either.
SELECT 'payment_refunds'::text AS rule, ARRAY[p.id::text]::text[] AS ids,
       ('refunded_amount ' || p.refunded_amount::text || ', succeeded refunds ' || coalesce(r.ok, 0)::text
        || ', succeeded + pending ' || coalesce(r.reserved, 0)::text || ', amount ' || p.amount::text)::text AS detail
FROM payments AS p
LEFT JOIN (
    SELECT payment_id,
           sum(amount) FILTER (WHERE status = 'succeeded') AS ok,
           sum(amount) FILTER (WHERE status IN ('succeeded', 'pending')) AS reserved
    FROM refunds
    GROUP BY payment_id
) AS r ON r.payment_id = p.id
WHERE coalesce(r.ok, 0) <> p.refunded_amount
   OR p.refunded_amount > p.amount
   OR coalesce(r.reserved, 0) > p.amount
UNION ALL
-- Only a paid payment, or a failed one whose money was captured, has
-- refunds that succeeded or wait for the gateway; captured money goes back
-- at most once.
SELECT 'payment_refunds'::text, ARRAY[p.id::text, rf.id::text]::text[],
       ('refund ' || rf.status || ' on a ' || p.status || ' payment with ' || p.captured_amount::text || ' captured')::text
FROM refunds AS rf
JOIN payments AS p ON p.id = rf.payment_id
WHERE rf.status IN ('succeeded', 'pending')
  AND p.status NOT IN ('success', 'refunded')
  AND NOT (p.status = 'failed' AND p.captured_amount > 0)
UNION ALL
SELECT 'payment_refunds'::text, ARRAY[p.id::text]::text[],
       ('failed payment returned ' || p.refunded_amount::text || ' of ' || p.captured_amount::text || ' captured')::text
FROM payments AS p
WHERE p.status = 'failed' AND p.refunded_amount > p.captured_amount;

-- name: LedgerPaymentStatus :many
-- A paid payment is refunded exactly when refunded_amount = amount; paid_at
-- set exactly when the payment is success or refunded, failed_at exactly
-- when it failed; money captured (all of it, with captured_at) only on a
-- failed payment; a known status and method.
SELECT 'payment_status'::text AS rule, ARRAY[id::text]::text[] AS ids,
       ('status ' || status || ', method ' || method || ', refunded ' || refunded_amount::text || ' of ' || amount::text
        || ', captured ' || captured_amount::text || ', paid_at ' || coalesce(paid_at::text, 'null')
        || ', failed_at ' || coalesce(failed_at::text, 'null'))::text AS detail
FROM payments
WHERE (status = 'refunded') <> (refunded_amount = amount AND status <> 'failed')
   OR (status IN ('success', 'refunded')) <> (paid_at IS NOT NULL)
   OR (status = 'failed') <> (failed_at IS NOT NULL)
   OR (captured_amount <> 0 AND (status <> 'failed' OR captured_amount <> amount))
   OR (captured_amount <> 0) <> (captured_at IS NOT NULL)
   OR status NOT IN ('pending', 'success', 'failed', 'refunded')
   OR method NOT IN ('gateway', 'balance');

-- name: LedgerOrderPaidEvents :many
-- Exactly one order_paid event per paid order: never two for one order; one
-- for every order marked paid (paid_at, set only in the transaction that
-- queues order_paid), none for an order never paid; a settled payment of the
-- order's own (without invoice) marked it paid; every order_paid names a
-- settled payment of its order with the same amount (payment_id null only
-- for a zero-amount order).
SELECT 'order_paid_twice'::text AS rule,
       (ARRAY[e.order_id::text] || array_agg(e.id::text ORDER BY e.created_at, e.id))::text[] AS ids,
       (count(*)::text || ' order_paid events for one order')::text AS detail
FROM events AS e
WHERE e.event_type = 'order_paid'
GROUP BY e.order_id
HAVING count(*) > 1
UNION ALL
SELECT 'order_paid_missing'::text, ARRAY[o.id::text]::text[],
       ('order ' || o.status || ' paid at ' || o.paid_at::text || ' has no order_paid event')::text
FROM orders AS o
WHERE o.paid_at IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM events AS e WHERE e.order_id = o.id AND e.event_type = 'order_paid')
UNION ALL
SELECT 'order_paid_missing'::text, ARRAY[o.id::text, p.id::text]::text[],
       ('order ' || o.status || ' has a settled payment of ' || p.amount::text || ' of its own but was never marked paid')::text
FROM payments AS p
JOIN orders AS o ON o.id = p.order_id
WHERE p.status IN ('success', 'refunded') AND p.invoice_id IS NULL AND o.paid_at IS NULL
UNION ALL
SELECT 'order_paid_unexpected'::text, ARRAY[o.id::text, e.id::text]::text[],
       ('order ' || o.status || ' was never paid but has an order_paid event')::text
FROM events AS e
JOIN orders AS o ON o.id = e.order_id
WHERE e.event_type = 'order_paid' AND o.paid_at IS NULL
UNION ALL
SELECT 'order_paid_payment'::text, ARRAY[e.order_id::text, e.id::text]::text[],
       ('order_paid names payment ' || coalesce(e.payload->>'payment_id', 'null') || ' of ' || coalesce(e.payload->>'amount', '?')
        || ', which is ' || coalesce(p.status || ' of ' || p.amount::text || ' for order ' || coalesce(p.order_id::text, 'none'), 'missing'))::text
FROM events AS e
LEFT JOIN payments AS p ON p.id::text = e.payload->>'payment_id'
JOIN orders AS o ON o.id = e.order_id
WHERE e.event_type = 'order_paid'
  AND CASE
        WHEN e.payload->>'payment_id' IS NULL THEN o.total_amount <> 0
        ELSE p.id IS NULL OR p.order_id IS DISTINCT FROM e.order_id OR p.status NOT IN ('success', 'refunded')
             OR (e.payload->>'amount') IS NULL OR (e.payload->>'amount') !~ '^-?[0-9]{1,10}(\.[0-9]{1,2})?$'
             OR (e.payload->>'amount')::numeric <> p.amount
      END;

-- name: LedgerOrderPayments :many
-- Every order that was paid (paid, provisioning, active) has a settled
-- payment, or is a zero-amount order; no order has two settled payments of
-- its own (without invoice), and such a payment is for the order's total.
SELECT 'order_unpaid'::text AS rule, ARRAY[o.id::text]::text[] AS ids,
       ('order ' || o.status || ' of ' || o.total_amount::text || ' ' || o.currency || ' has no settled payment')::text AS detail
FROM orders AS o
WHERE o.status IN ('paid', 'provisioning', 'active')
  AND o.total_amount <> 0
  AND NOT EXISTS (SELECT 1 FROM payments AS p WHERE p.order_id = o.id AND p.status IN ('success', 'refunded'))
UNION ALL
SELECT 'order_paid_twice'::text,
       (ARRAY[p.order_id::text] || array_agg(p.id::text ORDER BY p.paid_at, p.id))::text[],
       (count(*)::text || ' settled payments for one order, ' || sum(p.amount)::text || ' in all')::text
FROM payments AS p
WHERE p.order_id IS NOT NULL AND p.invoice_id IS NULL AND p.status IN ('success', 'refunded')
GROUP BY p.order_id
HAVING count(*) > 1
UNION ALL
SELECT 'order_payment_amount'::text, ARRAY[o.id::text, p.id::text]::text[],
       ('payment of ' || p.amount::text || ' ' || p.currency || ' for an order of ' || o.total_amount::text || ' ' || o.currency)::text
FROM payments AS p
JOIN orders AS o ON o.id = p.order_id
WHERE p.invoice_id IS NULL AND (p.amount <> o.total_amount OR p.currency <> o.currency);

-- name: LedgerInvoicePayments :many
-- An invoice's paid_amount is the sum of its settled payments, and it is
-- paid exactly when that reaches its amount.
SELECT 'invoice_paid_amount'::text AS rule, ARRAY[i.id::text]::text[] AS ids,
       ('invoice ' || i.status || ' of ' || i.amount::text || ': paid_amount ' || i.paid_amount::text
        || ', settled payments ' || coalesce(s.total, 0)::text)::text AS detail
FROM invoices AS i
LEFT JOIN (
    SELECT invoice_id, sum(amount) AS total
    FROM payments
    WHERE invoice_id IS NOT NULL AND status IN ('success', 'refunded')
    GROUP BY invoice_id
) AS s ON s.invoice_id = i.id
WHERE i.paid_amount <> coalesce(s.total, 0)
   OR i.paid_amount > i.amount
   OR (i.status = 'paid') <> (i.paid_amount = i.amount AND i.status <> 'cancelled');

-- name: LedgerBalanceChain :many
-- Each customer's balance transactions form one chain: balance_after =
-- balance_before + amount; each row starts where the previous one (by
-- created_at, id) ended, the first at 0.00; the last ends at
-- customers.balance (0.00 without any row).
WITH chain AS (
    SELECT b.id, b.customer_id, b.amount, b.balance_before, b.balance_after,
           lag(b.balance_after) OVER w AS previous_after,
           lag(b.id) OVER w AS previous_id,
           row_number() OVER w AS n,
           count(*) OVER (PARTITION BY b.customer_id) AS rows_total
    FROM balance_transactions AS b
    WINDOW w AS (PARTITION BY b.customer_id ORDER BY b.created_at, b.id)
)
SELECT 'balance_arithmetic'::text AS rule, ARRAY[c.customer_id::text, c.id::text]::text[] AS ids,
       (c.balance_before::text || ' + ' || c.amount::text || ' <> ' || c.balance_after::text)::text AS detail
FROM chain AS c
WHERE c.balance_after <> c.balance_before + c.amount
UNION ALL
SELECT 'balance_chain'::text, ARRAY[c.customer_id::text, c.previous_id::text, c.id::text]::text[],
       ('balance_before ' || c.balance_before::text || ' after a row ending at ' || c.previous_after::text)::text
FROM chain AS c
WHERE c.n > 1 AND c.balance_before <> c.previous_after
UNION ALL
SELECT 'balance_chain'::text, ARRAY[c.customer_id::text, c.id::text]::text[],
       ('the first balance transaction starts at ' || c.balance_before::text || ', not 0.00')::text
FROM chain AS c
WHERE c.n = 1 AND c.balance_before <> 0
UNION ALL
SELECT 'balance_chain'::text, ARRAY[cu.id::text]::text[],
       ('customers.balance ' || cu.balance::text || ' but the ledger ends at ' || coalesce(c.balance_after, 0)::text)::text
FROM customers AS cu
LEFT JOIN chain AS c ON c.customer_id = cu.id AND c.n = c.rows_total
WHERE cu.balance <> coalesce(c.balance_after, 0);

-- name: LedgerBalanceReferences :many
-- Nothing doubled between payments and the balance: every balance payment
-- has exactly one 'payment' row of minus its amount, every 'payment' row a
-- balance payment; every 'refund' row credits a succeeded refund of the same
-- amount, every succeeded refund of a balance payment exactly one row; a
-- 'recharge' row brings in a settled payment of the same amount.
SELECT 'balance_payment'::text AS rule, ARRAY[p.id::text]::text[] AS ids,
       ('balance payment of ' || p.amount::text || ' (' || p.status || ') has ' || count(b.id)::text
        || ' ledger rows totalling ' || coalesce(sum(b.amount), 0)::text)::text AS detail
FROM payments AS p
LEFT JOIN balance_transactions AS b ON b.payment_id = p.id AND b.type = 'payment'
WHERE p.method = 'balance'
GROUP BY p.id, p.amount, p.status
HAVING count(b.id) <> 1 OR coalesce(sum(b.amount), 0) <> -p.amount OR bool_or(b.customer_id <> p.customer_id)
UNION ALL
SELECT 'balance_payment'::text, ARRAY[b.id::text]::text[],
       ('ledger row of type payment for ' || coalesce(p.method || ' payment ' || p.id::text, 'no payment'))::text
FROM balance_transactions AS b
LEFT JOIN payments AS p ON p.id = b.payment_id
WHERE b.type = 'payment' AND (p.id IS NULL OR p.method <> 'balance')
UNION ALL
SELECT 'balance_refund'::text, ARRAY[b.id::text]::text[],
       ('refund ledger row of ' || b.amount::text || ' for ' || coalesce('a ' || r.status || ' refund to the ' || r.destination || ' of ' || r.amount::text, 'no refund'))::text
FROM balance_transactions AS b
LEFT JOIN refunds AS r ON r.id = b.refund_id
WHERE b.type = 'refund'
  AND (r.id IS NULL OR r.status <> 'succeeded' OR r.destination <> 'balance' OR r.amount <> b.amount
       OR b.payment_id IS DISTINCT FROM r.payment_id)
UNION ALL
SELECT 'balance_refund'::text, ARRAY[r.payment_id::text, r.id::text]::text[],
       ('succeeded refund of ' || r.amount::text || ' to the balance has ' || count(b.id)::text || ' ledger rows')::text
FROM refunds AS r
LEFT JOIN balance_transactions AS b ON b.refund_id = r.id
WHERE r.status = 'succeeded' AND r.destination = 'balance'
GROUP BY r.payment_id, r.id, r.amount
HAVING count(b.id) <> 1
UNION ALL
-- A balance payment's money goes back to the balance only.
SELECT 'balance_refund'::text, ARRAY[p.id::text, r.id::text]::text[],
       ('refund of a balance payment to the ' || r.destination)::text
FROM refunds AS r
JOIN payments AS p ON p.id = r.payment_id AND p.method = 'balance'
WHERE r.destination <> 'balance'
UNION ALL
SELECT 'balance_recharge'::text, ARRAY[b.id::text]::text[],
       ('recharge of ' || b.amount::text || ' from ' || coalesce(p.status || ' payment of ' || p.amount::text, 'no payment'))::text
FROM balance_transactions AS b
LEFT JOIN payments AS p ON p.id = b.payment_id
WHERE b.type = 'recharge' AND (p.id IS NULL OR p.status NOT IN ('success', 'refunded') OR p.amount <> b.amount);

-- name: LedgerEvents :many
-- Every event is done, pending, processing or failed; an order is
-- provisioned at most once; and a processing event past its claim (left by
-- a dead worker) is reclaimed by the event worker's leader once a poll
-- interval. It is stuck only when a leader holds the role and has let a
-- minute pass, since both the claim ran out and it was elected, without
-- reclaiming it. With no leader (every node stopped, a restored dump not yet
-- served) it waits for the next one to start, which reclaims it first: the
-- totals count it (events_past_claim), as they count failed events.
SELECT 'event_status'::text AS rule, ARRAY[e.order_id::text, e.id::text]::text[] AS ids,
       (e.event_type || ' is ' || e.status)::text AS detail
FROM events AS e
WHERE e.status NOT IN ('pending', 'processing', 'done', 'failed')
UNION ALL
SELECT 'event_stuck'::text, ARRAY[e.order_id::text, e.id::text]::text[],
       (e.event_type || ' processing by ' || coalesce(e.locked_by, '?') || ', claim ran out at '
        || coalesce(e.locked_until::text, 'null') || ' (attempt ' || e.attempts::text || ')')::text
FROM events AS e
JOIN leader_leases AS l ON l.role = 'event_worker' AND l.expires_at > now()
WHERE e.status = 'processing'
  AND greatest(e.locked_until, l.elected_at) < now() - interval '1 minute'
UNION ALL
SELECT 'order_provisioned_twice'::text,
       (ARRAY[e.order_id::text] || array_agg(e.id::text ORDER BY e.created_at, e.id))::text[],
       (count(*)::text || ' order_provisioned events for one order')::text
FROM events AS e
WHERE e.event_type = 'order_provisioned'
GROUP BY e.order_id
HAVING count(*) > 1
UNION ALL
SELECT 'order_provisioned_twice'::text,
       (ARRAY[i.order_id::text] || array_agg(i.id::text ORDER BY i.created_at, i.id))::text[],
       (count(*)::text || ' instances for one order')::text
FROM instances AS i
GROUP BY i.order_id
HAVING count(*) > 1;

-- name: LedgerTotals :one
-- What Verify looked at, for its report: row counts and money totals as
-- text (all currencies added together: a sanity figure, not an amount, and
-- free to exceed NUMERIC(12,2)).
SELECT
    (SELECT count(*) FROM payments)::bigint AS payments,
    (SELECT count(*) FROM payments WHERE status IN ('success', 'refunded'))::bigint AS settled_payments,
    (SELECT coalesce(sum(amount), 0) FROM payments WHERE status IN ('success', 'refunded'))::text AS received,
    (SELECT coalesce(sum(refunded_amount), 0) FROM payments)::text AS refunded,
    (SELECT coalesce(sum(captured_amount), 0) FROM payments)::text AS captured,
    (SELECT coalesce(sum(captured_amount - refunded_amount), 0) FROM payments WHERE captured_amount > 0)::text AS to_return,
    (SELECT count(*) FROM refunds)::bigint AS refunds,
    (SELECT count(*) FROM refunds WHERE status = 'pending')::bigint AS pending_refunds,
    (SELECT count(*) FROM orders)::bigint AS orders,
    (SELECT count(*) FROM invoices)::bigint AS invoices,
    (SELECT count(*) FROM customers)::bigint AS customers,
    (SELECT coalesce(sum(balance), 0) FROM customers)::text AS balances,
    (SELECT count(*) FROM balance_transactions)::bigint AS balance_transactions,
    (SELECT count(*) FROM events)::bigint AS events,
    (SELECT count(*) FROM events WHERE status = 'done')::bigint AS events_done,
    (SELECT count(*) FROM events WHERE status = 'pending')::bigint AS events_pending,
    (SELECT count(*) FROM events WHERE status = 'processing')::bigint AS events_processing,
    (SELECT count(*) FROM events WHERE status = 'processing'
        AND (locked_until IS NULL OR locked_until < now()))::bigint AS events_past_claim,
    (SELECT count(*) FROM events WHERE status = 'failed')::bigint AS events_failed;
