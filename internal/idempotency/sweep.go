package idempotency

import (
	"cmp"
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
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
	// Job: Active is the event_worker elector's IsLeader in internal/app,
	// so one instance sweeps; two sweeps at once only delete the same
	// expired rows.
	startstop.Job
}

// Sweeper is the background service that deletes the expired keys.
type Sweeper struct {
	*startstop.Periodic
	db   store.DB
	opts SweepOptions
}

// NewSweeper returns a stopped Sweeper over db.
func NewSweeper(db store.DB, o SweepOptions) *Sweeper {
	o.Interval = cmp.Or(max(o.Interval, 0), DefaultSweepInterval)
	o.BatchSize = cmp.Or(max(o.BatchSize, 0), DefaultSweepBatchSize)
	if o.Clock == nil {
		o.Clock = time.Now
	}
	s := &Sweeper{db: db, opts: o}
	s.Periodic = startstop.NewPeriodic(startstop.PeriodicOptions{
		Job: o.Job, Name: "idempotency key sweep", Service: "idempotency_sweep", Span: "idempotency.sweep", Interval: o.Interval,
		Round: s.round, StartAttrs: []any{"batch_size", o.BatchSize},
	})
	return s
}

// RunOnce deletes every key expired by now, BatchSize per statement, and
// says how many went.
func (s *Sweeper) RunOnce(ctx context.Context) (int64, error) {
	now := s.opts.Clock()
	var swept int64
	for {
		n, err := store.Q(s.db).SweepIdempotencyKeys(ctx, store.SweepIdempotencyKeysParams{
			SweptBefore: now, RowLimit: int32(s.opts.BatchSize),
		})
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
