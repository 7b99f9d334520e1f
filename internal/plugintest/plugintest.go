package plugintest

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/outbound"
	"github.com/rustbill/paymentd/internal/plugin"
)

// Dir is the absolute path of the repository's plugins/ directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "plugins")
}

// Client is an outbound client for tests: the production policy (breaker,
// three attempts for idempotent calls) with short backoffs, closed when the
// test ends.
func Client(t testing.TB) *outbound.Client {
	t.Helper()
	c := outbound.New(outbound.Options{
		BaseBackoff: 5 * time.Millisecond,
		MaxBackoff:  20 * time.Millisecond,
		Timeout:     5 * time.Second,
		Logger:      slog.New(slog.DiscardHandler),
	})
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// Doer is the runtime's HTTPDoer over the outbound client (plugin.Outbound).
func Doer(c *outbound.Client) plugin.HTTPDoer { return plugin.Outbound(c) }

// TypeOf is the plugin type of a path under plugins/: its folder.
func TypeOf(rel string) plugin.Type {
	switch strings.SplitN(filepath.ToSlash(rel), "/", 2)[0] {
	case "gateway":
		return plugin.Gateway
	case "notifier":
		return plugin.Notifier
	case "provider":
		return plugin.FirstPartyProvider
	}
	return ""
}

// Compile compiles plugins/<rel> (e.g. "gateway/epay.lua") with the type of
// its folder and the name of its file.
func Compile(t testing.TB, rel string) *plugin.Script {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(Dir(), rel))
	require.NoError(t, err)
	name := strings.TrimSuffix(filepath.Base(rel), ".lua")
	sc, err := plugin.Compile(name, TypeOf(rel), src)
	require.NoError(t, err)
	return sc
}

// Load compiles plugins/<rel> and loads it into a runtime with opts; when
// opts.HTTP is nil the runtime gets a fresh test Client.
func Load(t testing.TB, rel string, opts plugin.Options) *plugin.Plugin {
	t.Helper()
	if opts.HTTP == nil {
		opts.HTTP = Doer(Client(t))
	}
	p := plugin.NewRuntime(opts).Load(Compile(t, rel))
	t.Cleanup(p.Close)
	return p
}

// Call runs fn with config and input marshalled to JSON (a string is passed
// as it is) and returns the decoded result.
func Call(t testing.TB, p *plugin.Plugin, fn string, config, input any) map[string]any {
	t.Helper()
	out, err := CallErr(p, fn, config, input)
	require.NoError(t, err)
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	return res
}

// CallErr runs fn like Call and returns the raw result and the error.
func CallErr(p *plugin.Plugin, fn string, config, input any) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return p.Call(ctx, fn, jsonText(config), jsonText(input))
}

func jsonText(v any) string {
	switch x := v.(type) {
	case nil:
		return "{}"
	case string:
		return x
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
