package cluster

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rustbill/paymentd/internal/startstop"
)

// DefaultWakeupGap is the least time between two NOTIFYs of one Wakeup.
const DefaultWakeupGap = 2 * time.Millisecond

// Execer runs a statement: *pgxpool.Pool.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Wakeup sends NOTIFY paymentd_events for the transactions that inserted
// events without the insert trigger's NOTIFY (store.WakeAfterCommit), once
// they have committed: in a statement of its own, outside their
// transactions, so that the lock a NOTIFY takes at commit is held for a
// transaction that writes no WAL, not through their commits' WAL flushes
// (docs/decisions.md, "wake-up"). Wakes that come while one NOTIFY is on
// its way, or within Gap of the last, go as one: the worker claims every
// due event when it wakes, whichever commit woke it. A NOTIFY lost (the
// database unreachable, the process killed after a commit) leaves the
// event to the worker's poll, as a lost NOTIFY of the trigger did.
type Wakeup struct {
	db     Execer
	gap    time.Duration
	log    *slog.Logger
	signal chan struct{}
	loop   startstop.Loop
}

// NewWakeup is a Wakeup that sends its NOTIFYs on db, at most one every
// gap (DefaultWakeupGap when 0).
func NewWakeup(db Execer, gap time.Duration, log *slog.Logger) *Wakeup {
	if gap <= 0 {
		gap = DefaultWakeupGap
	}
	if log == nil {
		log = slog.Default()
	}
	return &Wakeup{db: db, gap: gap, log: log, signal: make(chan struct{}, 1)}
}

// Wake asks for a NOTIFY; it never blocks.
func (w *Wakeup) Wake() {
	select {
	case w.signal <- struct{}{}:
	default: // one is asked for already
	}
}

// Start sends the NOTIFYs asked for in the background until Stop.
func (w *Wakeup) Start(ctx context.Context) error {
	return w.loop.Start(ctx, func(ctx context.Context, _ <-chan struct{}) { w.run(ctx) })
}

// Stop ends the sending; a wake asked for and not sent is left to the
// worker's poll.
func (w *Wakeup) Stop() { w.loop.Stop() }

func (w *Wakeup) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.signal:
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if _, err := w.db.Exec(sctx, `SELECT pg_notify($1, '')`, ChannelEvents); err != nil && ctx.Err() == nil {
			w.log.Warn("could not wake the event worker; it finds the new events at its next poll", "err", err)
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.gap):
		}
	}
}
