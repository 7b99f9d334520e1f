package plugin

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDangerousFunctionsAreUnavailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, code := range []string{
		`os.execute("echo pwned")`,
		`io.open("/etc/passwd")`,
		`require("os")`,
		`load("return 1")`,
		`loadstring("return 1")`,
		`loadfile("/etc/passwd")`,
		`dofile("/etc/passwd")`,
		`module("x")`,
		`debug.getinfo(1)`,
		`debug.getregistry()`,
		`string.dump(function() end)`,
		`collectgarbage()`,
		`setfenv(1, {})`,
		`getfenv(1)`,
		`newproxy(true)`,
		`_printregs()`,
		`coroutine.create(function() end)`,
		`package.loaded.os.execute("echo pwned")`,
		`channel.make()`,
		`math.randomseed(1)`,
		`string.gfind("a", "a")`,
		// The string metatable is hidden: its __index (where every method
		// call on a string looks) can be neither read nor rewritten.
		`getmetatable('').__index.rep = nil`,
		`local rep = getmetatable('').__index.rep; return rep('x', 3)`,
		`setmetatable(getmetatable(''), {})`,
		// Only tables take a metatable: not the numbers, booleans or
		// functions of the state, whose metatable would outlive the call.
		`setmetatable(0, {__index = function() return "evil" end})`,
		`setmetatable(true, {})`,
		`setmetatable(print, {})`,
	} {
		_, err := b.run(t, code)
		var ce *CallError
		require.ErrorAs(t, err, &ce, code)
		require.Equal(t, KindScriptError, ce.Kind, code)
	}
}

func TestSandboxKeepsOnlyTheSafeGlobals(t *testing.T) {
	t.Parallel()
	got := setup(t).runOK(t, `
		local names = {}
		for k in pairs(_G) do names[#names + 1] = k end
		table.sort(names)
		return json_encode({names = names, mt = getmetatable(''), gmt = getmetatable(_G), smt = getmetatable(string)})`)
	require.Equal(t, false, got["mt"])
	require.Equal(t, false, got["gmt"])
	require.Equal(t, false, got["smt"])
	var names []string
	for _, n := range got["names"].([]any) {
		names = append(names, n.(string))
	}
	want := []string{"_G", "_VERSION", "assert", "error", "getmetatable", "ipairs", "math", "next",
		"pairs", "pcall", "print", "rawequal", "rawget", "rawset", "select", "setmetatable",
		"string", "table", "tonumber", "tostring", "type", "unpack", "xpcall"}
	for _, h := range hostFunctions {
		want = append(want, h.name)
	}
	// the script's own functions
	want = append(want, Functions(Gateway)...)
	require.ElementsMatch(t, want, names)
}

func TestStandardLibraryIsReadOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, code := range []string{
		`string.rep = function() return "evil" end`,
		`string.evil = 1`,
		`table.concat = nil`,
		`math.floor = nil`,
		`rawset(string, "rep", nil)`,
		`table.insert(string, "x")`,
		`table.remove(math)`,
		`setmetatable(string, nil)`,
	} {
		_, err := b.run(t, code)
		var ce *CallError
		require.ErrorAs(t, err, &ce, code)
		require.Equal(t, KindScriptError, ce.Kind, code)
	}
	// Reading works, and methods on strings too.
	got := b.runOK(t, `return json_encode({a = string.rep("ab", 3), b = ("x"):rep(2), c = math.floor(2.5), d = ("%d"):format(7)})`)
	require.Equal(t, map[string]any{"a": "ababab", "b": "xx", "c": float64(2), "d": "7"}, got)
}

func TestPrintGoesToTheLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.run(t, `print("hello", 42, nil) log("warn", "careful") return "{}"`)
	require.NoError(t, err)
	logs := b.logs.String()
	require.Contains(t, logs, `level=INFO msg="hello\t42\tnil" plugin=test function=test_config`)
	require.Contains(t, logs, `level=WARN msg=careful plugin=test function=test_config`)
}

func TestLogLinesPerCallAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.run(t, `for i = 1, 10000 do log("info", "line " .. i) end return "{}"`)
	require.NoError(t, err)
	logs := b.logs.String()
	require.Contains(t, logs, "line 99")
	require.NotContains(t, logs, "line 100 ")
	require.Contains(t, logs, "log line limit reached")
}

// newPool is a plugin on a runtime keeping one idle state, so consecutive
// calls land on the same state whenever it is reused.
func newPool(t *testing.T, src []byte) *Plugin {
	t.Helper()
	b := setup(t, func(o *Options) { o.Limits.PoolSize = 1 })
	return b.load(t, src)
}

func idleState(p *Plugin) *state {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) == 0 {
		return nil
	}
	return p.idle[0]
}

