package plugin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/require"
	lua "github.com/yuin/gopher-lua"
)

func TestFunctionsListsEachContract(t *testing.T) {
	t.Parallel()
	require.Len(t, Functions(Gateway), 7)
	require.Len(t, Functions(Notifier), 6)
	require.Len(t, Functions(FirstPartyProvider), 12)
	require.Len(t, Functions(UpstreamProvider), 15)
	require.Nil(t, Functions("printer"))
	require.Equal(t, []string{"info", "config_schema", "create_payment", "query_payment", "parse_callback", "refund", "test_config"}, Functions(Gateway))
	require.Subset(t, Functions(UpstreamProvider), Functions(FirstPartyProvider))

	// The slice is a copy: editing it does not change the contract.
	fns := Functions(Gateway)
	fns[0] = "changed"
	require.Equal(t, "info", Functions(Gateway)[0])
}

func TestCompileAcceptsACompleteGateway(t *testing.T) {
	t.Parallel()
	src := readTestdata(t, "gateway.lua")
	sc, err := Compile("test_gw", Gateway, src)
	require.NoError(t, err)
	sum := sha256.Sum256(src)
	require.Equal(t, "test_gw", sc.Name())
	require.Equal(t, Gateway, sc.Type())
	require.Equal(t, "1.2.3", sc.Version())
	require.Equal(t, hex.EncodeToString(sum[:]), sc.SHA256())
	require.True(t, sc.HasAdminPage())
}

func TestCompileRefusesAGatewayWithSixFunctionsNamingTheMissingOne(t *testing.T) {
	t.Parallel()
	_, err := Compile("six", Gateway, readTestdata(t, "gateway_missing_refund.lua"))
	var ce *CompileError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "six", ce.Plugin)
	require.Contains(t, err.Error(), `gateway function "refund" is missing`)
}

func TestCompileRefusesAFunctionWithThreeParametersNamingIt(t *testing.T) {
	t.Parallel()
	_, err := Compile("three", Gateway, readTestdata(t, "gateway_three_params.lua"))
	require.ErrorContains(t, err, `function "parse_callback" takes 3 parameters, the contract says 2`)
}

func TestCompileRefusesOtherShapesOfContractFunction(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		extra, want string
	}{
		{"function refund(c) return '{}' end", `function "refund" takes 1 parameters, the contract says 2`},
		{"function refund(c, i, ...) return '{}' end", `function "refund" takes a variable number of parameters`},
		{"refund = 42", `function "refund" is a number, not a function`},
		{"refund = md5", `function "refund" is not defined by the script`},
		{"function admin_page(c) return '' end", `function "admin_page" takes 1 parameters, the contract says 2`},
	} {
		_, err := Compile("shape", Gateway, gatewaySource(tc.extra))
		require.ErrorContains(t, err, tc.want, tc.extra)
	}
}

func TestCompileNamesEveryMissingFunction(t *testing.T) {
	t.Parallel()
	_, err := Compile("empty", Notifier, []byte("-- nothing here\n"))
	require.Error(t, err)
	for _, fn := range Functions(Notifier) {
		require.Contains(t, err.Error(), fmt.Sprintf("notifier function %q is missing", fn))
	}
}

func TestCompileChecksTheContractOfEachType(t *testing.T) {
	t.Parallel()
	for _, typ := range []Type{Gateway, Notifier, FirstPartyProvider, UpstreamProvider} {
		var src strings.Builder
		for _, fn := range Functions(typ) {
			fmt.Fprintf(&src, "function %s(config_json, input_json) return '{}' end\n", fn)
		}
		sc, err := Compile(string(typ), typ, []byte(src.String()))
		require.NoError(t, err, typ)
		require.False(t, sc.HasAdminPage())

		// The first-party contract is not enough for an upstream provider.
		if typ == FirstPartyProvider {
			_, err := Compile("up", UpstreamProvider, []byte(src.String()))
			require.ErrorContains(t, err, `upstream_provider function "list_plans" is missing`)
		}
	}
	_, err := Compile("x", "printer", []byte(""))
	require.ErrorContains(t, err, `unknown plugin type "printer"`)
}

func TestCompileSyntaxErrorCarriesTheLine(t *testing.T) {
	t.Parallel()
	_, err := Compile("broken", Gateway, readTestdata(t, "syntax_error.lua"))
	var ce *CompileError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, 7, ce.Line, ce.Error())
	require.Contains(t, err.Error(), "plugin broken: line 7:")
}

