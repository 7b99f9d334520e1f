package plugin

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEndlessLoopEndsWithBudgetErrorAndThePluginKeepsWorking(t *testing.T) {
	t.Parallel()
	// A small budget and a long deadline: the loop must end on the budget,
	// whatever the speed of the machine (the race detector included).
	b := setup(t, func(o *Options) {
		o.Limits.Instructions = 1_000_000
		o.Limits.CallTimeout = time.Minute
	})
	p := b.load(t, gatewaySource(`
		function refund(c, i) while true do end end
		function test_config(c, i) return json_encode({ok = true}) end`))
	start := time.Now()
	_, err := p.Call(context.Background(), "refund", "{}", "{}")
	ce := requireKind(t, err, KindBudget, "instruction budget exhausted (1000000 instructions)")
	require.ErrorIs(t, ce, ErrBudgetExhausted)
	require.Less(t, time.Since(start), 10*time.Second)

	out, err := p.Call(context.Background(), "test_config", "{}", "{}")
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":true}`, out)
}

func TestEndlessLoopEndsAtTheCallTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) {
		o.Limits.Instructions = 1 << 62
		o.Limits.CallTimeout = 50 * time.Millisecond
	})
	start := time.Now()
	_, err := b.run(t, `while true do end`)
	requireKind(t, err, KindTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestCallerDeadlineAndCancellationStopTheCall(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.Limits.Instructions = 1 << 62 })
	p := b.load(t, probe(`while true do end`))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := p.Call(ctx, "test_config", "{}", "{}")
	requireKind(t, err, KindTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(30*time.Millisecond, cancel)
	_, err = p.Call(ctx, "test_config", "{}", "{}")
	requireKind(t, err, KindTimeout)
	require.ErrorIs(t, err, context.Canceled)

	_, err = p.Call(ctx, "test_config", "{}", "{}")
	requireKind(t, err, KindTimeout, "context canceled")
}

func TestPcallCannotSwallowATrippedLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.Limits.Instructions = 100_000 })
	for _, code := range []string{
		`while true do pcall(function() while true do end end) end`,
		`while true do xpcall(function() while true do end end, function() while true do end end) end`,
		`local ok = pcall(string.rep, "x", 2^40) while true do pcall(string.rep, "x", 10) end`,
	} {
		_, err := b.run(t, code)
		require.Error(t, err, code)
		var ce *CallError
		require.ErrorAs(t, err, &ce)
		require.Contains(t, []ErrorKind{KindBudget, KindMemory}, ce.Kind, code)
	}
}

// allocated runs f and returns how many bytes the process allocated
// meanwhile (other tests running in parallel included).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestHugeStringsAreStoppedBeforeTheyAreAllocated(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.Limits.MemoryBytes = 16 << 20 })
	for _, code := range []string{
		`local s = string.rep("x", 2^30)`,
		`local s = ("x"):rep(2^30)`,
		`local s = "x" while true do s = s .. s end`,
		`local s = "x" while true do s = s .. s .. s .. 1 end`,
		`local s = string.rep("x", 2^20) local t = {} for i = 1, 1024 do t[i] = s end local all = table.concat(t)`,
		`local s = string.rep("x", 2^20) local r = string.gsub(s, "x", string.rep("y", 1024))`,
		`local s = string.rep("x", 2^20) local r = string.gsub(s, "", "abcdefghijklmnopqrstuvwxyz")`,
		`local s = string.rep("x", 2^20) local t = {} for i = 1, 1024 do t[i] = string.upper(s) end`,
		`local s = string.rep("x", 2^20) local t = {} for i = 1, 1024 do t[i] = string.format("%s%s", s, s) end`,
		`local s = string.rep("x", 2^20) local t = {} for i = 1, 1024 do t[i] = json_encode({s}) end`,
		`local s = string.rep("x", 2^20) local t = {} for i = 1, 1024 do t[i] = base64_encode(s) end`,
	} {
		var err error
		n := allocated(func() { _, err = b.run(t, code) })
		requireKind(t, err, KindMemory, "memory bound exceeded", code)
		require.Less(t, n, uint64(256<<20), "%s allocated %d MiB", code, n>>20)
	}
}

func TestStringsWithinTheBoundAreFine(t *testing.T) {
	t.Parallel()
	got := setup(t).runOK(t, `
		local s = ""
		for i = 1, 1000 do s = s .. "ab" end
		local parts = {}
		for i = 1, 1000 do parts[#parts + 1] = string.format("%03d", i) end
		return json_encode({n = #s, joined = #table.concat(parts, ",")})`)
	require.Equal(t, map[string]any{"n": float64(2000), "joined": float64(4000)}, got)
}

func TestMemoryBoundIsPerCall(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.Limits.MemoryBytes = 1 << 20 })
	p := b.load(t, probe(`local s = string.rep("x", 600000) return "{}"`))
	for range 5 {
		_, err := p.Call(context.Background(), "test_config", "{}", "{}")
		require.NoError(t, err)
	}
}

