package idempotency

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testsignal"
)

// Defaults of SweepOptions: expired keys are ignored at once (the
// interceptor checks expires_at), so the sweep only bounds the table and
// need not run often; a statement deletes at most a thousand, so a sweep
// never holds many locks.
const (
	DefaultSweepInterval  = 10 * time.Minute
	DefaultSweepBatchSize = 1000
)

// SweepOptions configure a Sweeper; zero fields take the defaults.
type SweepOptions struct {
	// Interval is the time between sweeps (DefaultSweepInterval).
	Interval time.Duration
	// BatchSize bounds the keys one statement deletes
	// (DefaultSweepBatchSize); a sweep runs statements until one deletes
	// fewer.
	BatchSize int
	// Clock is what "expired" is measured from (default time.Now): the
	// interceptor's clock.
	Clock func() time.Time
	// Active, when set, is asked before every sweep, which runs only when
	// it answers true (internal/app: the event_worker elector's IsLeader,
	// so one instance sweeps). Two sweeps at once only delete the same
	// expired rows.
	Active func() bool
	Logger *slog.Logger
	// Tracer, when set, gives each sweep a span.
	Tracer trace.Tracer
	// Rounds, set by tests only, counts the ticks: each look at Active and
	// the sweep it then runs, if any (internal/testsignal).
	Rounds *testsignal.Signal
}

// Sweeper is the background service that deletes the expired keys.
type Sweeper struct {
	db       store.DB
	opts     SweepOptions
	log      *slog.Logger
	periodic *startstop.Periodic
}

// NewSweeper returns a stopped Sweeper over db.
func NewSweeper(db store.DB, o SweepOptions) *Sweeper {
	if o.Interval <= 0 {
		o.Interval = DefaultSweepInterval
	}
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultSweepBatchSize
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Sweeper{db: db, opts: o, log: log.With("service", "idempotency_sweep")}
	s.periodic = startstop.NewPeriodic(startstop.PeriodicOptions{
		Name: "idempotency key sweep", Span: "idempotency.sweep", Interval: o.Interval,
		Active: o.Active, Round: s.round, Logger: s.log, Tracer: o.Tracer, Rounds: o.Rounds,
	})
	return s
}

// Start sweeps at once and then every Interval while Active, until ctx
// ends or Stop is called.
func (s *Sweeper) Start(ctx context.Context) error {
	if err := s.periodic.Start(ctx); err != nil {
		return err
	}
	s.log.Info("idempotency key sweep started", "interval", s.opts.Interval.String(), "batch_size", s.opts.BatchSize)
	return nil
}

// Stop ends the sweeps; a statement in progress is cancelled and rolls
// back whole.
func (s *Sweeper) Stop() {
	if s.periodic.Stop() {
		s.log.Info("idempotency key sweep stopped")
	}
}

// RunOnce deletes every key expired by now, BatchSize per statement, and
// says how many went.
func (s *Sweeper) RunOnce(ctx context.Context) (int64, error) {
	now := s.opts.Clock()
	var swept int64
	for {
		n, err := store.SweepIdempotencyKeys(ctx, s.db, now, int32(s.opts.BatchSize))
		swept += n
		if err != nil || n < int64(s.opts.BatchSize) {
			return swept, err
		}
	}
}

// round is one sweep, its count on the round's span.
func (s *Sweeper) round(ctx context.Context) error {
	swept, err := s.RunOnce(ctx)
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int64("idempotency.keys_swept", swept))
	return err
}