func TestCompileRuntimeErrorAtLoadCarriesTheLine(t *testing.T) {
	t.Parallel()
	src := gatewaySource("\nlocal x = nil\nlocal y = x.field\n")
	line := strings.Count(string(src[:strings.Index(string(src), "x.field")]), "\n") + 1
	_, err := Compile("loadfail", Gateway, src)
	var ce *CompileError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, line, ce.Line, ce.Error())
	require.Equal(t, fmt.Sprintf("plugin loadfail: line %d: attempt to index a non-table object(nil) with key 'field'", line), ce.Error())
}

func TestCompileTopLevelEndlessLoopIsStopped(t *testing.T) {
	t.Parallel()
	_, err := Compile("loop", Gateway, gatewaySource("while true do end"))
	require.ErrorContains(t, err, "instruction budget exhausted")
}

func TestCompileReadsTheVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code, version, err string
	}{
		{"", "0.0.0", ""},
		{`function version() return "1.2.3" end`, "1.2.3", ""},
		{`function version() return "2.0.0-rc.1+build.5" end`, "2.0.0-rc.1+build.5", ""},
		{`function version() return "banana" end`, "", `version() returned "banana", which is not a semantic version`},
		{`function version() return "v1.2.3" end`, "", "not a semantic version"},
		{`function version() return "1.2" end`, "", "not a semantic version"},
		{`function version() return 3 end`, "", "version() returned a number"},
		{`function version() error("no") end`, "", "version() failed"},
		{`version = "1.2.3"`, "", "version is a string, not a function"},
	} {
		sc, err := Compile("v", Gateway, gatewaySource(tc.code))
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.code)
			continue
		}
		require.NoError(t, err, tc.code)
		require.Equal(t, tc.version, sc.Version())
	}
}

func TestCompileRefusesAnOversizedSource(t *testing.T) {
	t.Parallel()
	src := append(gatewaySource(""), []byte("-- "+strings.Repeat("x", MaxSourceBytes))...)
	_, err := Compile("big", Gateway, src)
	require.ErrorContains(t, err, "the limit is")
}

func TestCompareVersionsFollowsSemverPrecedence(t *testing.T) {
	t.Parallel()
	ordered := []string{"0.0.0", "0.9.0", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
		"1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.2.0", "1.10.0", "10.0.0"}
	for i := range ordered {
		for j := range ordered {
			c, err := CompareVersions(ordered[i], ordered[j])
			require.NoError(t, err)
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			require.Equal(t, want, c, "%s vs %s", ordered[i], ordered[j])
		}
	}
	c, err := CompareVersions("1.0.0+build.1", "1.0.0+build.2")
	require.NoError(t, err)
	require.Zero(t, c)
	_, err = CompareVersions("1.0", "1.0.0")
	require.Error(t, err)
}

func TestAdminPageTakesTheSpecsNoParameterFormAndTheTwoParameterForm(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, src := range []string{
		`function admin_page() return "no parameters" end`,
		`function admin_page(c, i) return "config " .. c .. " input " .. i end`,
	} {
		sc, err := Compile("page", Gateway, gatewaySource(src))
		require.NoError(t, err, src)
		require.True(t, sc.HasAdminPage(), src)
		p := b.rt.Load(sc)
		out, err := p.Call(context.Background(), AdminPage, `{"k":1}`, "{}")
		p.Close()
		require.NoError(t, err, src)
		if strings.Contains(src, "admin_page()") {
			require.Equal(t, "no parameters", out)
		} else {
			require.Equal(t, `config {"k":1} input {}`, out)
		}
	}
	_, err := Compile("page", Gateway, gatewaySource(`function admin_page(a, b, c) return "" end`))
	require.ErrorContains(t, err, `function "admin_page" takes 3 parameters, the contract says 2`)
}

