package payment

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

// DefaultTrendFoldInterval is how often the trends' changes are folded:
// what waits for a fold is what every GetPaymentTrends reads beside the
// rollup, so it stays a few seconds' worth of writes.
const DefaultTrendFoldInterval = 2 * time.Second

// TrendFoldOptions configure a TrendFolder; zero fields take the defaults.
type TrendFoldOptions struct {
	// Interval is the time between folds (DefaultTrendFoldInterval).
	Interval time.Duration
	// Active, when set, is asked before every fold, which runs only when
	// it answers true (internal/app: the event_worker elector's IsLeader,
	// so one instance folds). Two folds at once are safe: the second finds
	// the first's advisory lock and moves nothing.
	Active func() bool
	Logger *slog.Logger
	// Tracer, when set, gives each fold a span.
	Tracer trace.Tracer
	// Rounds, set by tests only, counts the ticks: each look at Active and
	// the fold it then runs, if any (internal/testsignal).
	Rounds *testsignal.Signal
}

// TrendFolder is the background service that moves the trends' changes
// into their rollup (payment_trends_fold; docs/decisions.md, "trends
// rollup"). Readers add the unfolded changes, so folding only keeps
// GetPaymentTrends fast: a fold that fails or does not run loses nothing.
type TrendFolder struct {
	db       store.DB
	periodic *startstop.Periodic
	log      *slog.Logger
	interval time.Duration
}

// NewTrendFolder returns a stopped TrendFolder over db.
func NewTrendFolder(db store.DB, o TrendFoldOptions) *TrendFolder {
	if o.Interval <= 0 {
		o.Interval = DefaultTrendFoldInterval
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	f := &TrendFolder{db: db, log: log.With("service", "trends_fold"), interval: o.Interval}
	f.periodic = startstop.NewPeriodic(startstop.PeriodicOptions{
		Name: "payment trends fold", Span: "payment.trends_fold", Interval: o.Interval,
		Active: o.Active, Round: f.round, Logger: f.log, Tracer: o.Tracer, Rounds: o.Rounds,
	})
	return f
}

// Start folds at once and then every Interval while Active, until ctx
// ends or Stop is called.
func (f *TrendFolder) Start(ctx context.Context) error {
	if err := f.periodic.Start(ctx); err != nil {
		return err
	}
	f.log.Info("payment trends fold started", "interval", f.interval.String())
	return nil
}

// Stop ends the folds; one in progress is cancelled and rolls back whole.
func (f *TrendFolder) Stop() {
	if f.periodic.Stop() {
		f.log.Info("payment trends fold stopped")
	}
}

// round is one fold, its count on the round's span.
func (f *TrendFolder) round(ctx context.Context) error {
	moved, err := store.FoldPaymentTrends(ctx, f.db)
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int64("trends.changes_folded", moved))
	return err
}
