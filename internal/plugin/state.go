package plugin

import (
	"context"
	"fmt"
	"log/slog"
	"math/bits"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// Sizes of a state's value stack and call stack. A contract function needs a
// few hundred slots and a recursion depth in the tens; these bounds let
// ordinary code run and stop `unpack` of a huge table or runaway recursion.
const (
	callStackSize    = 200 // Lua frames, Lua 5.1's own C-call limit
	registrySize     = 1024
	registryGrowStep = 1024
	registryMaxSize  = 64 * 1024 // value slots (16 bytes each): 1 MiB
	clearSlots       = 64        // value slots cleared after each call: arguments and the contract function's locals
)

// maxArrayIndex replaces gopher-lua's MaxArrayIndex (64M). gopher-lua stores
// t[k] for 1 <= k < MaxArrayIndex in a Go slice and fills any gap before k
// with nils one by one, so with the default `t[60000000] = 1` allocates a
// gigabyte in a single instruction. With 2^20 one assignment allocates at
// most 16 MiB; larger integer keys go to the hash part, where `#` does not
// see them (json_decode refuses such arrays rather than return them broken).
const maxArrayIndex = 1 << 20

func init() {
	// Process-wide, set once before any state exists: this package is the
	// only user of gopher-lua in paymentd.
	lua.MaxArrayIndex = maxArrayIndex
}

// baseAllowed are the base-library globals a script keeps. Everything else
// gopher-lua's base library defines is removed: dofile, loadfile, load,
// loadstring (code from strings or files), require and module (the package
// library), collectgarbage, getfenv/setfenv (environment swapping), newproxy,
// _printregs, and print (replaced by one that logs).
var baseAllowed = map[string]bool{
	"_G": true, "_VERSION": true, "assert": true, "error": true, "getmetatable": true,
	"ipairs": true, "next": true, "pairs": true, "pcall": true, "rawequal": true,
	"rawget": true, "select": true, "setmetatable": true, "tonumber": true,
	"tostring": true, "type": true, "unpack": true, "xpcall": true,
}

// env is what every state of a runtime shares.
type env struct {
	limits Limits
	logger *slog.Logger
	now    func() time.Time
	http   HTTPDoer
	keys   *keyCache // parsed RSA keys, shared by the runtime's plugins
}

func newEnv(o Options) *env {
	e := &env{limits: o.Limits.withDefaults(), logger: o.Logger, now: o.Now, http: o.HTTP, keys: newKeyCache()}
	if e.logger == nil {
		e.logger = discardLogger
	}
	if e.now == nil {
		e.now = time.Now
	}
	return e
}

// state is one sandboxed LState with the script loaded. It runs one call at a
// time; the pool hands it to one goroutine at a time.
type state struct {
	env    *env
	script *Script
	L      *lua.LState
	budget budget

	globals  *lua.LTable
	readonly [3]*lua.LTable // the string, table and math proxies
	snapshot []globalEntry  // _G as loading left it
	fns      map[string]*lua.LFunction
	concat   *lua.LFunction

	// per call
	ctx          context.Context // the caller's context; nil while loading
	fn           string
	deadline     time.Time
	globalsDirty bool  // a global was created: the state is not reused
	hostErr      error // last error of an HTTP host function
	httpCtx      context.Context
	httpCancel   context.CancelFunc
	logs         int

	json     jsonEncoder
	matchers []*matcher // free list; gsub calls back into Lua, which may match again
}

type globalEntry struct {
	key   lua.LValue
	skey  string
	isStr bool
	val   lua.LValue
}

// newState builds a sandboxed LState and runs proto, sc's compiled chunk,
// in it under the limits of a call. A failure is a *CompileError.
func newState(e *env, sc *Script, proto *lua.FunctionProto) (*state, error) {
	s := &state{env: e, script: sc}
	s.json.s = s
	s.L = lua.NewState(lua.Options{
		SkipOpenLibs:     true,
		CallStackSize:    callStackSize,
		RegistrySize:     registrySize,
		RegistryGrowStep: registryGrowStep,
		RegistryMaxSize:  registryMaxSize,
	})
	s.budget.begin(context.Background(), time.Now().Add(e.limits.CallTimeout), e.limits.Instructions, e.limits.MemoryBytes, e.limits.HeapGrowthBytes)
	s.L.SetContext(&s.budget)
	if err := s.openSandbox(); err != nil {
		s.L.Close()
		return nil, &CompileError{Plugin: sc.name, Message: "building the sandbox: " + err.Error()}
	}
	s.L.Push(s.L.NewFunctionFromProto(proto))
	s.L.Push(s.concat)
	err := s.L.PCall(1, 0, nil)
	s.budget.end()
	if err != nil {
		s.L.Close()
		msg := luaErrorMessage(err)
		if s.budget.err != nil {
			msg = "loading: " + s.budget.err.Error()
		}
		line := runtimeLine(sc.name, msg)
		if line > 0 { // "name:12: message" → line 12, "message"
			msg = strings.TrimPrefix(msg, fmt.Sprintf("%s:%d: ", sc.name, line))
		}
		return nil, &CompileError{Plugin: sc.name, Line: line, Message: msg}
	}
	s.L.SetTop(0)

	// From here on a new global marks the state dirty (see newGlobal), and
	// the globals the script defined become the snapshot restored after
	// every call.
	gmt := s.L.NewTable()
	gmt.RawSetString("__newindex", s.L.NewFunction(s.newGlobal))
	gmt.RawSetString("__metatable", lua.LFalse)
	s.globals.Metatable = gmt
	s.globals.ForEach(func(k, v lua.LValue) {
		ge := globalEntry{key: k, val: v}
		if ks, ok := k.(lua.LString); ok {
			ge.skey, ge.isStr = string(ks), true
		}
		s.snapshot = append(s.snapshot, ge)
	})
	s.fns = make(map[string]*lua.LFunction, len(sc.params))
	for name := range sc.params {
		if fn, ok := s.globals.RawGetString(name).(*lua.LFunction); ok {
			s.fns[name] = fn
		}
	}
	return s, nil
}

func (s *state) close() {
	if s.httpCancel != nil {
		s.httpCancel()
	}
	s.L.Close()
}

// openSandbox opens base, table, string and math, keeps the safe parts and
// installs the guarded replacements and the host functions.
func (s *state) openSandbox() (err error) {
	L := s.L
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
	} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	g := L.Get(lua.GlobalsIndex).(*lua.LTable)
	s.globals = g
	origString := g.RawGetString("string").(*lua.LTable)
	origTable := g.RawGetString("table").(*lua.LTable)
	origMath := g.RawGetString("math").(*lua.LTable)
	origRawset := g.RawGetString("rawset").(*lua.LFunction).GFunction
	origSetmetatable := g.RawGetString("setmetatable").(*lua.LFunction).GFunction

	var drop []string
	g.ForEach(func(k, _ lua.LValue) {
		if ks, ok := k.(lua.LString); !ok || !baseAllowed[string(ks)] {
			drop = append(drop, k.String())
		}
	})
	for _, k := range drop {
		g.RawSetString(k, lua.LNil)
	}
	g.RawSetString("rawset", L.NewFunction(func(L *lua.LState) int {
		s.guardWrite(L, L.CheckTable(1), "rawset")
		return origRawset(L)
	}))
	// gopher-lua's setmetatable accepts any value and then sets the
	// metatable shared by all numbers (or booleans, functions…) of the
	// state, which would outlive the call. Lua 5.1 takes tables only.
	g.RawSetString("setmetatable", L.NewFunction(func(L *lua.LState) int {
		L.CheckTable(1)
		return origSetmetatable(L)
	}))
	g.RawSetString("print", L.NewFunction(s.luaPrint))

	// string: byte, len and sub only slice or read; everything that builds a
	// string or runs the pattern matcher is replaced by a bounded version.
	// dump and gfind are not carried over.
	strlib := L.NewTable()
	for _, name := range []string{"byte", "len", "sub"} {
		strlib.RawSetString(name, origString.RawGetString(name))
	}
	for name, fn := range map[string]lua.LGFunction{
		"char": s.strChar, "find": s.strFind, "format": s.strFormat, "gmatch": s.strGmatch,
		"gsub": s.strGsub, "lower": s.strLower, "match": s.strMatch, "rep": s.strRep,
		"reverse": s.strReverse, "upper": s.strUpper,
	} {
		strlib.RawSetString(name, L.NewFunction(fn))
	}
	// The metatable of strings gets its own table whose __metatable hides it:
	// getmetatable("") is false, so `getmetatable("").__index` cannot reach
	// (and rewrite) the functions every string method call goes through.
	strmt := L.NewTable()
	strmt.RawSetString("__index", strlib)
	strmt.RawSetString("__metatable", lua.LFalse)
	L.SetMetatable(lua.LString(""), strmt)

	tablib := L.NewTable()
	for _, name := range []string{"getn", "maxn"} {
		tablib.RawSetString(name, origTable.RawGetString(name))
	}
	// insert, remove and sort write tables raw (guardWrite) and, at a
	// position or over the whole table, move elements inside one VM
	// instruction: that work is charged to the budget, one step per 8
	// elements moved (n log n for a sort), so a loop of table.insert(t, 1, v)
	// cannot run quadratic work unseen.
	for _, name := range []string{"insert", "remove", "sort"} {
		orig := origTable.RawGetString(name).(*lua.LFunction).GFunction
		fname := "table." + name
		tablib.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
			t := L.CheckTable(1)
			s.guardWrite(L, t, fname)
			n := int64(t.Len())
			switch {
			case fname == "table.sort":
				s.budget.charge(L, n*int64(bits.Len64(uint64(n)))/8)
			case fname == "table.insert" && L.GetTop() >= 3, fname == "table.remove" && L.GetTop() >= 2:
				s.budget.charge(L, max(n-int64(L.CheckInt(2)), 0)/8)
			}
			return orig(L)
		}))
	}
	tablib.RawSetString("concat", L.NewFunction(s.tableConcat))

	mathlib := L.NewTable()
	origMath.ForEach(func(k, v lua.LValue) {
		if k.String() != "randomseed" { // reseeding is process-wide
			mathlib.RawSet(k, v)
		}
	})

	for i, lib := range []struct {
		name string
		tab  *lua.LTable
	}{{"string", strlib}, {"table", tablib}, {"math", mathlib}} {
		s.readonly[i] = s.readonlyProxy(lib.name, lib.tab)
		g.RawSetString(lib.name, s.readonly[i])
	}

	for _, h := range hostFunctions {
		g.RawSetString(h.name, L.NewFunction(s.hostFunction(h)))
	}
	s.concat = L.NewFunction(s.luaConcat)
	return nil
}

