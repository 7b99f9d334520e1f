package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/identity"
	"github.com/rustbill/paymentd/internal/testdb"
)

// These tests set environment variables and replace stdin, so they do not
// run in parallel.

const cliSecret = "cli-test-secret-cli-test-secret-0123"

func TestEveryCommandAnswersHelpWithExitZero(t *testing.T) {
	for _, args := range [][]string{
		{"--help"}, {"help"}, {"-h"}, {"serve", "--help"}, {"migrate", "--help"}, {"config", "--help"},
		{"config", "check", "--help"}, {"admin", "--help"}, {"admin", "create-admin", "--help"},
		{"admin", "reset-password", "-h"}, {"admin", "disable", "--help"}, {"admin", "enable", "--help"}, {"admin", "reset-2fa", "--help"}, {"admin", "unlock-2fa", "--help"}, {"verify", "--help"}, {"plugin", "--help"}, {"plugin", "check", "--help"},
		{"secrets", "--help"}, {"secrets", "rotate", "--help"}, {"dev", "--help"}, {"dev", "fake-epay", "--help"}, {"dev", "fake-alipay", "--help"}, {"dev", "fake-wechatpay", "--help"}, {"dev", "fake-provider", "--help"}, {"version", "--help"},
	} {
		code, stdout, stderr := runCLI(t, args...)
		require.Equal(t, 0, code, "%v: %s", args, stderr)
		require.Contains(t, stdout+stderr, "Usage", args)
		require.NotContains(t, stderr, "help requested", args)
	}
}

func TestBadCommandLinesExitTwo(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, args := range [][]string{
		{"config"}, {"config", "show"}, {"config", "check", "--nope"}, {"config", "check", "extra"},
		{"admin"}, {"admin", "delete-admin"}, {"admin", "create-admin"}, {"admin", "create-admin", "--username"},
		{"admin", "disable"}, {"admin", "enable", "--username", "ops", "--keep-keys"}, {"admin", "create-admin", "--username", "ops", "--keep-keys"},
		{"verify", "extra"}, {"verify", "--nope"}, {"version", "extra"}, {"serve", "extra"},
	} {
		code, _, stderr := runCLI(t, args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, stderr)
	}
}

func TestConfigCheckPrintsTheEffectiveConfigurationWithSecretsMasked(t *testing.T) {
	t.Chdir(t.TempDir())
	require.NoError(t, os.WriteFile("paymentd.toml", []byte(`
[server]
port = 6000
[db]
url = "postgres://paymentd:db-password-123@db.internal:5432/paymentd"
replica_url = "postgres://paymentd:replica-password-123@db-standby.internal:5432/paymentd"
[bootstrap]
admin_password = "bootstrap-password-123"
[[notify.webhooks]]
name = "ops"
url = "https://hooks.example.com/p"
secret = "webhook-secret-1234567"
headers = { "Authorization" = "Bearer header-token-123" }
`), 0o600))
	t.Setenv("PAYMENTD_JWT__SECRET", cliSecret)
	t.Setenv("PAYMENTD_METRICS__PORT", "9500")
	t.Setenv("PAYMENTD_PLUGINS__DIR", repoPlugins(t))

	code, stdout, stderr := runCLI(t, "config", "check")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "configuration is valid")
	for _, secret := range []string{cliSecret, "db-password-123", "replica-password-123", "bootstrap-password-123", "webhook-secret-1234567", "header-token-123"} {
		require.NotContains(t, stdout, secret)
	}
	require.Contains(t, stdout, "# paymentd configuration from defaults + paymentd.toml + PAYMENTD_JWT__SECRET, PAYMENTD_METRICS__PORT")
	require.Contains(t, stdout, "\n[server]\nhost = \"127.0.0.1\"\nport = 6000\n")
	require.Contains(t, stdout, "\n[metrics]\nenabled = true\nhost = \"127.0.0.1\"\nport = 9500\n")
	require.Contains(t, stdout, `url = "postgres://paymentd:xxxxx@db.internal:5432/paymentd"`)
	require.Contains(t, stdout, `replica_url = "postgres://paymentd:xxxxx@db-standby.internal:5432/paymentd"`)

	// The output is a configuration file: it loads back (masked values and all).
	p := filepath.Join(t.TempDir(), "effective.toml")
	require.NoError(t, os.WriteFile(p, []byte(stdout), 0o600))
	back, err := config.Load(p, nil)
	require.NoError(t, err)
	require.Equal(t, 6000, back.Server.Port)
	require.Equal(t, 9500, back.Metrics.Port)
	require.Equal(t, "********", back.JWT.Secret)
}

