package payment

import (
	"context"
	"log/slog"
	"time"

	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
)

// TrendFoldInterval is how often a TrendFolder folds: the changes waiting
// for it are what every GetPaymentTrends reads beside the rollup, so they
// stay a few seconds' worth of writes.
const TrendFoldInterval = 2 * time.Second

// TrendFolder moves the trends' changes (appended by the triggers on
// payments and refunds) into their rollup every interval while it runs.
// Every instance runs one; a fold that finds another at work skips, and
// the answers are exact whether a change is folded yet or not: folding
// only keeps them fast.
type TrendFolder struct {
	db    store.DB
	every time.Duration
	log   *slog.Logger
	loop  startstop.Loop
}

// NewTrendFolder folds db's trends every interval (TrendFoldInterval when
// zero).
func NewTrendFolder(db store.DB, every time.Duration, log *slog.Logger) *TrendFolder {
	if every <= 0 {
		every = TrendFoldInterval
	}
	return &TrendFolder{db: db, every: every, log: log}
}

// Start begins folding until Stop or ctx's end.
func (f *TrendFolder) Start(ctx context.Context) error {
	return f.loop.Start(ctx, func(ctx context.Context, stopping <-chan struct{}) {
		tick := time.NewTicker(f.every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-stopping:
				return
			case <-tick.C:
			}
			if _, err := store.FoldPaymentTrends(ctx, f.db); err != nil && ctx.Err() == nil {
				f.log.Warn("cannot fold the payment trends' changes (they are still counted; the next fold tries again)", "err", err)
			}
		}
	})
}

// Stop ends folding and waits for a fold under way.
func (f *TrendFolder) Stop() { f.loop.Stop() }
