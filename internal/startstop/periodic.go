package startstop

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/testsignal"
)

// Job is what the options of every periodic job share: its owner's
// options embed it, and hand it on to the Periodic.
type Job struct {
	// Active, when set, is asked before every round, which runs only when
	// it answers true (a leader role's IsLeader: one instance does the
	// job). A round that began goes on if the answer changes meanwhile, so
	// a job must be safe to run twice at once.
	Active func() bool
	Logger *slog.Logger
	// Tracer, when set, gives each round a span.
	Tracer trace.Tracer
	// Rounds, set by tests only, counts the ticks: each look at Active and
	// the round it then runs, if any (internal/testsignal). Nil in the
	// service.
	Rounds *testsignal.Signal
}

// PeriodicOptions configure a Periodic. Name, Interval and Round are
// required.
type PeriodicOptions struct {
	Job
	// Name is the job in the log lines: "<Name> started" (with the
	// interval and StartAttrs), "<Name> stopped", "<Name> round failed"
	// (once, until a round succeeds: "<Name> works again") and "<Name>
	// activity changed".
	Name string
	// Service, when set, is the "service" attribute of every line.
	Service string
	// Span names each round's span when Tracer is set (default: Name).
	Span string
	// Interval is the time from the end of one look at Active to the next.
	Interval time.Duration
	// Round is one run of the job; its error is logged once until a round
	// succeeds again.
	Round func(ctx context.Context) error
	// StartAttrs are the job's settings on its "started" line.
	StartAttrs []any
}

// Periodic is the shape of a leader's housekeeping (the payment trends
// fold, the idempotency key sweep, retention): a Loop that runs a round at
// once and then every Interval, each only while Active says so. The owner
// makes one in its constructor and embeds it: its Start and Stop are the
// Periodic's.
//
//	stopped ──Start──▶ running ──Stop──▶ stopped
//	                     │ at start, then every Interval:
//	                     ▼
//	   Rounds.Begin ─▶ Active? ─yes─▶ Round, under a span ─▶ Rounds.Done
type Periodic struct {
	opts PeriodicOptions
	log  *slog.Logger
	loop Loop
}

// NewPeriodic returns a stopped Periodic. A missing Name, Round or
// positive Interval is the caller's bug: the owner applies its defaults
// before.
func NewPeriodic(o PeriodicOptions) *Periodic {
	if o.Name == "" || o.Round == nil || o.Interval <= 0 {
		panic("startstop: a Periodic needs a Name, a Round and a positive Interval")
	}
	if o.Span == "" {
		o.Span = o.Name
	}
	log := cmp.Or(o.Logger, slog.Default())
	if o.Service != "" {
		log = log.With("service", o.Service)
	}
	return &Periodic{opts: o, log: log}
}

// Start runs the rounds in the background until ctx ends or Stop is
// called; ErrStarted while they run.
func (p *Periodic) Start(ctx context.Context) error {
	if err := p.loop.Start(ctx, func(ctx context.Context, _ <-chan struct{}) { p.run(ctx) }); err != nil {
		return err
	}
	p.log.Info(p.opts.Name+" started", append([]any{"interval", p.opts.Interval.String()}, p.opts.StartAttrs...)...)
	return nil
}

// Stop cancels the round in progress (the job commits or rolls back whole
// statements) and waits for it; a Periodic that was not running stays
// silent.
func (p *Periodic) Stop() {
	if p.loop.Stop() {
		p.log.Info(p.opts.Name + " stopped")
	}
}

// health is what the loop remembers between ticks, to log changes once.
type health struct{ active, failing bool }

func (p *Periodic) run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	h := health{active: true}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.tick(ctx, &h)
		t.Reset(p.opts.Interval)
	}
}

// tick looks at Active and runs a round while it says so.
func (p *Periodic) tick(ctx context.Context, h *health) {
	p.opts.Rounds.Begin()
	defer p.opts.Rounds.Done()
	active := p.opts.Active == nil || p.opts.Active()
	if active != h.active {
		h.active = active
		p.log.InfoContext(ctx, p.opts.Name+" activity changed", "active", active)
	}
	if active {
		p.round(ctx, h)
	}
}

// round runs the job under a span of its own, whose trace id its lines
// carry.
func (p *Periodic) round(ctx context.Context, h *health) {
	ctx, span := logging.BackgroundSpan(ctx, p.opts.Tracer, p.opts.Span)
	defer span.End()
	err := p.opts.Round(ctx)
	switch {
	case ctx.Err() != nil:
		// Stopping: a cancelled statement is no failure.
	case err != nil:
		span.SetStatus(codes.Error, p.opts.Name+" round failed")
		if !h.failing {
			h.failing = true
			p.log.ErrorContext(ctx, p.opts.Name+" round failed", "err", err)
		}
	case h.failing:
		h.failing = false
		p.log.InfoContext(ctx, p.opts.Name+" works again")
	}
}
