package plugin

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rustbill/paymentd/internal/testkit"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// gatewayStubs defines the seven gateway functions, each answering "{}".
const gatewayStubs = `
function info(c, i) return "{}" end
function config_schema(c, i) return "{}" end
function create_payment(c, i) return "{}" end
function query_payment(c, i) return "{}" end
function parse_callback(c, i) return "{}" end
function refund(c, i) return "{}" end
function test_config(c, i) return "{}" end
`

// gatewaySource is a valid gateway followed by extra code; a function
// defined in extra replaces the stub of the same name.
func gatewaySource(extra string) []byte {
	return []byte(gatewayStubs + extra)
}

// probe is a gateway whose test_config runs body (the body of a function of
// (c, i)).
func probe(body string) []byte {
	return gatewaySource("\nfunction test_config(c, i)\n" + body + "\nend\n")
}

type bundle struct {
	rt   *Runtime
	logs *testkit.Logs
	opts Options
}

// setup returns a runtime with a debug logger into a buffer; edit adjusts
// the options first.
func setup(t *testing.T, edit ...func(*Options)) *bundle {
	t.Helper()
	b := &bundle{logs: &testkit.Logs{}}
	b.opts = Options{Logger: slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, e := range edit {
		e(&b.opts)
	}
	b.rt = NewRuntime(b.opts)
	return b
}

// load compiles a gateway and loads it; the plugin is closed with the test.
func (b *bundle) load(t *testing.T, src []byte) *Plugin {
	t.Helper()
	sc, err := Compile("test", Gateway, src)
	require.NoError(t, err)
	p := b.rt.Load(sc)
	t.Cleanup(p.Close)
	return p
}

// run calls test_config of probe(body) on a fresh plugin.
func (b *bundle) run(t *testing.T, body string) (string, error) {
	t.Helper()
	return b.load(t, probe(body)).Call(context.Background(), "test_config", "{}", "{}")
}

// runOK is run that must succeed and returns the decoded JSON answer.
func (b *bundle) runOK(t *testing.T, body string) map[string]any {
	t.Helper()
	out, err := b.run(t, body)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m), out)
	return m
}

// requireKind asserts err is a *CallError of kind k whose message contains
// msg; what (optional) says which case failed.
func requireKind(t *testing.T, err error, k ErrorKind, msgAndWhat ...string) *CallError {
	t.Helper()
	what := ""
	if len(msgAndWhat) > 1 {
		what = msgAndWhat[1]
	}
	require.Error(t, err, what)
	var ce *CallError
	require.ErrorAs(t, err, &ce, what)
	require.Equal(t, k, ce.Kind, "%s: %s", what, ce.Error())
	if len(msgAndWhat) > 0 {
		require.Contains(t, ce.Message, msgAndWhat[0], what)
	}
	return ce
}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

func TestHelpersProbeIsAValidGateway(t *testing.T) {
	t.Parallel()
	b := setup(t)
	out, err := b.run(t, `return json_encode({ok = true})`)
	require.NoError(t, err)
	require.True(t, strings.Contains(out, `"ok":true`), out)
}
