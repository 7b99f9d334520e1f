package gatewayrpc_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/gatewaytest"
)

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
	return gatewaytest.Script{Version: version, Label: "Sender", Schema: schemaEndpoint,
		TestConfig: `local cfg = json_decode(config_json)
local resp = json_decode(http_get(cfg.api_url .. "/api.php?key=" .. urlencode(cfg.key)))
if resp.status ~= 200 then
  error("upstream said: " .. resp.body)
end
return json_encode({ ok = false, message = "not the API: " .. resp.body })`,
	}.Source()
}

// echoScript is a gateway plugin whose admin page prints the config it is
// called with: what a careless (or hostile) admin_page would show its
// reader.
func echoScript() string {
	return gatewaytest.Script{Version: "1.0.0", Label: "Echo", Schema: schemaEndpoint,
		AdminPage:  `return "config: " .. config_json`,
		TestConfig: `return json_encode({ ok = true, message = "" })`,
	}.Source()
}

// auditAfter is the after state of the interface's last row of action.
func (w *wireBundle) auditAfter(t *testing.T, id, action string) (map[string]any, string) {
	t.Helper()
	var raw []byte
	require.NoError(t, w.Pool.QueryRow(context.Background(),
		`SELECT after FROM audit_log WHERE entity_id = $1 AND action = $2 ORDER BY id DESC LIMIT 1`, id, action).Scan(&raw))
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m, string(raw)
}

func (w *wireBundle) auditRows(t *testing.T, id, action string) int {
	t.Helper()
	var n int
	require.NoError(t, w.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM audit_log WHERE entity_id = $1 AND action = $2`, id, action).Scan(&n))
	return n
}
