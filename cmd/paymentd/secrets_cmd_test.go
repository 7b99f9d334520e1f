package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/testkit"
)

// b64Key is a [secrets] key of 32 bytes of fill.
func b64Key(fill byte) string {
	return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{fill}, secrets.KeySize))
}

// withInterfaces adds a gateway plugin whose schema has a secret "key" and
// an interface of it per value, stored as given (clear, as a database from
// before encryption holds it), and returns their ids.
func withInterfaces(t *testing.T, conn *pgx.Conn, keys ...string) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	_, err := conn.Exec(ctx, `INSERT INTO plugins (name, type, source, sha256, config_schema) VALUES ('demo', 'gateway', '-- demo', repeat('0', 64),
		'{"type": "object", "properties": {"pid": {"type": "string"}, "key": {"type": "string", "x-secret": true}}}')
		ON CONFLICT (name) DO NOTHING`)
	require.NoError(t, err)
	ids := make([]uuid.UUID, len(keys))
	for i, k := range keys {
		cfg, err := json.Marshal(map[string]string{"pid": "100" + strconv.Itoa(i), "key": k})
		require.NoError(t, err)
		require.NoError(t, conn.QueryRow(ctx, `INSERT INTO gateway_interfaces (plugin_name, display_name, config, config_schema)
			SELECT name, 'demo ' || $2, $1, config_schema FROM plugins WHERE name = 'demo' RETURNING id`, cfg, strconv.Itoa(i)).Scan(&ids[i]))
	}
	return ids
}

