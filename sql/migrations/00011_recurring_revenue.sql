-- +goose Up
-- The recurring revenue of the dashboard (PaymentAdminService.GetRecurringRevenue,
-- sql/queries/recurring_revenue.sql) reads the services that moved in a
-- range, not every service: first periods by their start (an order went
-- active), ended periods by their end and by their order (a service
-- ended: order.Transition closes the current period with outcome ended or
-- refunded and the time in updated_at). Partial: they hold one row per
-- order at most, whatever the number of its periods. No index on orders:
-- one whose predicate names orders.status would make every status move of
-- an order (paid, provisioning, active) a non-HOT update; a customer's
-- earlier orders are found by orders_customer_id_idx.
CREATE INDEX service_periods_first_starts_at_idx ON service_periods (starts_at) INCLUDE (order_id) WHERE seq = 1;
CREATE INDEX service_periods_ended_at_idx ON service_periods (updated_at) INCLUDE (order_id)
    WHERE outcome IN ('ended', 'refunded');
CREATE INDEX service_periods_ended_order_idx ON service_periods (order_id) INCLUDE (updated_at)
    WHERE outcome IN ('ended', 'refunded');

-- +goose Down
DROP INDEX service_periods_ended_order_idx;
DROP INDEX service_periods_ended_at_idx;
DROP INDEX service_periods_first_starts_at_idx;
