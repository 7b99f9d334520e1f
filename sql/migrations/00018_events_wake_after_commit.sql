-- +goose Up
-- The worker's wake-up sent after the commit, not inside it (docs/decisions.md,
-- "wake-up"). A NOTIFY makes its transaction take one lock for the whole
-- database at commit and hold it through the commit's WAL flush, so every
-- transaction that inserted an event committed one after the other: at 32
-- callbacks in flight, 10 of 16 busy backends waited on that lock
-- (pg_stat_activity, wait event Lock:object). paymentd's own inserts now say,
-- in the insert's statement, that paymentd wakes the worker once the
-- transaction has committed (paymentd.wake_after_commit = on, local to the
-- transaction); the trigger notifies for every other insert, as before (an
-- operator's, a test's, an older paymentd's during a rolling upgrade). The
-- function is replaced only: nothing is locked or rewritten.

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION events_notify_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('paymentd.wake_after_commit', true) IS DISTINCT FROM 'on' THEN
        PERFORM pg_notify('paymentd_events', NEW.order_id::text);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION events_notify_insert() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('paymentd_events', NEW.order_id::text);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
