package plugin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/rustbill/paymentd/internal/outbound"
	"github.com/rustbill/paymentd/internal/text"
)

// Limits bound one contract call. Zero fields take the defaults of
// DefaultLimits.
type Limits struct {
	// CallTimeout is the deadline of one call, host HTTP time included; the
	// caller's context deadline wins when it is earlier.
	CallTimeout time.Duration
	// Instructions is the budget of Lua VM instructions per call. Pattern
	// matching and JSON encoding and decoding are charged to it as well (one
	// step per character tried, per value).
	Instructions int64
	// MemoryBytes bounds the bytes of strings one call builds (concatenation,
	// string library, table.concat, host functions) and of HTTP bodies it
	// receives, counted cumulatively. Tables are not counted here: see
	// HeapGrowthBytes and doc.go.
	MemoryBytes int64
	// HeapGrowthBytes bounds what the strings bound cannot see (tables,
	// closures, other values the VM allocates): a call that has run a
	// while is stopped, with kind memory, once the process heap has grown
	// by more than this (or by more than its size when the call began, if
	// that is larger) since. Negative turns the guard off. See doc.go.
	HeapGrowthBytes int64
	// PoolSize is how many idle states a plugin keeps for reuse (about
	// 120 KB each for the shipped plugins). It should cover the calls one
	// plugin can have at once: a busier plugin discards states after every
	// burst and builds them again at the next (sandbox, script, snapshot).
	PoolSize int
}

// DefaultLimits are the limits used for zero fields.
func DefaultLimits() Limits {
	return Limits{
		CallTimeout:  10 * time.Second,
		Instructions: 10_000_000,
		MemoryBytes:  64 << 20,
		// HeapGrowthBytes: four times the strings' allowance.
		HeapGrowthBytes: 256 << 20,
		// [server].max_concurrency (30) requests, or the worker's
		// provider calls ([events].concurrency, 16), each with a state.
		PoolSize: 32,
	}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.CallTimeout <= 0 {
		l.CallTimeout = d.CallTimeout
	}
	if l.Instructions <= 0 {
		l.Instructions = d.Instructions
	}
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.HeapGrowthBytes == 0 {
		l.HeapGrowthBytes = d.HeapGrowthBytes
	}
	if l.PoolSize <= 0 {
		l.PoolSize = d.PoolSize
	}
	return l
}

// Response is an HTTP answer as the host functions need it: the body already
// read (and bounded) by the client.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// HTTPDoer sends the requests of the http_* host functions. The request
// carries the call's context; idempotent is true for GET, for a POST
// whose options_json says "retry": true and for one carrying an
// Idempotency-Key header (outbound.Resendable), and tells the client whether it
// may send the request more than once. Outbound adapts the service's
// outbound client.
type HTTPDoer interface {
	Do(req *http.Request, idempotent bool) (*Response, error)
}

// MTLSDoer is an HTTPDoer that can also present a client certificate, for
// http_mtls: cfg carries it and identity names it (a hash of certificate,
// key and CA). Without it http_mtls raises an error.
type MTLSDoer interface {
	DoTLS(req *http.Request, idempotent bool, identity string, cfg *tls.Config) (*Response, error)
}

// HTTPDoerFunc adapts a function to HTTPDoer.
type HTTPDoerFunc func(req *http.Request, idempotent bool) (*Response, error)

func (f HTTPDoerFunc) Do(req *http.Request, idempotent bool) (*Response, error) {
	return f(req, idempotent)
}

// Outbound adapts the service's one HTTP client to HTTPDoer and MTLSDoer.
// Its errors pass unchanged, so errors.Is(err, outbound.ErrCircuitOpen)
// still holds for a plugin call that failed on an open circuit.
func Outbound(c *outbound.Client) HTTPDoer { return outboundDoer{c} }

type outboundDoer struct{ c *outbound.Client }

func (d outboundDoer) Do(req *http.Request, idempotent bool) (*Response, error) {
	return response(d.c.Do(req, idempotent))
}

func (d outboundDoer) DoTLS(req *http.Request, idempotent bool, identity string, cfg *tls.Config) (*Response, error) {
	return response(d.c.DoTLS(req, idempotent, identity, cfg))
}