func TestConfigCheckWarnsOfAnHTTPSPublicURLWithInsecureCookies(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("PAYMENTD_JWT__SECRET", cliSecret)
	t.Setenv("PAYMENTD_SERVER__PUBLIC_URL", "https://pay.example.com")
	t.Setenv("PAYMENTD_SESSION__COOKIE_SECURE", "false")
	t.Setenv("PAYMENTD_PLUGINS__DIR", repoPlugins(t))
	t.Setenv("PAYMENTD_BOOTSTRAP__ADMIN_PASSWORD", "bootstrap-password")
	code, _, stderr := runCLI(t, "config", "check")
	require.Equal(t, 0, code, "a warning is no error: %s", stderr)
	require.Contains(t, stderr, "warning: [server].public_url is https://pay.example.com but [session].cookie_secure = false")
	require.Contains(t, stderr, "configuration is valid")

	t.Setenv("PAYMENTD_SESSION__COOKIE_SECURE", "true")
	code, _, stderr = runCLI(t, "config", "check")
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stderr, "warning:")
}

func TestConfigCheckExitsOneNamingEveryBadKey(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("PAYMENTD_JWT__SECRET", "short")
	t.Setenv("PAYMENTD_TRACING__PROTOCOL", "zipkin")
	code, stdout, stderr := runCLI(t, "config", "check")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "[jwt].secret must be at least 32 characters")
	require.Contains(t, stderr, "[tracing].protocol must be grpc or http")
	require.NotContains(t, stdout+stderr, "short\"", "the secret is masked even when it is wrong")
	require.Contains(t, stdout, "[tracing]")

	code, _, stderr = runCLI(t, "config", "check", "--config", filepath.Join(t.TempDir(), "missing.toml"))
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "missing.toml")
}

// migratedEnv points the commands at a fresh migrated database.
func migratedEnv(t *testing.T) *pgx.Conn {
	t.Helper()
	url := testdb.URL(t)
	t.Chdir(t.TempDir())
	t.Setenv("PAYMENTD_DB__URL", url)
	t.Setenv("PAYMENTD_JWT__SECRET", cliSecret)
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func withStdin(t *testing.T, s string) {
	t.Helper()
	old := stdin
	stdin = strings.NewReader(s)
	t.Cleanup(func() { stdin = old })
}

func TestAdminCreateAdminAndResetPassword(t *testing.T) {
	conn := migratedEnv(t)
	ctx := context.Background()
	hashOf := func(username string) string {
		var h string
		require.NoError(t, conn.QueryRow(ctx, `SELECT password_hash FROM admin_users WHERE username = $1`, username).Scan(&h))
		return h
	}

	const first = "first password for ops"
	withStdin(t, first+"\n")
	code, stdout, stderr := runCLI(t, "admin", "create-admin", "--username", "ops")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `admin "ops" created`)
	require.NoError(t, identity.VerifyPassword(hashOf("ops"), first), "stored as an argon2id hash of what stdin said")
	require.NotContains(t, stdout+stderr, first)
	var actorKind, actorID, after string
	require.NoError(t, conn.QueryRow(ctx, `SELECT actor_kind, actor_id, after::text FROM audit_log WHERE action = 'admin.create'`).Scan(&actorKind, &actorID, &after))
	require.Equal(t, "system", actorKind)
	require.True(t, strings.HasPrefix(actorID, "cli:"), actorID)
	require.Contains(t, after, `"username": "ops"`)
	require.NotContains(t, after, "argon2")

	withStdin(t, "another password\n")
	code, _, stderr = runCLI(t, "admin", "create-admin", "--username", "ops")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `an admin named "ops" already exists`)

	withStdin(t, "short\n")
	code, _, stderr = runCLI(t, "admin", "create-admin", "--username", "dev")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "8 to 128 characters")

	// A session of ops, then a reset from a file: the new password works,
	// the old one does not, the session is gone.
	_, err := conn.Exec(ctx, `INSERT INTO sessions (id, admin_id, absolute_expires_at)
		SELECT decode(repeat('ab', 32), 'hex'), id, now() + interval '1 day' FROM admin_users WHERE username = 'ops'`)
	require.NoError(t, err)
	const second = "second password for ops"
	pwFile := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(pwFile, []byte(second+"\r\nignored second line\n"), 0o600))
	code, stdout, stderr = runCLI(t, "admin", "reset-password", "--username", "ops", "--password-file", pwFile)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `password of admin "ops" reset; 1 session(s) ended`)
	require.Contains(t, stdout, `revoked 0 API key(s) of admin "ops" (paymentd admin reset-password --keep-keys keeps them)`)
	require.NoError(t, identity.VerifyPassword(hashOf("ops"), second))
	require.ErrorIs(t, identity.VerifyPassword(hashOf("ops"), first), identity.ErrPasswordMismatch)
	var sessions int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM sessions`).Scan(&sessions))
	require.Zero(t, sessions)
	var audits int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'admin.reset_password' AND actor_kind = 'system'`).Scan(&audits))
	require.Equal(t, 1, audits)

	code, _, stderr = runCLI(t, "admin", "reset-password", "--username", "nobody", "--password-file", pwFile)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `no admin named "nobody"`)
	code, _, stderr = runCLI(t, "admin", "reset-password", "--username", "ops", "--password-file", filepath.Join(t.TempDir(), "none"))
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "--password-file")
}