// A script holds its compiled code only while something runs it: after the
// check of Compile nothing does, and the code is collected; the first call
// compiles it again, and the plugin keeps it, even when a failed call lost
// the only state, until it is closed (docs/performance.md, "Idle RSS, round
// three").
func TestAScriptHoldsItsCompiledCodeOnlyWhileAPluginRunsIt(t *testing.T) {
	t.Parallel()
	src := gatewaySource(`function test_config(c, i)
		if i == "fail" then error("refused") end
		return json_encode({n = 42})
	end`)
	sc, err := Compile("test", Gateway, src)
	require.NoError(t, err)
	require.Eventually(t, func() bool { runtime.GC(); return sc.proto.Value() == nil }, 5*time.Second, time.Millisecond,
		"the prototype outlived the check's state")

	b := setup(t)
	p := b.rt.Load(sc)
	for range 3 {
		out, err := p.Call(context.Background(), "test_config", "{}", "{}")
		require.NoError(t, err)
		require.JSONEq(t, `{"n": 42}`, out)
	}
	runtime.GC()
	require.True(t, sc.proto.Value() != nil, "the plugin does not keep the prototype it runs")
	kept := sc.proto // weak: holding it keeps nothing alive
	_, err = p.Call(context.Background(), "test_config", "{}", "fail")
	require.Error(t, err) // its state is discarded; the pool is empty
	for range 5 {         // what only the lost state held goes within a few cycles
		runtime.GC()
	}
	require.True(t, sc.proto.Value() != nil, "the prototype was collected while the plugin was loaded")
	require.True(t, kept == sc.proto, "compiled again while the plugin was loaded")

	p.Close()
	require.Eventually(t, func() bool { runtime.GC(); return sc.proto.Value() == nil }, 5*time.Second, time.Millisecond,
		"the prototype outlived the plugin's states")
}

// A state a failed call discards is gone: the pool's array does not keep it
// (a pooled state holds a whole Lua heap).
func TestADiscardedStateIsNotKeptByThePool(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.load(t, gatewaySource(`function test_config(c, i)
		if i == "fail" then error("refused") end
		return "{}"
	end`))
	_, err := p.Call(context.Background(), "test_config", "{}", "{}")
	require.NoError(t, err)
	p.mu.Lock()
	require.Len(t, p.idle, 1)
	pooled := weak.Make(p.idle[0])
	p.mu.Unlock()
	_, err = p.Call(context.Background(), "test_config", "{}", "fail")
	require.Error(t, err)
	require.Eventually(t, func() bool { runtime.GC(); return pooled.Value() == nil }, 5*time.Second, time.Millisecond,
		"the discarded state is still reachable")
}

// A compiled plugin holds code of its own size, not the compiler's
// 1,024-instruction start (docs/performance.md, "Idle RSS"), and still runs.
func TestCompiledPrototypesHoldNoSpareRoom(t *testing.T) {
	t.Parallel()
	src := gatewaySource(`
		local function twice(x) return x * 2 end
		function test_config(c, i) return json_encode({n = twice(21)}) end`)
	sc, err := Compile("test", Gateway, src)
	require.NoError(t, err)
	var walk func(p *lua.FunctionProto) int
	walk = func(p *lua.FunctionProto) int {
		require.Equal(t, len(p.Code), cap(p.Code), "code of the function at line %d", p.LineDefined)
		require.Equal(t, len(p.DbgSourcePositions), cap(p.DbgSourcePositions), "lines of the function at line %d", p.LineDefined)
		require.Equal(t, len(p.Code), len(p.DbgSourcePositions))
		require.Equal(t, len(p.Constants), cap(p.Constants), "constants of the function at line %d", p.LineDefined)
		require.Equal(t, len(p.FunctionPrototypes), cap(p.FunctionPrototypes), "nested functions of the function at line %d", p.LineDefined)
		require.Equal(t, len(p.DbgLocals), cap(p.DbgLocals), "locals of the function at line %d", p.LineDefined)
		require.Equal(t, len(p.DbgCalls), cap(p.DbgCalls), "calls of the function at line %d", p.LineDefined)
		require.Equal(t, len(p.DbgUpvalues), cap(p.DbgUpvalues), "upvalues of the function at line %d", p.LineDefined)
		n := 1
		for _, c := range p.FunctionPrototypes {
			n += walk(c)
		}
		return n
	}
	proto, err := sc.prototype()
	require.NoError(t, err)
	require.Greater(t, walk(proto), 2)

	b := setup(t)
	out, err := b.load(t, src).Call(context.Background(), "test_config", "{}", "{}")
	require.NoError(t, err)
	require.JSONEq(t, `{"n": 42}`, out)
}
