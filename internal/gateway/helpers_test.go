package gateway_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/gateway"
	"github.com/rustbill/paymentd/internal/gatewaytest"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testkit"
)

// bundle is gatewaytest's (a database of one's own, a plugin directory in
// t.TempDir(), the registry over both and principals to call the service
// as) under the names these tests use; its helpers are gatewaytest's, which
// gatewayrpc's tests share.
type bundle struct {
	g          *gatewaytest.Bundle
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
var testKeyring = gatewaytest.Keyring

func setup(t *testing.T) *bundle {
	t.Helper()
	g := gatewaytest.Setup(t)
	return &bundle{g: g, pool: g.Pool, dir: g.Dir, reg: g.Reg, svc: g.Svc, logs: g.Logs,
		asAdmin: g.AsAdmin, asCustomer: g.AsCustomer, anonymous: g.Anonymous, adminID: g.AdminID, keys: g.Keys}
}

// write puts a plugin file at rel (e.g. "gateway/demo.lua").
func (b *bundle) write(t *testing.T, rel, src string) {
	t.Helper()
	b.g.Write(t, rel, src)
}

func (b *bundle) remove(t *testing.T, rel string) {
	t.Helper()
	require.NoError(t, os.Remove(filepath.Join(b.dir, filepath.FromSlash(rel))))
}

func (b *bundle) scan(t *testing.T) gateway.Report {
	t.Helper()
	return b.g.Scan(t)
}

// storedConfig is an interface's config as the database holds it.
func (b *bundle) storedConfig(t *testing.T, id uuid.UUID) map[string]any {
	t.Helper()
	return b.g.StoredConfig(t, id)
}

// pluginConfig is the config the plugin gets for interface id from reg.
func (b *bundle) pluginConfig(t *testing.T, reg *gateway.Registry, id uuid.UUID) map[string]any {
	t.Helper()
	return b.g.PluginConfig(t, reg, id)
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

// get is the registry's view of interface id (Get), which must answer.
func (b *bundle) get(t *testing.T, id uuid.UUID) payment.Gateway {
	t.Helper()
	gw, err := b.reg.Get(context.Background(), id)
	require.NoError(t, err)
	return gw
}

// enable enables the interfaces ids as admin.
func (b *bundle) enable(t *testing.T, ids ...uuid.UUID) {
	t.Helper()
	for _, id := range ids {
		_, err := b.svc.SetInterfaceEnabled(b.asAdmin, id, true)
		require.NoError(t, err)
	}
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
	return gatewaytest.Script{Version: version, Label: label, Schema: schema,
		CreatePayment: "local cfg = json_decode(config_json)\n" +
			`return json_encode({ payment_url = "", qr_code = "", instructions = "pay " .. tostring(cfg.pid), gateway_payment_id = "" })`,
		TestConfig: "local cfg = json_decode(config_json)\n" +
			`return json_encode({ ok = cfg.pid ~= nil, message = "pid " .. tostring(cfg.pid) })`,
	}.Source()
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