// reset-password revokes the admin's API keys and says so, unless
// --keep-keys; disable cuts the admin off (not the last one), enable lets
// them log in again; each says what became of sessions and keys.
func TestAdminResetPasswordDisableAndEnableSayWhatBecameOfTheKeys(t *testing.T) {
	conn := migratedEnv(t)
	ctx := context.Background()
	withStdin(t, "first password for ops\n")
	code, _, stderr := runCLI(t, "admin", "create-admin", "--username", "ops")
	require.Equal(t, 0, code, stderr)
	addKey := func() {
		t.Helper()
		_, err := conn.Exec(ctx, `INSERT INTO admin_api_keys (admin_id, name, scope, secret_hash)
			SELECT id, 'k', 'read', sha256(gen_random_uuid()::text::bytea) FROM admin_users WHERE username = 'ops'`)
		require.NoError(t, err)
	}
	active := func() int {
		t.Helper()
		var n int
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM admin_api_keys WHERE revoked_at IS NULL`).Scan(&n))
		return n
	}
	addKey()
	addKey()
	pwFile := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(pwFile, []byte("second password for ops\n"), 0o600))
	code, stdout, stderr := runCLI(t, "admin", "reset-password", "--username", "ops", "--password-file", pwFile)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `revoked 2 API key(s) of admin "ops" (paymentd admin reset-password --keep-keys keeps them)`)
	require.Zero(t, active())

	addKey()
	code, stdout, stderr = runCLI(t, "admin", "reset-password", "--username", "ops", "--password-file", pwFile, "--keep-keys")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `API keys of admin "ops" kept (--keep-keys)`)
	require.Equal(t, 1, active())

	code, _, stderr = runCLI(t, "admin", "disable", "--username", "ops")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `admin "ops" is the last enabled admin`)
	withStdin(t, "password of dev\n")
	code, _, stderr = runCLI(t, "admin", "create-admin", "--username", "dev")
	require.Equal(t, 0, code, stderr)
	code, stdout, stderr = runCLI(t, "admin", "disable", "--username", "ops", "--reason", "left")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `admin "ops" disabled: login refused; 0 session(s) ended`)
	require.Contains(t, stdout, `revoked 1 API key(s) of admin "ops" (paymentd admin disable --keep-keys keeps them)`)
	code, stdout, stderr = runCLI(t, "admin", "reset-password", "--username", "ops", "--password-file", pwFile)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `note: admin "ops" is disabled and still cannot log in`)
	code, stdout, stderr = runCLI(t, "admin", "enable", "--username", "ops")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `admin "ops" enabled`)
	code, stdout, _ = runCLI(t, "admin", "enable", "--username", "ops")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, `admin "ops" was not disabled; nothing changed`)
	var audits int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE actor_kind = 'system'
		AND action IN ('admin.disable', 'admin.enable', 'admin_api_key.revoked')`).Scan(&audits))
	require.Equal(t, 5, audits, "disable, enable and three revoked keys")
}

func TestVerifyExitsZeroOnACleanLedgerAndOneOnABrokenOne(t *testing.T) {
	conn := migratedEnv(t)
	code, stdout, stderr := runCLI(t, "verify")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "ledger clean")

	// A balance that no ledger row explains.
	_, err := conn.Exec(context.Background(), `INSERT INTO customers (email, password_hash, currency, balance)
		VALUES ('eve@example.com', 'x', 'CNY', 5.00)`)
	require.NoError(t, err)
	code, stdout, stderr = runCLI(t, "verify")
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stderr, "the ledger check found")
	require.Contains(t, stdout, "violation")
}

