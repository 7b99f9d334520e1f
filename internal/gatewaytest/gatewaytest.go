// Package gatewaytest sets up the gateway domain for tests: a database of
// the test's own (a clone of the migrated template), a plugin directory in
// t.TempDir(), the registry over both with a keyring of one key ("k1"), the
// service over them and principals to call as; and writes the test gateway
// plugins the registry scans there. The tests of the domain
// (internal/gateway) and of its transport (internal/gateway/gatewayrpc)
// both start from it. It is test support, imported from _test files only;
// internal/architecture holds that no production package imports it.
package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/gateway"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// Bundle is a database of one's own, a plugin directory, the registry over
// both and the service, with principals to call it as.
type Bundle struct {
	Pool *pgxpool.Pool
	Dir  string
	Reg  *gateway.Registry
	Svc  *gateway.Service
	// Logs holds what the registry and the service logged.
	Logs *testkit.Logs
	// Keys seals the interfaces' secrets (key "k1").
	Keys       *secrets.Keyring
	AdminID    uuid.UUID
	AsAdmin    context.Context
	AsCustomer context.Context
	Anonymous  context.Context
}

// Setup is a Bundle over a database and a plugin directory of the test's
// own; the plugins' HTTP goes through the real outbound client.
func Setup(t testing.TB) *Bundle {
	t.Helper()
	b := &Bundle{Pool: testdb.Pool(t), Dir: t.TempDir(), Logs: &testkit.Logs{}, AdminID: uuid.New()}
	log := slog.New(slog.NewTextHandler(b.Logs, nil))
	b.Keys = Keyring(t, "k1", 1)
	b.Reg = gateway.NewRegistry(gateway.RegistryOptions{
		DB: b.Pool, Dir: b.Dir, ScanInterval: time.Hour,
		Runtime: plugin.NewRuntime(plugin.Options{Logger: log, HTTP: plugintest.Doer(plugintest.Client(t))}),
		Logger:  log,
		Secrets: b.Keys,
	})
	b.Svc = gateway.NewService(b.Pool, b.Reg, nil, log)
	b.AsAdmin = auth.WithPrincipal(context.Background(), auth.Principal{Role: auth.RoleAdmin, ID: b.AdminID, Kind: auth.KindSession})
	b.AsCustomer = auth.WithPrincipal(context.Background(), auth.Principal{Role: auth.RoleCustomer, ID: uuid.New(), Kind: auth.KindJWT})
	b.Anonymous = context.Background()
	return b
}

// Keyring is a keyring whose current key id is current, a key of 32 bytes
// of fill, holding older keys of the other ids given (fill+1, …).
func Keyring(t testing.TB, current string, fill byte, older ...string) *secrets.Keyring {
	t.Helper()
	keys := map[string][]byte{current: bytes.Repeat([]byte{fill}, secrets.KeySize)}
	for i, id := range older {
		keys[id] = bytes.Repeat([]byte{fill + byte(i) + 1}, secrets.KeySize)
	}
	k, err := secrets.New(current, keys)
	require.NoError(t, err)
	return k
}

// Write puts a plugin file at rel (e.g. "gateway/demo.lua").
func (b *Bundle) Write(t testing.TB, rel, src string) {
	t.Helper()
	p := filepath.Join(b.Dir, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
}

// Scan has the registry read the plugin directory now.
func (b *Bundle) Scan(t testing.TB) gateway.Report {
	t.Helper()
	rep, err := b.Reg.Scan(context.Background())
	require.NoError(t, err)
	return rep
}

// StoredConfig is interface id's config as the database holds it.
func (b *Bundle) StoredConfig(t testing.TB, id uuid.UUID) map[string]any {
	t.Helper()
	gi, err := store.Q(b.Pool).GetGatewayInterface(context.Background(), id)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(gi.Config, &m))
	return m
}

// PluginConfig is the config the plugin gets for interface id from reg.
func (b *Bundle) PluginConfig(t testing.TB, reg *gateway.Registry, id uuid.UUID) map[string]any {
	t.Helper()
	gw, err := reg.Get(context.Background(), id)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(gw.ConfigJSON), &m))
	return m
}

// Script is a test gateway plugin of the seven contract functions (CNY,
// neither query nor refund supported). Each body is Lua, one statement a
// line, given without indentation.
type Script struct {
	Version string
	// Label is info()'s display name.
	Label string
	// Schema is the JSON that config_schema() returns.
	Schema string
	// AdminPage is admin_page()'s body; without one the plugin has no
	// admin page.
	AdminPage string
	// CreatePayment is create_payment()'s body; by default an answer with
	// every field empty.
	CreatePayment string
	// TestConfig is test_config()'s body.
	TestConfig string
}

// Source is the script's text.
func (s Script) Source() string {
	fn := func(name, body string) string {
		return fmt.Sprintf("function %s(config_json, input_json)\n  %s\nend\n",
			name, strings.ReplaceAll(body, "\n", "\n  "))
	}
	createPayment := s.CreatePayment
	if createPayment == "" {
		createPayment = `return json_encode({ payment_url = "", qr_code = "", instructions = "", gateway_payment_id = "" })`
	}
	parts := []string{
		fmt.Sprintf("-- test gateway %s\nfunction version()\n  return %q\nend\n", s.Label, s.Version),
		fn("info", fmt.Sprintf(`return json_encode({ display_name = %q, supports_query = false, supports_refund = false, currencies = { "CNY" } })`, s.Label)),
		// The schema verbatim: fn would indent its lines.
		"function config_schema(config_json, input_json)\n  return [==[" + s.Schema + "]==]\nend\n",
	}
	if s.AdminPage != "" {
		parts = append(parts, fn("admin_page", s.AdminPage))
	}
	parts = append(parts,
		fn("create_payment", createPayment),
		fn("query_payment", `return json_encode({ status = "pending" })`),
		fn("parse_callback", `return json_encode({ valid = false, reason = "test" })`),
		fn("refund", `return json_encode({ status = "failed", message = "test" })`),
		fn("test_config", s.TestConfig),
	)
	return strings.Join(parts, "\n")
}