// readonlyProxy returns an empty table reading through to lib and refusing
// writes, with a hidden metatable. A script can therefore not replace
// string.rep (or anything else) for the calls that follow on this state.
func (s *state) readonlyProxy(name string, lib *lua.LTable) *lua.LTable {
	L := s.L
	proxy := L.NewTable()
	mt := L.NewTable()
	mt.RawSetString("__index", lib)
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("%s is read-only", name)
		return 0
	}))
	mt.RawSetString("__metatable", lua.LFalse)
	proxy.Metatable = mt
	return proxy
}

// guardWrite stops the Go functions that write tables raw (rawset,
// table.insert/remove/sort) from editing a library proxy, and notes a raw
// write to _G, which the __newindex hook would not see.
func (s *state) guardWrite(L *lua.LState, t *lua.LTable, fname string) {
	if t == s.globals {
		s.globalsDirty = true
		return
	}
	for _, ro := range s.readonly {
		if t == ro {
			L.RaiseError("%s: the standard library is read-only", fname)
		}
	}
}

// newGlobal is _G's __newindex: creating a global is allowed during a call,
// but the state is then not reused (see restore).
func (s *state) newGlobal(L *lua.LState) int {
	s.globalsDirty = true
	L.CheckTable(1).RawSet(L.Get(2), L.Get(3))
	return 0
}

// restore puts _G back as loading left it, so nothing a call wrote to a
// global is visible to the next call. It reports false when the state must
// be discarded instead: the call created globals, and gopher-lua tables never
// forget a key once set, so cleaning them up in place would let a state grow
// a little with every call.
func (s *state) restore() bool {
	if s.globalsDirty || s.globals.Metatable == lua.LNil {
		return false
	}
	g := s.globals
	for i := range s.snapshot {
		e := &s.snapshot[i]
		if e.isStr {
			if g.RawGetString(e.skey) != e.val {
				g.RawSetString(e.skey, e.val)
			}
		} else if g.RawGet(e.key) != e.val {
			g.RawSet(e.key, e.val)
		}
	}
	return true
}