func TestGlobalsWrittenByOneCallAreNotVisibleToTheNext(t *testing.T) {
	t.Parallel()
	p := newPool(t, gatewaySource(`
		function test_config(c, i)
			local seen = leaked or "none"
			leaked = "secret of the previous call"
			return json_encode({seen = seen})
		end
		function refund(c, i)
			local seen = tostring(rawget(_G, "raw"))
			rawset(_G, "raw", "left behind")
			return json_encode({seen = seen})
		end
		function query_payment(c, i)
			-- overwrite existing globals: a host function and a library
			local real = md5("")
			md5 = function() return "forged" end
			string = {rep = function() return "forged" end}
			json_encode = function() return '{"forged":true}' end
			return '{"real":"' .. real .. '"}'
		end
		function info(c, i)
			return json_encode({md5 = md5(""), rep = string.rep("a", 2)})
		end`))
	ctx := context.Background()
	for range 3 {
		out, err := p.Call(ctx, "test_config", "{}", "{}")
		require.NoError(t, err)
		require.JSONEq(t, `{"seen":"none"}`, out)
		out, err = p.Call(ctx, "refund", "{}", "{}")
		require.NoError(t, err)
		require.JSONEq(t, `{"seen":"nil"}`, out)
	}

	_, err := p.Call(ctx, "query_payment", "{}", "{}")
	require.NoError(t, err)
	out, err := p.Call(ctx, "info", "{}", "{}")
	require.NoError(t, err)
	require.JSONEq(t, `{"md5":"d41d8cd98f00b204e9800998ecf8427e","rep":"aa"}`, out)
}

func TestCleanStateIsReusedAndDirtyStateIsDiscarded(t *testing.T) {
	t.Parallel()
	p := newPool(t, gatewaySource(`
		function test_config(c, i) return "{}" end
		function refund(c, i) created_global = 1 return "{}" end
		function query_payment(c, i) md5 = nil return "{}" end
		function info(c, i) error("boom") end`))
	ctx := context.Background()
	_, err := p.Call(ctx, "test_config", "{}", "{}")
	require.NoError(t, err)
	first := idleState(p)
	require.NotNil(t, first)

	_, err = p.Call(ctx, "test_config", "{}", "{}")
	require.NoError(t, err)
	require.Same(t, first, idleState(p), "a clean state is reused")

	_, err = p.Call(ctx, "query_payment", "{}", "{}")
	require.NoError(t, err)
	require.Same(t, first, idleState(p), "a changed global is restored in place")

	_, err = p.Call(ctx, "refund", "{}", "{}")
	require.NoError(t, err)
	require.Nil(t, idleState(p), "a state that created a global is discarded")

	_, err = p.Call(ctx, "test_config", "{}", "{}")
	require.NoError(t, err)
	second := idleState(p)
	_, err = p.Call(ctx, "info", "{}", "{}")
	requireKind(t, err, KindScriptError, "boom")
	require.Nil(t, idleState(p), "a state whose call failed is discarded")
	require.NotSame(t, first, second)
}

func TestCallRefusesFunctionsOutsideTheContract(t *testing.T) {
	t.Parallel()
	p := setup(t).load(t, readTestdata(t, "gateway.lua"))
	for _, fn := range []string{"helper", "version", "print", "md5", "nope"} {
		_, err := p.Call(context.Background(), fn, "{}", "{}")
		ce := requireKind(t, err, KindScriptError)
		require.ErrorIs(t, err, ErrUnknownFunction)
		require.Equal(t, fn, ce.Function)
	}
	out, err := p.Call(context.Background(), AdminPage, "{}", "{}")
	require.NoError(t, err)
	require.Equal(t, "nothing to show", out, "admin_page may answer plain text")
}

func TestCallChecksTheResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for code, want := range map[string]string{
		`return nil`:                  "returned a nil",
		`return 42`:                   "returned a number",
		`return {}`:                   "returned a table",
		`return "not json"`:           "not JSON",
		`return '{"a":1} trailing'`:   "not JSON",
		`return "{}", "extra"`:        "returned 2 values",
		`local x = 1`:                 "returned 0 values",
		`return json_encode({a = 1})`: "",
	} {
		_, err := b.run(t, code)
		if want == "" {
			require.NoError(t, err)
			continue
		}
		requireKind(t, err, KindBadResult, want)
	}
}

func TestCallErrorCarriesPluginFunctionAndLine(t *testing.T) {
	t.Parallel()
	src := gatewaySource("\nfunction refund(c, i)\n  error(\"gateway said no\")\nend\n")
	p := setup(t).load(t, src)
	_, err := p.Call(context.Background(), "refund", "{}", "{}")
	ce := requireKind(t, err, KindScriptError, "gateway said no")
	require.Equal(t, "test", ce.Plugin)
	require.Equal(t, "refund", ce.Function)
	// the stubs, the blank line opening the extra code, the function line
	line := countLines(gatewayStubs) + 3
	require.Equal(t, line, runtimeLine("test", ce.Message), ce.Message)
	require.Equal(t, fmt.Sprintf("plugin test: refund: script_error: %s", ce.Message), err.Error())
}

func countLines(s string) int {
	n := 0
	for _, c := range s {
		if c == '\n' {
			n++
		}
	}
	return n
}

func TestClosedPluginRefusesCalls(t *testing.T) {
	t.Parallel()
	p := setup(t).load(t, readTestdata(t, "gateway.lua"))
	_, err := p.Call(context.Background(), "info", "{}", "{}")
	require.NoError(t, err)
	p.Close()
	_, err = p.Call(context.Background(), "info", "{}", "{}")
	require.ErrorIs(t, err, ErrClosed)
}