func response(r *outbound.Response, err error) (*Response, error) {
	if err != nil {
		return nil, err
	}
	return &Response{Status: r.Status, Header: r.Header, Body: r.Body}, nil
}

// Options configure a Runtime.
type Options struct {
	// HTTP sends the host functions' requests; without it they raise an error.
	HTTP HTTPDoer
	// Logger receives log() and print() lines; nil discards them.
	Logger *slog.Logger
	Limits Limits
	// Now is the clock behind now(); nil means time.Now.
	Now func() time.Time
}

// Runtime loads compiled scripts into pools of sandboxed states.
type Runtime struct {
	env *env
}

func NewRuntime(o Options) *Runtime {
	return &Runtime{env: newEnv(o)}
}

// Load makes a Plugin of a compiled Script. States are created from the
// script's compiled function prototype when a call needs one and no idle
// state is left; up to Limits.PoolSize idle states are kept. The plugin
// holds the prototype from its first call (compiled again then if nothing
// held it since Compile) until Close.
func (r *Runtime) Load(s *Script) *Plugin {
	return &Plugin{env: r.env, script: s}
}

// Plugin runs the contract functions of one script. It is safe for
// concurrent use: each call has a state of its own.
type Plugin struct {
	env    *env
	script *Script

	mu     sync.Mutex
	idle   []*state
	closed bool
	// proto is the compiled script its states run, held from the first
	// state made until Close (Script.prototype): every state of the plugin
	// shares it, and a call that fails and loses the last idle state does
	// not make the next compile the script again. A plugin never called
	// holds none.
	proto *lua.FunctionProto
}

// Script returns the compiled script the plugin runs.
func (p *Plugin) Script() *Script { return p.script }

// ErrorKind classifies a failed call.
type ErrorKind string

const (
	KindScriptError ErrorKind = "script_error" // error(), a runtime error, a host function failure
	KindTimeout     ErrorKind = "timeout"      // the call's deadline passed or its context was cancelled
	KindBudget      ErrorKind = "budget"       // the instruction budget ran out
	KindMemory      ErrorKind = "memory"       // the memory bound would have been exceeded
	KindBadResult   ErrorKind = "bad_result"   // the function did not return one JSON string
)

// CallError is the error of a failed call. Message is for logs and the
// plugin's last error, never for customers as-is. Err, when set, is the cause
// (context.DeadlineExceeded, ErrBudgetExhausted, ErrMemoryExceeded, or the
// error an HTTP host function received — so errors.Is(err,
// outbound.ErrCircuitOpen) holds for a call that failed on an open circuit).
type CallError struct {
	Plugin   string
	Function string
	Kind     ErrorKind
	Message  string
	Err      error
}

func (e *CallError) Error() string {
	return fmt.Sprintf("plugin %s: %s: %s: %s", e.Plugin, e.Function, e.Kind, e.Message)
}

func (e *CallError) Unwrap() error { return e.Err }

var (
	// ErrUnknownFunction: Call was asked for a function outside the contract.
	ErrUnknownFunction = errors.New("not a contract function of this plugin")
	// ErrClosed: Call after Close.
	ErrClosed = errors.New("plugin closed")
)

// Call runs fn(configJSON, inputJSON) and returns the string it returns. The
// call's deadline is the earlier of ctx's and Limits.CallTimeout; it runs
// under the instruction and memory limits on a state no other call uses. A
// state whose call failed in any way is discarded, never reused.
func (p *Plugin) Call(ctx context.Context, fn string, configJSON, inputJSON string) (string, error) {
	if !p.script.params[fn] {
		return "", p.fail(fn, KindScriptError, ErrUnknownFunction.Error(), ErrUnknownFunction)
	}
	if err := ctx.Err(); err != nil {
		return "", p.fail(fn, KindTimeout, err.Error(), err)
	}
	s, err := p.get()
	if err != nil { // closed, or the script failed to load into a new state
		return "", p.fail(fn, KindScriptError, err.Error(), err)
	}
	out, cerr := s.call(ctx, fn, configJSON, inputJSON)
	if cerr != nil {
		s.close()
		return "", cerr
	}
	p.put(s)
	return out, nil
}

// Close discards the idle states; calls in flight finish and discard theirs.
func (p *Plugin) Close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.closed = true
	p.proto = nil
	p.mu.Unlock()
	for _, s := range idle {
		s.close()
	}
}

