-- Identity: admin users, customers, admin sessions, customer API keys and
-- admin API keys.
--
-- Conventions used by every migration of paymentd:
--   * ids are uuid PRIMARY KEY DEFAULT gen_random_uuid() (built in since PG 13);
--   * timestamps are timestamptz NOT NULL DEFAULT now(), nullable only where
--     NULL means "has not happened" (paid_at, revoked_at, ...);
--   * money is NUMERIC(12,2). NUMERIC(12,2) ROUNDS a value with more than two
--     decimals (1.005 is stored as 1.01) before any CHECK sees it, so no
--     constraint can reject it: internal/money must refuse such values before
--     they reach SQL;
--   * status columns are text with a CHECK listing the whole vocabulary;
--   * money rows are never cascaded away (ON DELETE RESTRICT).

-- +goose Up
CREATE TABLE admin_users (
    id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    username      text        NOT NULL,
    -- Encoded password hash (algorithm and parameters included), never the password.
    password_hash text        NOT NULL,
    display_name  text        NOT NULL DEFAULT '',
    -- A disabled admin cannot log in; their sessions are deleted and their
    -- API keys refused (paymentd admin disable).
    disabled_at   timestamptz,
    last_login_at timestamptz,
    -- TOTP two-factor (RFC 6238): the secret sealed under [secrets] (enc:v1:...,
    -- never in clear), NULL without 2FA. It is required at login only once
    -- confirmed (totp_confirmed_at); before that the enrolment is pending.
    totp_secret       text,
    totp_confirmed_at timestamptz,
    -- The last time step whose code was accepted: a code is accepted once,
    -- so only a later step's code is accepted after it.
    totp_last_step    bigint      NOT NULL DEFAULT 0,
    -- Second-factor codes (TOTP or recovery) judged wrong in a row, counted
    -- before each code is judged and set back to 0 by a right one; from the
    -- fifth on, each sets totp_locked_until, before which no code is judged
    -- (identity.checkSecondFactor). Counted here, not in memory, so that
    -- every instance and every address share one budget per admin.
    totp_failures     integer     NOT NULL DEFAULT 0,
    totp_locked_until timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT admin_users_username_key UNIQUE (username),
    CONSTRAINT admin_users_username_check CHECK (username <> ''),
    CONSTRAINT admin_users_password_hash_check CHECK (password_hash <> ''),
    CONSTRAINT admin_users_totp_check CHECK (totp_confirmed_at IS NULL OR totp_secret IS NOT NULL),
    CONSTRAINT admin_users_totp_failures_check CHECK (totp_failures >= 0)
);

-- An admin's one-time recovery codes, made when their 2FA is confirmed and
-- shown once: SHA-256 of the code (80 random bits, so a fast hash is
-- enough), never the code.
CREATE TABLE admin_recovery_codes (
    admin_id   uuid        NOT NULL REFERENCES admin_users (id) ON DELETE CASCADE,
    code_hash  bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    -- Each code signs in once.
    used_at    timestamptz,
    PRIMARY KEY (admin_id, code_hash),
    CONSTRAINT admin_recovery_codes_code_hash_check CHECK (octet_length(code_hash) = 32)
);

CREATE TABLE customers (
    id                  uuid          PRIMARY KEY DEFAULT gen_random_uuid(),
    email               text          NOT NULL,
    password_hash       text          NOT NULL,
    name                text          NOT NULL DEFAULT '',
    -- Currency of the prepaid balance. No default on purpose: registration
    -- must choose it (the first of [billing].currencies).
    currency            text          NOT NULL,
    balance             NUMERIC(12,2) NOT NULL DEFAULT 0,
    credit_limit        NUMERIC(12,2) NOT NULL DEFAULT 0,
    can_create_api_keys boolean       NOT NULL DEFAULT false,
    disabled_at         timestamptz,
    -- The generation of the customer's access tokens: every token carries
    -- the generation it was issued in and is refused once this has moved on.
    -- A password change, a sign-out everywhere, disabling and enabling each
    -- add one, so it only grows (caches keep the greatest they saw).
    token_generation    bigint        NOT NULL DEFAULT 0,
    created_at          timestamptz   NOT NULL DEFAULT now(),
    updated_at          timestamptz   NOT NULL DEFAULT now(),
    CONSTRAINT customers_email_check CHECK (email <> ''),
    CONSTRAINT customers_password_hash_check CHECK (password_hash <> ''),
    CONSTRAINT customers_currency_check CHECK (currency ~ '^[A-Z]{3}$'),
    CONSTRAINT customers_credit_limit_check CHECK (credit_limit >= 0),
    CONSTRAINT customers_token_generation_check CHECK (token_generation >= 0),
    -- The balance may go negative only down to the credit limit.
    CONSTRAINT customers_balance_check CHECK (balance >= -credit_limit)
);

