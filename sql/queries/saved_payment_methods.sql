-- Saved payment methods (issue 39, 1; migration 00014).

-- name: GetGatewayCustomer :one
-- The gateway's customer of a paymentd customer on an interface;
-- ErrNotFound before the first saving payment.
SELECT gateway_customer_id FROM gateway_customers
WHERE gateway_interface_id = @gateway_interface_id AND customer_id = @customer_id;

-- name: RememberGatewayCustomer :exec
-- Keeps the first gateway customer made for a paymentd customer: a
-- concurrent second one is not remembered (its saved method names it
-- itself).
INSERT INTO gateway_customers (gateway_interface_id, customer_id, gateway_customer_id, created_at)
VALUES (@gateway_interface_id, @customer_id, @gateway_customer_id, @created_at)
ON CONFLICT (gateway_interface_id, customer_id) DO NOTHING;

-- name: SaveSavedPaymentMethod :one
-- Records a method a paid Checkout saved; a repeat of the callback finds
-- it saved (the same gateway method) and answers that row.
INSERT INTO saved_payment_methods (id, customer_id, gateway_interface_id, gateway_customer_id, gateway_method_id,
                                   brand, last4, exp_month, exp_year, created_at)
VALUES (@id, @customer_id, @gateway_interface_id, @gateway_customer_id, @gateway_method_id,
        @brand, @last4, @exp_month, @exp_year, @created_at)
ON CONFLICT (gateway_interface_id, gateway_method_id) DO UPDATE SET brand = saved_payment_methods.brand
RETURNING *;

-- name: ListSavedPaymentMethods :many
-- A customer's saved methods not removed, newest first.
SELECT * FROM saved_payment_methods
WHERE customer_id = @customer_id AND removed_at IS NULL
ORDER BY created_at DESC, id;

-- name: GetSavedPaymentMethod :one
SELECT * FROM saved_payment_methods WHERE id = @id;

-- name: MarkSavedPaymentMethodRemoved :one
-- ErrNotFound when it was removed already.
UPDATE saved_payment_methods SET removed_at = @removed_at
WHERE id = @id AND removed_at IS NULL
RETURNING *;

-- name: GetOrderAutoCharge :one
SELECT auto_charge FROM order_auto_charge WHERE order_id = @order_id;

-- name: SetOrderAutoCharge :exec
INSERT INTO order_auto_charge (order_id, auto_charge, updated_at) VALUES (@order_id, @auto_charge, @updated_at)
ON CONFLICT (order_id) DO UPDATE SET auto_charge = EXCLUDED.auto_charge, updated_at = EXCLUDED.updated_at;

-- name: InsertSavedChargeAttempt :exec
-- Claims attempt n of an invoice: a second leader's insert of the same
-- attempt fails on the primary key, and it charges nothing.
INSERT INTO saved_charge_attempts (invoice_id, attempt, payment_id, saved_method_id, created_at)
VALUES (@invoice_id, @attempt, @payment_id, @saved_method_id, @created_at);

-- name: AnswerSavedChargeAttempt :execrows
-- Records an attempt's outcome once: the charge's answer, or, when that was
-- lost, the status query's (payment.answerLostCharge).
UPDATE saved_charge_attempts SET outcome = @outcome, code = @code, message = @message, answered_at = @answered_at
WHERE payment_id = @payment_id AND outcome = '';

-- name: ListSavedChargeAttempts :many
-- An invoice's attempts, first first.
SELECT * FROM saved_charge_attempts WHERE invoice_id = @invoice_id ORDER BY attempt;

-- name: ListSavedChargeAttemptsOf :many
-- The attempts of the invoices given, by invoice, first first (the renewal
-- overview shows them).
SELECT * FROM saved_charge_attempts WHERE invoice_id = ANY(@invoice_ids::uuid[]) ORDER BY invoice_id, attempt;

-- name: CountSavedChargeAttempts :one
SELECT count(*)::integer FROM saved_charge_attempts WHERE invoice_id = @invoice_id;

-- name: ListInvoicesToCharge :many
-- Renewal invoices still owed, due by @now, of live orders whose customer
-- has a saved method and did not turn auto_charge off, with how many
-- attempts each had: the billing run's dunning (payment.ChargeDue) picks
-- those whose next attempt day has come.
SELECT i.id AS invoice_id, i.order_id, i.customer_id, i.due_at,
       (SELECT count(*) FROM saved_charge_attempts a WHERE a.invoice_id = i.id)::integer AS attempts
FROM invoices i
JOIN orders o ON o.id = i.order_id
WHERE i.status IN ('issued', 'overdue')
  AND i.due_at <= @now
  AND i.order_id IS NOT NULL
  AND EXISTS (SELECT 1 FROM service_periods sp WHERE sp.invoice_id = i.id)
  AND o.status = ANY(@live_statuses::text[])
  AND COALESCE((SELECT c.auto_charge FROM order_auto_charge c WHERE c.order_id = o.id), true)
  AND EXISTS (SELECT 1 FROM saved_payment_methods m WHERE m.customer_id = i.customer_id AND m.removed_at IS NULL)
ORDER BY i.due_at, i.id
LIMIT @max_rows::integer;

-- name: ListSavedMethodsExpiringBeforeRenewal :many
-- Saved methods not yet noticed whose card expires (the end of its expiry
-- month) before the next renewal of a live renewing order of their
-- customer that charges it, from a month before that renewal: the
-- customer is told to save another card (payment.ChargeDue).
SELECT m.id AS saved_method_id, o.id AS order_id, o.paid_until
FROM saved_payment_methods m
JOIN orders o ON o.customer_id = m.customer_id
WHERE m.removed_at IS NULL AND m.expiry_noticed_at IS NULL
  AND o.renews AND o.status = ANY(@live_statuses::text[]) AND o.paid_until IS NOT NULL
  AND make_date(m.exp_year, m.exp_month, 1) + interval '1 month' <= o.paid_until
  AND o.paid_until - interval '1 month' <= @now::timestamptz
  AND COALESCE((SELECT c.auto_charge FROM order_auto_charge c WHERE c.order_id = o.id), true)
ORDER BY m.id, o.id
LIMIT 100;

-- name: MarkSavedMethodExpiryNoticed :execrows
UPDATE saved_payment_methods SET expiry_noticed_at = @at WHERE id = @id AND expiry_noticed_at IS NULL;
