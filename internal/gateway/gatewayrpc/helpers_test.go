package gatewayrpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/gateway"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
)

// bundle is a database of one's own, a plugin directory in t.TempDir(),
// the registry over both with a keyring of one key ("k1"), and the gateway
// domain over them.
type bundle struct {
	pool    *pgxpool.Pool
	dir     string
	reg     *gateway.Registry
	svc     *gateway.Service
	adminID uuid.UUID
}

func setup(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{pool: testdb.Pool(t), dir: t.TempDir(), adminID: uuid.New()}
	log := slog.New(slog.DiscardHandler)
	keys, err := secrets.New("k1", map[string][]byte{"k1": bytes.Repeat([]byte{1}, secrets.KeySize)})
	require.NoError(t, err)
	b.reg = gateway.NewRegistry(gateway.RegistryOptions{
		DB: b.pool, Dir: b.dir, ScanInterval: time.Hour,
		Runtime: plugin.NewRuntime(plugin.Options{Logger: log, HTTP: plugintest.Doer(plugintest.Client(t))}),
		Logger:  log,
		Secrets: keys,
	})
	b.svc = gateway.NewService(b.pool, b.reg, nil, log)
	return b
}

// write puts a plugin file at rel (e.g. "gateway/demo.lua").
func (b *bundle) write(t *testing.T, rel, src string) {
	t.Helper()
	p := filepath.Join(b.dir, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(src), 0o644))
}

func (b *bundle) scan(t *testing.T) {
	t.Helper()
	_, err := b.reg.Scan(context.Background())
	require.NoError(t, err)
}

// storedConfig is interface id's config as the database holds it.
func (b *bundle) storedConfig(t *testing.T, id uuid.UUID) map[string]any {
	t.Helper()
	gi, err := store.Q(b.pool).GetGatewayInterface(context.Background(), id)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(gi.Config, &m))
	return m
}

// pluginConfig is the config the plugin gets for interface id from reg.
func (b *bundle) pluginConfig(t *testing.T, reg *gateway.Registry, id uuid.UUID) map[string]any {
	t.Helper()
	gw, err := reg.Get(context.Background(), id)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(gw.ConfigJSON), &m))
	return m
}

// recorder is an HTTP server that records the requests it receives and
// answers body.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // each request's URI and Authorization
}

func newRecorder(t *testing.T, status int, body string) *recorder {
	t.Helper()
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.URL.RequestURI()+" "+req.Header.Get("Authorization"))
		r.mu.Unlock()
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// schemaEndpoint is epay's shape: the plugin sends the secret key to
// api_url.
const schemaEndpoint = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["api_url", "pid", "key"],
  "additionalProperties": false,
  "properties": {
    "api_url": {"type": "string", "pattern": "^https?://", "x-endpoint": true},
    "pid": {"type": "string", "minLength": 1},
    "key": {"type": "string", "minLength": 1, "x-secret": true}
  }
}`

// sendingScript is a gateway plugin whose test_config sends the key to
// api_url (as epay's does) and answers with what came back.
func sendingScript(version string) string {
	return fmt.Sprintf(`-- test gateway Sender
function version()
  return %q
end

function info(config_json, input_json)
  return json_encode({ display_name = "Sender", supports_query = false, supports_refund = false, currencies = { "CNY" } })
end

function config_schema(config_json, input_json)
  return [==[%s]==]
end

function create_payment(config_json, input_json)
  return json_encode({ payment_url = "", qr_code = "", instructions = "", gateway_payment_id = "" })
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
  local resp = json_decode(http_get(cfg.api_url .. "/api.php?key=" .. urlencode(cfg.key)))
  if resp.status ~= 200 then
    error("upstream said: " .. resp.body)
  end
  return json_encode({ ok = false, message = "not the API: " .. resp.body })
end
`, version, schemaEndpoint)
}

// auditAfter is the after state of the interface's last row of action.
func (b *bundle) auditAfter(t *testing.T, id, action string) (map[string]any, string) {
	t.Helper()
	var raw []byte
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT after FROM audit_log WHERE entity_id = $1 AND action = $2 ORDER BY id DESC LIMIT 1`, id, action).Scan(&raw))
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m, string(raw)
}

func (b *bundle) auditRows(t *testing.T, id, action string) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM audit_log WHERE entity_id = $1 AND action = $2`, id, action).Scan(&n))
	return n
}
