package payment

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
)

// DefaultTrendFoldInterval is how often the trends' changes are folded:
// what waits for a fold is what every GetPaymentTrends reads beside the
// rollup, so it stays a few seconds' worth of writes.
const DefaultTrendFoldInterval = 2 * time.Second

// TrendFoldOptions configure a TrendFolder; zero fields take the defaults.
type TrendFoldOptions struct {
	// Interval is the time between folds (DefaultTrendFoldInterval).
	Interval time.Duration
	// Job: Active is the event_worker elector's IsLeader in internal/app,
	// so one instance folds. Two folds at once are safe: the second finds
	// the first's advisory lock and moves nothing.
	startstop.Job
}

// TrendFolder is the background service that moves the trends' changes
// into their rollup (payment_trends_fold; docs/decisions.md, "trends
// rollup"), and the recurring revenue's into theirs (mrr_fold; "recurring
// revenue rollup"). Readers add the unfolded changes, so folding only
// keeps GetPaymentTrends and GetRecurringRevenue fast: a fold that fails
// or does not run loses nothing.
type TrendFolder struct {
	*startstop.Periodic
	db store.DB
}

// NewTrendFolder returns a stopped TrendFolder over db.
func NewTrendFolder(db store.DB, o TrendFoldOptions) *TrendFolder {
	if o.Interval <= 0 {
		o.Interval = DefaultTrendFoldInterval
	}
	f := &TrendFolder{db: db}
	f.Periodic = startstop.NewPeriodic(startstop.PeriodicOptions{
		Job: o.Job, Name: "payment trends fold", Service: "trends_fold", Span: "payment.trends_fold", Interval: o.Interval,
		Round: f.round,
	})
	return f
}

// round is one fold, its count on the round's span.
func (f *TrendFolder) round(ctx context.Context) error {
	moved, err := store.Q(f.db).FoldPaymentTrends(ctx)
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int64("trends.changes_folded", moved))
	if err != nil {
		return err
	}
	mrr, err := store.Q(f.db).FoldRecurringRevenue(ctx)
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int64("recurring_revenue.changes_folded", mrr))
	return err
}