func (p *Plugin) fail(fn string, kind ErrorKind, msg string, err error) *CallError {
	return &CallError{Plugin: p.script.name, Function: fn, Kind: kind, Message: msg, Err: err}
}

func (p *Plugin) get() (*state, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if n := len(p.idle); n > 0 {
		s := p.idle[n-1]
		p.idle[n-1] = nil // the array must not keep a state the call may discard
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return s, nil
	}
	proto := p.proto
	p.mu.Unlock()
	if proto == nil {
		var err error
		if proto, err = p.script.prototype(); err != nil {
			return nil, err
		}
		p.mu.Lock()
		if !p.closed {
			p.proto = proto
		}
		p.mu.Unlock()
	}
	return newState(p.env, p.script, proto)
}

func (p *Plugin) put(s *state) {
	if s.restore() {
		p.mu.Lock()
		if !p.closed && len(p.idle) < p.env.limits.PoolSize {
			p.idle = append(p.idle, s)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
	s.close()
}

// call runs one contract function on s.
func (s *state) call(ctx context.Context, fn, configJSON, inputJSON string) (string, *CallError) {
	lim := s.env.limits
	deadline := time.Now().Add(lim.CallTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	s.ctx, s.fn, s.deadline = ctx, fn, deadline
	s.globalsDirty, s.hostErr, s.logs = false, nil, 0
	s.budget.begin(ctx, deadline, lim.Instructions, lim.MemoryBytes, lim.HeapGrowthBytes)
	defer s.endCall()

	L := s.L
	L.SetTop(0)
	L.Push(s.fns[fn])
	L.Push(lua.LString(configJSON))
	L.Push(lua.LString(inputJSON))
	err := L.PCall(2, lua.MultRet, nil)

	fail := func(kind ErrorKind, msg string, cause error) (string, *CallError) {
		return "", &CallError{Plugin: s.script.name, Function: fn, Kind: kind, Message: msg, Err: cause}
	}
	if berr := s.budget.err; berr != nil {
		switch {
		case errors.Is(berr, ErrBudgetExhausted):
			return fail(KindBudget, fmt.Sprintf("%s (%d instructions)", berr, lim.Instructions), berr)
		case errors.Is(berr, errHeapGrowth):
			return fail(KindMemory, fmt.Sprintf("%s (more than %d bytes)", berr, lim.HeapGrowthBytes), berr)
		case errors.Is(berr, ErrMemoryExceeded):
			return fail(KindMemory, fmt.Sprintf("%s (%d bytes)", berr, lim.MemoryBytes), berr)
		default:
			return fail(KindTimeout, "call deadline passed", berr)
		}
	}
	if err != nil {
		msg := luaErrorMessage(err)
		if cerr := ctx.Err(); cerr != nil {
			return fail(KindTimeout, cerr.Error(), cerr)
		}
		if !time.Now().Before(deadline) {
			return fail(KindTimeout, "call deadline passed: "+msg, context.DeadlineExceeded)
		}
		return fail(KindScriptError, msg, s.hostErr)
	}

	if n := L.GetTop(); n != 1 {
		return fail(KindBadResult, fmt.Sprintf("returned %d values, want one JSON string", n), nil)
	}
	ret := L.Get(1)
	// Raise the top over the slots a call normally uses and drop it again:
	// gopher-lua nils the slots in between, so an idle state does not keep
	// the last call's arguments (config secrets), decoded input or strings
	// alive. Deeper slots are overwritten by the next call.
	L.SetTop(clearSlots)
	L.SetTop(0)
	out, ok := ret.(lua.LString)
	if !ok {
		return fail(KindBadResult, fmt.Sprintf("returned a %s, want a JSON string", ret.Type()), nil)
	}
	// admin_page may return plain text; every contract function returns JSON.
	if fn != AdminPage && !validJSON(string(out)) {
		return fail(KindBadResult, "returned a string that is not JSON: "+text.Clip(string(out), 80), nil)
	}
	return string(out), nil
}

func (s *state) endCall() {
	if s.httpCancel != nil {
		s.httpCancel()
		s.httpCancel, s.httpCtx = nil, nil
	}
	s.budget.end()
	s.ctx = nil
	s.hostErr = nil
	s.json.release()
}
