package plugin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/metrics"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// ErrBudgetExhausted is wrapped by a CallError of kind KindBudget: the call
// ran more VM instructions (plus pattern-matching and JSON steps) than
// Limits.Instructions allows.
var ErrBudgetExhausted = errors.New("instruction budget exhausted")

// ErrMemoryExceeded is wrapped by a CallError of kind KindMemory: the strings
// the call built (and the HTTP bodies it received) would have exceeded
// Limits.MemoryBytes.
var ErrMemoryExceeded = errors.New("memory bound exceeded")

// errHeapGrowth is the memory error of a call during which the process's
// heap grew beyond Limits.HeapGrowthBytes (tables and other values the VM
// allocates, which MemoryBytes does not see).
var errHeapGrowth = fmt.Errorf("%w: the process heap grew too much during the call", ErrMemoryExceeded)

// heapEvery is how many steps pass between two looks at the process heap:
// a call that ends before it (nearly every contract call) never reads it,
// and a long loop pays a reading (about a microsecond) every millisecond or
// so.
const heapEvery = 1 << 16

// heapMetric is the live and not yet swept heap, read without stopping the
// world.
const heapMetric = "/memory/classes/heap/objects:bytes"

// clockEvery is how many steps pass between two looks at the clock. A VM
// instruction takes tens of nanoseconds, so the deadline is noticed within
// tens of microseconds without paying for time.Now on every instruction.
const clockEvery = 1024

// closedChan is what Done returns once a limit has tripped.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// budget is the context.Context installed in every LState (LState.SetContext).
// With a context set, gopher-lua's VM loop calls Done before every instruction
// and raises a Lua error when the channel it returns is closed. That makes
// Done the one hook gopher-lua offers: it counts instructions, looks at the
// clock now and then, and returns a closed channel once a limit has tripped.
//
// A tripped limit is sticky: every later instruction raises again, so a
// script that catches the error with pcall cannot carry on.
//
// One budget belongs to one state and is only touched by the goroutine
// running that state's call; host functions give outbound HTTP the caller's
// context (see state.httpContext), never this one.
type budget struct {
	parent     context.Context
	parentDone <-chan struct{}
	deadline   time.Time

	steps    int64 // instructions and Go-side steps so far
	maxSteps int64
	checkAt  int64 // steps value at which check runs next

	memUsed int64 // bytes of strings built and bodies received
	memMax  int64

	// The heap guard: the process heap when the call had run heapEvery
	// steps (heapStart, 0 before), and how far it may grow beyond it.
	heapMax    uint64
	heapStart  uint64
	heapAt     int64 // steps value of the next reading
	heapSample [1]metrics.Sample

	err error // the limit that tripped; nil while within bounds
}

// begin arms the budget for one call (or for loading the script).
func (b *budget) begin(parent context.Context, deadline time.Time, maxSteps, maxMem, maxHeapGrowth int64) {
	b.parent = parent
	b.parentDone = parent.Done()
	b.deadline = deadline
	b.steps = 0
	b.maxSteps = min(maxSteps, math.MaxInt64/2) // room for steps+n without overflow
	b.checkAt = min(clockEvery, maxSteps+1)
	b.memUsed = 0
	b.memMax = maxMem
	b.heapMax = uint64(max(maxHeapGrowth, 0))
	b.heapStart = 0
	b.heapAt = heapEvery
	b.err = nil
}

// end forgets the caller's context, so an idle pooled state keeps nothing of
// the request alive.
func (b *budget) end() {
	b.parent = nil
	b.parentDone = nil
}

func (b *budget) Deadline() (time.Time, bool) { return b.deadline, !b.deadline.IsZero() }

func (b *budget) Done() <-chan struct{} {
	b.steps++
	if b.steps >= b.checkAt {
		b.check()
	}
	if b.err != nil {
		return closedChan
	}
	return b.parentDone
}

func (b *budget) Err() error {
	if b.err != nil {
		return b.err
	}
	if b.parent != nil {
		return b.parent.Err()
	}
	return nil
}

func (b *budget) Value(key any) any {
	if b.parent == nil {
		return nil
	}
	return b.parent.Value(key)
}

func (b *budget) check() {
	if b.err != nil {
		return
	}
	if b.steps > b.maxSteps {
		b.err = ErrBudgetExhausted
		return
	}
	if !b.deadline.IsZero() && !time.Now().Before(b.deadline) {
		b.err = context.DeadlineExceeded
		return
	}
	if b.heapMax > 0 && b.steps >= b.heapAt {
		b.heapAt = b.steps + heapEvery
		if b.heapGrewTooMuch() {
			b.err = errHeapGrowth
			return
		}
	}
	b.checkAt = min(b.steps+clockEvery, b.maxSteps+1)
}

// heapGrewTooMuch reads the process heap: the first reading of a call sets
// its start; a later one above the start plus the larger of heapMax and the
// start itself trips the guard. The heap is the process's, shared by every
// call running at the time, so the bound is generous: with the default GC
// (GOGC=100) garbage alone never doubles the heap, and the floor keeps a
// small heap from tripping on ordinary growth. What it stops is a script
// that holds on to what it builds — a table of millions of tables — long
// before the instruction budget would.
func (b *budget) heapGrewTooMuch() bool {
	if b.heapSample[0].Name == "" {
		b.heapSample[0].Name = heapMetric
	}
	metrics.Read(b.heapSample[:])
	if b.heapSample[0].Value.Kind() != metrics.KindUint64 {
		return false
	}
	h := b.heapSample[0].Value.Uint64()
	if b.heapStart == 0 {
		b.heapStart = h
		return false
	}
	return h > b.heapStart+max(b.heapMax, b.heapStart)
}

// charge counts n steps of Go-side work (pattern matching, JSON) and raises
// the Lua error of a tripped limit.
func (b *budget) charge(L *lua.LState, n int64) {
	b.steps += n
	if b.steps >= b.checkAt {
		b.check()
	}
	if b.err != nil {
		L.RaiseError("%s", b.err.Error())
	}
}

// alloc records n bytes about to be allocated for the script, raising the
// memory error instead when they would exceed the bound. Callers ask before
// they build, so an oversized string is never allocated.
func (b *budget) alloc(L *lua.LState, n int64) {
	if b.err != nil {
		L.RaiseError("%s", b.err.Error())
	}
	if n < 0 || n > b.memMax-b.memUsed {
		b.err = ErrMemoryExceeded
		L.RaiseError("%s (%d bytes)", ErrMemoryExceeded.Error(), b.memMax)
	}
	b.memUsed += n
}

// remaining is how many more bytes the call may allocate.
func (b *budget) remaining() int64 { return b.memMax - b.memUsed }

// trip records a limit that a host function noticed (an HTTP request that
// ran into the call's deadline).
func (b *budget) trip(err error) {
	if b.err == nil {
		b.err = err
	}
}