func TestOperatorCommandsRefuseAnUnmigratedDatabase(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("PAYMENTD_DB__URL", testdb.EmptyURL(t))
	t.Setenv("PAYMENTD_JWT__SECRET", cliSecret)
	code, _, stderr := runCLI(t, "verify")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "run paymentd migrate up")
	withStdin(t, "a good password\n")
	code, _, stderr = runCLI(t, "admin", "create-admin", "--username", "ops")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "run paymentd migrate up")
}

// reset-2fa removes an admin's two-factor sign-in and recovery codes, with
// an audit row naming the operator; an admin without it is left alone.
func TestAdminReset2FARemovesTheSecondFactor(t *testing.T) {
	conn := migratedEnv(t)
	ctx := context.Background()
	withStdin(t, "password of ops 2fa\n")
	code, _, stderr := runCLI(t, "admin", "create-admin", "--username", "ops")
	require.Equal(t, 0, code, stderr)
	_, err := conn.Exec(ctx, `UPDATE admin_users SET totp_secret = 'enc:v1:k:x', totp_confirmed_at = now() WHERE username = 'ops'`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO admin_recovery_codes (admin_id, code_hash) SELECT id, sha256('c') FROM admin_users WHERE username = 'ops'`)
	require.NoError(t, err)

	code, stdout, stderr := runCLI(t, "admin", "reset-2fa", "--username", "ops")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `two-factor sign-in of admin "ops" removed`)
	var left int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM admin_users WHERE totp_secret IS NOT NULL`).Scan(&left))
	require.Zero(t, left)
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM admin_recovery_codes`).Scan(&left))
	require.Zero(t, left)
	var actorKind, actorID string
	require.NoError(t, conn.QueryRow(ctx, `SELECT actor_kind, actor_id FROM audit_log WHERE action = 'admin.totp_reset'`).Scan(&actorKind, &actorID))
	require.Equal(t, "system", actorKind)
	require.True(t, strings.HasPrefix(actorID, "cli:"), actorID)

	code, stdout, _ = runCLI(t, "admin", "reset-2fa", "--username", "ops")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "had no two-factor sign-in")
	code, _, stderr = runCLI(t, "admin", "reset-2fa", "--username", "nobody")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `no admin named "nobody"`)
}

// unlock-2fa lifts the lock of too many wrong second-factor codes and keeps
// the factor, with an audit row naming the operator; reset-2fa, which
// removes the factor, lifts it too.
func TestAdminUnlock2FALiftsTheLock(t *testing.T) {
	conn := migratedEnv(t)
	ctx := context.Background()
	withStdin(t, "password of ops 2fa\n")
	code, _, stderr := runCLI(t, "admin", "create-admin", "--username", "ops")
	require.Equal(t, 0, code, stderr)
	lock := func() {
		t.Helper()
		_, err := conn.Exec(ctx, `UPDATE admin_users SET totp_secret = 'enc:v1:k:x', totp_confirmed_at = now(), totp_failures = 7, totp_locked_until = now() + interval '4 hours' WHERE username = 'ops'`)
		require.NoError(t, err)
	}
	lock()
	code, stdout, stderr := runCLI(t, "admin", "unlock-2fa", "--username", "ops")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `two-factor codes of admin "ops" unlocked`)
	var failures int
	var locked, confirmed bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT totp_failures, totp_locked_until IS NOT NULL, totp_confirmed_at IS NOT NULL FROM admin_users WHERE username = 'ops'`).Scan(&failures, &locked, &confirmed))
	require.Zero(t, failures)
	require.False(t, locked)
	require.True(t, confirmed, "the factor stays")
	var actorID string
	require.NoError(t, conn.QueryRow(ctx, `SELECT actor_id FROM audit_log WHERE action = 'admin.second_factor_unlocked'`).Scan(&actorID))
	require.True(t, strings.HasPrefix(actorID, "cli:"), actorID)
	code, stdout, _ = runCLI(t, "admin", "unlock-2fa", "--username", "ops")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "nothing changed")

	lock()
	code, _, stderr = runCLI(t, "admin", "reset-2fa", "--username", "ops")
	require.Equal(t, 0, code, stderr)
	require.NoError(t, conn.QueryRow(ctx, `SELECT totp_failures, totp_locked_until IS NOT NULL FROM admin_users WHERE username = 'ops'`).Scan(&failures, &locked))
	require.Zero(t, failures)
	require.False(t, locked)
}