func TestSparseArrayWriteDoesNotAllocateAGigabyte(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var err error
	n := allocated(func() {
		_, err = b.run(t, `local t = {} t[60000000] = 1 t[2^40] = 2 return json_encode({n = #t})`)
	})
	require.NoError(t, err)
	require.Less(t, n, uint64(256<<20), "allocated %d MiB", n>>20)
}

func TestStackLimitsEndInAnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, code := range []string{
		`local function f(n) return f(n + 1) + 1 end return f(1)`,
		`local t = {} for i = 1, 200000 do t[i] = i end return unpack(t)`,
		`return string.byte(string.rep("x", 200000), 1, -1)`,
		`return unpack({}, 1, 1e8)`,
	} {
		_, err := b.run(t, code)
		requireKind(t, err, KindScriptError)
	}
}

func TestPatternBacktrackingIsBounded(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) {
		o.Limits.Instructions = 1_000_000
		o.Limits.CallTimeout = time.Minute
	})
	// Without a budget on matching steps this backtracks for hours inside a
	// single VM instruction.
	start := time.Now()
	_, err := b.run(t, `return string.find(string.rep("a", 100000), "(.-)(.-)(.-)(.-)b")`)
	requireKind(t, err, KindBudget)
	require.Less(t, time.Since(start), 10*time.Second)

	// Recursion is per pattern item and bounded; a long subject is no problem
	// within the default budget.
	b = setup(t)
	got := b.runOK(t, `local s = string.rep("a", 1000000) .. "b"
		local i, j = string.find(s, "a*b")
		return json_encode({i = i, j = j})`)
	require.Equal(t, map[string]any{"i": float64(1), "j": float64(1000001)}, got)

	_, err = b.run(t, `return string.match(string.rep("a", 300), string.rep("a?", 300))`)
	requireKind(t, err, KindScriptError, "pattern too complex")
}

func TestQuadraticTableShufflingIsCharged(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) {
		o.Limits.Instructions = 1_000_000
		o.Limits.CallTimeout = time.Minute
	})
	for _, code := range []string{
		`local t = {} for i = 1, 1e6 do table.insert(t, 1, i) end`,
		`local t = {} for i = 1, 1e5 do t[i] = i end for i = 1, 1e5 do table.remove(t, 1) table.insert(t, i) end`,
	} {
		start := time.Now()
		_, err := b.run(t, code)
		requireKind(t, err, KindBudget, "", code)
		require.Less(t, time.Since(start), 10*time.Second, code)
	}
	// Appending is not charged beyond its instructions.
	_, err := b.run(t, `local t = {} for i = 1, 1e5 do table.insert(t, i) end table.sort(t) return "{}"`)
	require.NoError(t, err)
}

func TestGmatchDoesNotCollectMatchesAhead(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.Limits.MemoryBytes = 32 << 20 })
	var err error
	n := allocated(func() {
		_, err = b.run(t, `
			local s = string.rep("x", 8 * 2^20)
			for c in string.gmatch(s, ".") do break end
			return "{}"`)
	})
	require.NoError(t, err)
	require.Less(t, n, uint64(128<<20), "allocated %d MiB", n>>20)
}

// Tables are not strings: a script that holds on to millions of them is
// stopped by the heap guard, long before its (here unlimited) instruction
// budget or its deadline, and the plugin keeps working afterwards. Not
// parallel: the guard watches the process heap, and this test grows it for
// every call running meanwhile.
func TestHugeTablesAreStoppedByTheHeapGuard(t *testing.T) {
	b := setup(t, func(o *Options) {
		o.Limits.Instructions = 1 << 62
		o.Limits.CallTimeout = time.Minute
		o.Limits.HeapGrowthBytes = 32 << 20
	})
	p := b.load(t, gatewaySource(`
		function refund(c, i)
		  local t = {}
		  for n = 1, 1e9 do t[n] = {n, n, n} end
		end
		function test_config(c, i) return json_encode({ok = true}) end`))
	var err error
	n := allocated(func() { _, err = p.Call(context.Background(), "refund", "{}", "{}") })
	ce := requireKind(t, err, KindMemory, "the process heap grew too much during the call")
	require.ErrorIs(t, ce, ErrMemoryExceeded)
	require.Less(t, n, uint64(1<<30), "stopped after %d MiB, not at the end of a billion tables", n>>20)

	out, err := p.Call(context.Background(), "test_config", "{}", "{}")
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":true}`, out)
}

// A long call that builds nothing it keeps is not stopped by the heap
// guard: garbage is collected, the heap does not grow. Not parallel, for
// the same reason.
func TestHeapGuardLetsALongCallThatKeepsNothingFinish(t *testing.T) {
	b := setup(t, func(o *Options) {
		o.Limits.Instructions = 1 << 62
		o.Limits.CallTimeout = time.Minute
		o.Limits.HeapGrowthBytes = 32 << 20
	})
	out, err := b.run(t, `local x = 0 for n = 1, 2e6 do local t = {n, n, n} x = x + t[1] end return json_encode({x = x})`)
	require.NoError(t, err)
	require.Contains(t, out, `"x"`)
}