-- E-mail addresses are unique regardless of case; look them up with lower(email).
CREATE UNIQUE INDEX customers_email_lower_key ON customers (lower(email));

COMMENT ON COLUMN customers.balance IS 'Prepaid balance, NUMERIC(12,2), in customers.currency; changed only together with a balance_transactions row.';
COMMENT ON COLUMN customers.credit_limit IS 'How far below zero the balance may go, NUMERIC(12,2), >= 0.';

CREATE TABLE sessions (
    -- SHA-256 of the random session token; the token itself is never stored.
    id                  bytea       PRIMARY KEY,
    admin_id            uuid        NOT NULL REFERENCES admin_users (id) ON DELETE CASCADE,
    user_agent          text        NOT NULL DEFAULT '',
    remote_addr         text        NOT NULL DEFAULT '',
    created_at          timestamptz NOT NULL DEFAULT now(),
    -- Idle expiry is last_seen_at + [session].idle_timeout_minutes.
    last_seen_at        timestamptz NOT NULL DEFAULT now(),
    -- created_at + [session].absolute_timeout_hours, regardless of activity.
    absolute_expires_at timestamptz NOT NULL,
    CONSTRAINT sessions_id_check CHECK (octet_length(id) = 32)
);

CREATE INDEX sessions_admin_id_idx ON sessions (admin_id);
CREATE INDEX sessions_absolute_expires_at_idx ON sessions (absolute_expires_at);

CREATE TABLE api_keys (
    -- The <id> part of a key "pk_<id>_<secret>".
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    customer_id  uuid        NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    name         text        NOT NULL DEFAULT '',
    -- SHA-256 of the secret part; the key is shown once and never stored.
    secret_hash  bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz,
    CONSTRAINT api_keys_secret_hash_check CHECK (octet_length(secret_hash) = 32)
);

CREATE INDEX api_keys_customer_id_idx ON api_keys (customer_id, created_at DESC, id DESC);

-- Admins' API keys "ak_<id>_<secret>", for automation (buf curl, scripts):
-- each acts as the admin who created it, within its scope.
CREATE TABLE admin_api_keys (
    -- The <id> part of a key "ak_<id>_<secret>".
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- The admin the key acts as; a disabled admin's keys are refused.
    admin_id     uuid        NOT NULL REFERENCES admin_users (id) ON DELETE CASCADE,
    name         text        NOT NULL DEFAULT '',
    -- read: lists, reads, figures; operate: read and the day-to-day money
    -- operations (refunds, bank-transfer confirmations, event retries,
    -- resolving refunds); admin: everything but managing admins and keys.
    scope        text        NOT NULL,
    -- SHA-256 of the secret part; the key is shown once and never stored.
    secret_hash  bytea       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz,
    revoked_by   uuid        REFERENCES admin_users (id) ON DELETE SET NULL,
    -- The key is refused from this instant on; NULL never expires (allowed
    -- only while [admin].api_key_max_lifetime_days is 0).
    expires_at   timestamptz,
    CONSTRAINT admin_api_keys_scope_check CHECK (scope IN ('read', 'operate', 'admin')),
    CONSTRAINT admin_api_keys_secret_hash_check CHECK (octet_length(secret_hash) = 32),
    CONSTRAINT admin_api_keys_expires_at_check CHECK (expires_at IS NULL OR expires_at > created_at)
);

CREATE INDEX admin_api_keys_created_at_idx ON admin_api_keys (created_at DESC, id DESC);
-- An admin's active keys, revoked together when their password is reset or
-- changed or they are disabled.
CREATE INDEX admin_api_keys_admin_id_idx ON admin_api_keys (admin_id) WHERE revoked_at IS NULL;

-- +goose Down
DROP TABLE admin_api_keys;
DROP TABLE api_keys;
DROP TABLE sessions;
DROP TABLE customers;
DROP TABLE admin_recovery_codes;
DROP TABLE admin_users;