func storedKey(t *testing.T, conn *pgx.Conn, id uuid.UUID) string {
	t.Helper()
	var k string
	require.NoError(t, conn.QueryRow(context.Background(), `SELECT config->>'key' FROM gateway_interfaces WHERE id = $1`, id).Scan(&k))
	return k
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestServeRefusesToStartWhenTheDatabaseHoldsSecretsAndNoKeyIsConfigured(t *testing.T) {
	conn := migratedEnv(t)
	t.Setenv("PAYMENTD_BOOTSTRAP__ADMIN_PASSWORD", "bootstrap-password")
	t.Setenv("PAYMENTD_SERVER__PORT", strconv.Itoa(testkit.FreePort(t)))
	t.Setenv("PAYMENTD_METRICS__PORT", "0")
	t.Setenv("PAYMENTD_PLUGINS__DIR", repoPlugins(t))
	ids := withInterfaces(t, conn, "clear-merchant-key")

	code, _, stderr := runCLI(t, "serve")
	require.Equal(t, 1, code, stderr)
	require.Equal(t, `paymentd: secrets without a key: the database holds 1 secret(s) (gateway interfaces 1, products 0, orders 0; 0 encrypted, 1 in clear) and [secrets].keys is empty: configure [secrets].current and [secrets].keys (docs/operations.md, "Secrets at rest")`,
		lastLine(stderr))
	require.NotContains(t, stderr, "clear-merchant-key")
	require.Equal(t, "clear-merchant-key", storedKey(t, conn, ids[0]), "nothing changed")

	// Encrypted by rotate (as the first start with a key would), then
	// the key is gone from the configuration: still refused.
	t.Setenv("PAYMENTD_SECRETS__CURRENT", "k1")
	t.Setenv("PAYMENTD_SECRETS__KEYS__K1", b64Key(1))
	code, _, stderr = runCLI(t, "secrets", "rotate")
	require.Equal(t, 0, code, stderr)
	// t.Setenv restores them at the end.
	require.NoError(t, os.Unsetenv("PAYMENTD_SECRETS__CURRENT"))
	require.NoError(t, os.Unsetenv("PAYMENTD_SECRETS__KEYS__K1"))
	code, _, stderr = runCLI(t, "serve")
	require.Equal(t, 1, code, stderr)
	require.Contains(t, lastLine(stderr), "the database holds 1 secret(s) (gateway interfaces 1, products 0, orders 0; 1 encrypted, 0 in clear) and [secrets].keys is empty")
}

func TestSecretsRotateEncryptsEverySecretUnderTheCurrentKey(t *testing.T) {
	conn := migratedEnv(t)
	ctx := context.Background()
	ids := withInterfaces(t, conn, "merchant-key-a", "merchant-key-b", "")

	code, _, stderr := runCLI(t, "secrets", "rotate")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "secrets rotate needs [secrets].current and [secrets].keys")

	// First key: the clear values are encrypted under it.
	t.Setenv("PAYMENTD_SECRETS__CURRENT", "k1")
	t.Setenv("PAYMENTD_SECRETS__KEYS__K1", b64Key(1))
	code, stdout, stderr := runCLI(t, "secrets", "rotate")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `encrypted 2 secret(s) under key "k1": 2 in clear before, 0 under another key`)
	require.Contains(t, stdout, "2 gateway interfaces, 0 products, 0 orders hold 2 secret(s):\n  key \"k1\": 2\n")
	for _, id := range ids[:2] {
		require.True(t, strings.HasPrefix(storedKey(t, conn, id), "enc:v1:k1:"))
	}
	require.Equal(t, "", storedKey(t, conn, ids[2]), "an empty secret is not a secret")

	// A second key becomes current: everything moves to it.
	t.Setenv("PAYMENTD_SECRETS__CURRENT", "k2")
	t.Setenv("PAYMENTD_SECRETS__KEYS__K2", b64Key(2))
	code, stdout, stderr = runCLI(t, "secrets", "rotate")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `encrypted 2 secret(s) under key "k2": 0 in clear before, 2 under another key`)
	require.Contains(t, stdout, "  key \"k2\": 2\n")
	require.Contains(t, stdout, `no secret needs a key other than "k2": the other 1 key(s) of [secrets].keys may be removed`)
	only2, err := secrets.New("k2", map[string][]byte{"k2": bytes.Repeat([]byte{2}, secrets.KeySize)})
	require.NoError(t, err)
	for i, id := range ids[:2] {
		sealed := storedKey(t, conn, id)
		require.True(t, strings.HasPrefix(sealed, "enc:v1:k2:"))
		plain, err := only2.Open(sealed, []byte(`paymentd gateway_interface `+id.String()+` config ["key"]`))
		require.NoError(t, err, "opens with the new key alone")
		require.Equal(t, []string{"merchant-key-a", "merchant-key-b"}[i], plain)
	}
	var rows int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'gateway_interface.rotate_secrets'
		AND actor_kind = 'system' AND actor_id LIKE 'cli:%' AND after::text NOT LIKE '%merchant-key%'`).Scan(&rows))
	require.Equal(t, 4, rows)

	// One value sealed under a key nobody configured: named, exit 1, the
	// others untouched.
	foreign, err := secrets.New("k9", map[string][]byte{"k9": bytes.Repeat([]byte{9}, secrets.KeySize)})
	require.NoError(t, err)
	alien, err := foreign.Seal("x", nil)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `UPDATE gateway_interfaces SET config = jsonb_set(config, '{key}', to_jsonb($2::text)) WHERE id = $1`, ids[1], alien)
	require.NoError(t, err)
	code, stdout, stderr = runCLI(t, "secrets", "rotate")
	require.Equal(t, 1, code, stdout)
	require.Contains(t, stdout, "does not decrypt: gateway interface "+ids[1].String())
	require.Contains(t, stdout, `key "k9": sealed under a key that [secrets].keys does not hold`)
	require.Contains(t, stderr, "1 secret(s) do not decrypt with [secrets].keys")

	for _, args := range [][]string{{"secrets"}, {"secrets", "show"}, {"secrets", "rotate", "extra"}} {
		code, _, stderr := runCLI(t, args...)
		require.Equal(t, exitUsage, code, "%v: %s", args, stderr)
	}
}
