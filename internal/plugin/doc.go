// Package plugin runs the Lua scripts — gateways, notifiers, providers — that
// are the one place where code written outside this repository touches
// money. The runtime is meant to be safe, fast and boring: a script can
// compute, sign, encode and call out over HTTP through the host functions
// of docs/plugins.md, and nothing else; a broken or hostile script fails its
// own call with a typed error and leaves the process, the other calls and
// the other plugins alone.
//
// # Compile, load, call
//
// Compile parses a script once (yuin/gopher-lua, Lua 5.1), rewrites it (see
// "Strings" below), compiles it to a function prototype, runs it in a fresh
// sandbox and checks its contract: every function of its type exists and
// declares exactly two parameters, admin_page (optional) none or two, version()
// returns a semantic version ("0.0.0" when absent). The error names the
// function or the line. A Script is immutable.
//
// Runtime.Load makes a Plugin: a pool of sandboxed states, each built from
// the script's prototype when a call finds no idle one. The prototype is
// kept only while something runs it (the plugin, from its first call until
// Close): a script nothing calls keeps its source, and its first call
// compiles that again (a few milliseconds, once).
// Plugin.Call borrows a state, so concurrent calls never share one:
//
//	Call ──▶ idle state? ──no──▶ new state: sandbox + run the prototype + snapshot _G
//	           │ yes                    │
//	           ▼                        ▼
//	        fn(config_json, input_json) under the budget
//	           │
//	           ├── failed (error, timeout, budget, memory, bad result) ──▶ discarded
//	           ├── created a global ──────────────────────────────────▶ discarded
//	           └── clean ──▶ _G restored from the snapshot ──▶ idle (up to PoolSize, else discarded)
//
// A call's error is a *CallError of kind script_error, timeout, budget,
// memory or bad_result. Its Message goes to logs and the plugin's last error,
// never to a customer. When an HTTP host function failed during the call,
// the CallError wraps that error, so errors.Is(err, outbound.ErrCircuitOpen)
// tells an open circuit (Unavailable) from a script failure (Internal).
//
// # The sandbox
//
// Libraries are opened one by one (SkipOpenLibs), never all: base, string,
// table and math. Not opened: os, io, debug, package (require, module),
// coroutine, channel. Removed from base: dofile, loadfile, load, loadstring
// (no code but the compiled script runs), collectgarbage, getfenv and
// setfenv (no swapping another function's environment), newproxy,
// _printregs; print logs instead of writing to stdout. Removed from string:
// dump, gfind; math.randomseed is gone (it reseeds the whole process).
//
// Nothing of one call may be visible to the next call on the same state:
//
//   - The string metatable is a table of its own whose __metatable is false:
//     getmetatable("") answers false, so getmetatable("").__index (the table
//     every ("x"):method() call reads) can be neither reached nor rewritten.
//   - string, table and math are empty read-only proxies over the real
//     libraries: assigning string.rep raises an error, and so do rawset,
//     table.insert and table.remove on them; their metatables are hidden.
//   - setmetatable takes tables only (gopher-lua's would set the metatable
//     shared by every number or boolean of the state).
//   - _G is snapshotted after loading. After a clean call every global is
//     compared with the snapshot and reset where it differs (md5 = nil, a
//     replaced json_encode). A call that created a global (noticed by _G's
//     hidden __newindex, and by rawset, table.insert… on _G) loses its
//     state: gopher-lua tables never forget a key, so cleaning in place
//     would let the state grow with every call.
//   - Not reset: values the script itself keeps in module-level locals
//     (upvalues) and the contents of its own tables. A script can keep a
//     cache on purpose, as in any Lua host; the contract says a function's
//     answer depends on its two arguments, and the shipped plugins keep no
//     state. Re-running the prototype per call would reset those too, at the
//     price of every closure and table of the script on every call.
//
// # What is bounded, and how
//
// gopher-lua has neither an instruction hook nor an allocator hook. What it
// has is LState.SetContext: with a context set, its VM calls ctx.Done()
// before every instruction. Each state's context is a budget (budget.go)
// whose Done counts instructions, looks at the clock every 1024 steps and
// returns a closed channel once a limit has tripped. A tripped limit is
// sticky — every later instruction raises again — so pcall cannot swallow
// it. Per call (Limits):
//
//   - Time: CallTimeout (default 10 s), or the caller's earlier deadline,
//     host HTTP included: requests carry the caller's context with the
//     call's deadline (and options_json's timeout_ms). Cancelling the
//     caller's context stops the VM at the next instruction.
//   - Instructions: Limits.Instructions VM instructions (default 10 million,
//     about 0.1 s of tight loop). Go-side work that a single instruction can
//     start is charged to the same budget: each character the pattern
//     matcher tries, each JSON value, elements moved by table.insert/remove
//     at a position and by table.sort.
//   - Strings: Limits.MemoryBytes (default 64 MiB) is a per-call allowance
//     for the bytes of strings the script builds and of HTTP bodies it
//     receives, counted cumulatively and asked for before the string is
//     built — string.rep("x", 2^30) or `s = s .. s` fail with kind memory
//     having allocated almost nothing. Every builder goes through it: the
//     `..` operator (rewritten at compile time into a call of a hidden local,
//     since the VM concatenates without a hook), string.rep, format, gsub,
//     upper, lower, reverse, char, table.concat, json_encode/json_decode,
//     base64, urlencode, the hash functions and the HTTP functions. Go's own
//     buffers may briefly hold up to twice the allowance.
//   - Pattern matching is this package's own (pattern.go, Lua 5.1
//     semantics): recursion per pattern item, at most 200 deep; gmatch and
//     gsub produce matches one at a time. gopher-lua's matcher recursed once
//     per subject character, could backtrack for hours inside one
//     instruction, and collected every match ahead.
//   - Stacks: 200 Lua frames; 65,536 value-stack slots (unpack of a huge
//     table or string.byte(s, 1, -1) fail cleanly); JSON nesting 200.
//   - Logging: 100 lines per call, 2 KiB per line.
//   - Source: 1 MiB per script.
//
// Not bounded by MemoryBytes: tables, closures and the other values the
// VM allocates itself — gopher-lua has no allocator hook. Two things bound
// them. First a trick is closed: gopher-lua stores t[k] in a Go slice for k
// below its MaxArrayIndex and fills the gap before k with nils, so
// t[60000000] = 1 allocated a gigabyte in one instruction; this package
// lowers MaxArrayIndex (process-wide, once, in init: it is the only user of
// gopher-lua in paymentd) to 2^20, so one assignment fills at most 16 MiB;
// larger keys go to the hash part, where # does not see them, and
// json_decode refuses arrays that long. Then the heap guard
// (Limits.HeapGrowthBytes, default 256 MiB): every 65,536 steps a call
// reads the process heap (runtime/metrics, no stop-the-world), and once it
// has grown since the call's first reading by more than the guard (or by
// more than the heap's size at that reading, if larger) the call stops with
// kind memory. A contract call rarely runs that many steps, so it costs
// nothing there. The heap is the process's: while a runaway script eats
// memory, another long call running at the same time may be stopped too,
// which is the point — the service keeps its memory. Plugins are code an
// administrator installs, not customer input: the sandbox keeps them off
// the machine and keeps mistakes (endless loops, runaway strings and
// tables, deep recursion) from hurting the service; the process memory
// limit (GOMEMLIMIT, cgroup) stays the last backstop.
//
// # Host functions and HTTP
//
// The host functions proper — log and the HTTP functions, a script's only way
// out — take at most five arguments, strings or nil, and answer a string or
// nothing, as the API contract requires (docs/api.md, "Plugin contract"). The
// data helpers (hashes, encodings, now) take and answer strings too, except
// json_encode (any value in), json_decode and parse_query (a table out), the
// shared helpers of helpers.go that every shipped plugin used to write for itself
// (str, snippet and json_table take any value, form_encode a table), and the
// signing helpers of crypto.go, whose verdicts are booleans (or nil for a text
// that does not decrypt). Those parse RSA keys once per runtime, in a small
// cache keyed by the key text's hash, and charge private-key operations to the
// budget by key size. A wrong count or type raises a Lua error naming the
// function and the argument. HTTP goes through Options.HTTP, an HTTPDoer that
// the service's one outbound client satisfies (Outbound): idempotent is true for
// GET and for any other method whose options_json says "retry": true or that
// carries an Idempotency-Key header (outbound.Resendable), and false otherwise —
// a payment creation or a refund is never sent twice blindly. http_mtls goes
// through it too (MTLSDoer): the certificate from request_json is presented on a
// transport the client keeps per certificate, under the host's circuit breaker,
// the same retry rule and the same bounds; no redirect is followed. HTTP
// functions are refused while a script loads.
package plugin
