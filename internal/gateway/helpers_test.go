package gateway_test

import (
	"bytes"
	"context"
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

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/gateway"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// bundle is a database of one's own, a plugin directory in t.TempDir(), the
// registry over both and principals to call the service as.
type bundle struct {
	pool       *pgxpool.Pool
	dir        string
	reg        *gateway.Registry
	svc        *gateway.Service
	logs       *testkit.Logs
	asAdmin    context.Context
	asCustomer context.Context
	anonymous  context.Context
	adminID    uuid.UUID
	// keys seals the interfaces' secrets (key "k1").
	keys *secrets.Keyring
}

// testKeyring is a keyring whose current key id is current, a key of 32
// bytes of fill, holding older keys of the other ids given (fill+1, …).
func testKeyring(t *testing.T, current string, fill byte, older ...string) *secrets.Keyring {
	t.Helper()
	keys := map[string][]byte{current: bytes.Repeat([]byte{fill}, secrets.KeySize)}
	for i, id := range older {
		keys[id] = bytes.Repeat([]byte{fill + byte(i) + 1}, secrets.KeySize)
	}
	k, err := secrets.New(current, keys)
	require.NoError(t, err)
	return k
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{pool: testdb.Pool(t), dir: t.TempDir(), logs: &testkit.Logs{}, adminID: uuid.New()}
	log := slog.New(slog.NewTextHandler(b.logs, nil))
	b.keys = testKeyring(t, "k1", 1)
	b.reg = gateway.NewRegistry(gateway.RegistryOptions{
		DB: b.pool, Dir: b.dir, ScanInterval: time.Hour,
		Runtime: plugin.NewRuntime(plugin.Options{Logger: log, HTTP: plugintest.Doer(plugintest.Client(t))}),
		Logger:  log,
		Secrets: b.keys,
	})
	b.svc = gateway.NewService(b.pool, b.reg, nil, log)
	b.asAdmin = auth.WithPrincipal(context.Background(), auth.Principal{Role: auth.RoleAdmin, ID: b.adminID, Kind: auth.KindSession})
	b.asCustomer = auth.WithPrincipal(context.Background(), auth.Principal{Role: auth.RoleCustomer, ID: uuid.New(), Kind: auth.KindJWT})
	b.anonymous = context.Background()
	return b
}

// write puts a plugin file at rel (e.g. "gateway/demo.lua").
func (b *bundle) write(t *testing.T, rel, src string) {
	t.Helper()
	p := filepath.Join(b.dir, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
}

func (b *bundle) remove(t *testing.T, rel string) {
	t.Helper()
	require.NoError(t, os.Remove(filepath.Join(b.dir, filepath.FromSlash(rel))))
}

func (b *bundle) scan(t *testing.T) gateway.Report {
	t.Helper()
	rep, err := b.reg.Scan(context.Background())
	require.NoError(t, err)
	return rep
}

func (b *bundle) plugin(t *testing.T, name string) store.Plugin {
	t.Helper()
	p, err := store.Q(b.pool).GetPlugin(context.Background(), name)
	require.NoError(t, err)
	return p
}

// create makes an interface of plugin as admin and returns its id.
func (b *bundle) create(t *testing.T, plugin string, config map[string]any) uuid.UUID {
	t.Helper()
	v, err := b.svc.CreateInterface(b.asAdmin, gateway.NewInterface{PluginName: plugin, DisplayName: plugin + " " + uuid.NewString()[:4], Config: config})
	require.NoError(t, err)
	return v.ID
}

func changeOf(rep gateway.Report, name string) (gateway.Change, bool) {
	for _, c := range rep.Changes {
		if c.Name == name {
			return c, true
		}
	}
	return gateway.Change{}, false
}

func requireKind(t *testing.T, err error, kind apperr.Kind) {
	t.Helper()
	require.Error(t, err)
	got, ok := apperr.KindOf(err)
	require.True(t, ok, "not a domain error: %v", err)
	require.Equal(t, kind, got, "%v", err)
}

// schemaPidKey is a config schema with a merchant id and a secret key.
const schemaPidKey = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["pid", "key"],
  "additionalProperties": false,
  "properties": {
    "pid": {"type": "string", "minLength": 1},
    "key": {"type": "string", "minLength": 1, "x-secret": true},
    "port": {"type": "integer", "minimum": 1, "maximum": 65535}
  }
}`

// gatewayScript is a gateway plugin of the given version whose info()
// display name is label and whose config_schema() returns schema.
func gatewayScript(version, label, schema string) string {
	return fmt.Sprintf(`-- test gateway %[2]s
function version()
  return %[1]q
end

function info(config_json, input_json)
  return json_encode({ display_name = %[2]q, supports_query = false, supports_refund = false, currencies = { "CNY" } })
end

function config_schema(config_json, input_json)
  return [==[%[3]s]==]
end

function create_payment(config_json, input_json)
  local cfg = json_decode(config_json)
  return json_encode({ payment_url = "", qr_code = "", instructions = "pay " .. tostring(cfg.pid), gateway_payment_id = "" })
end

function query_payment(config_json, input_json)
  return json_encode({ status = "pending" })
end

function parse_callback(config_json, input_json)
  return json_encode({ valid = false, reason = "test" })
end

function refund(config_json, input_json)
  return json_encode({ status = "failed", message = "test" })
end

function test_config(config_json, input_json)
  local cfg = json_decode(config_json)
  return json_encode({ ok = cfg.pid ~= nil, message = "pid " .. tostring(cfg.pid) })
end
`, version, label, schema)
}

func lines(s string, substr string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}
