package plugin

import (
	"context"
	"errors"
	"math"
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

	err error // the limit that tripped; nil while within bounds
}

// begin arms the budget for one call (or for loading the script).
func (b *budget) begin(parent context.Context, deadline time.Time, maxSteps, maxMem int64) {
	b.parent = parent
	b.parentDone = parent.Done()
	b.deadline = deadline
	b.steps = 0
	b.maxSteps = min(maxSteps, math.MaxInt64/2) // room for steps+n without overflow
	b.checkAt = min(clockEvery, maxSteps+1)
	b.memUsed = 0
	b.memMax = maxMem
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
	b.checkAt = min(b.steps+clockEvery, b.maxSteps+1)
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
