package replica

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
)

// The defaults of Options; DefaultMaxLag is [db].replica_max_lag's.
const (
	DefaultMaxLag   = 10 * time.Second
	DefaultInterval = time.Second
)

// Options tune a Watcher; zero values take the defaults.
type Options struct {
	// MaxLag is the most the replica may be behind the primary and still
	// answer the heavy reads ([db].replica_max_lag).
	MaxLag time.Duration
	// Interval is how often the replica is asked for its lag.
	Interval time.Duration
	Logger   *slog.Logger
}

// Watcher routes the heavy reads: Reads is the replica while its last
// check, taken at most a few Intervals ago, found it a standby no more than
// MaxLag behind; the primary otherwise. Start runs the checks.
type Watcher struct {
	primary, replica store.DB
	check            store.DB
	opts             Options
	log              *slog.Logger
	loop             startstop.Loop

	mu   sync.Mutex
	last verdict
	// rounds counts the checks done, for tests that wait for one.
	rounds uint64
}

// New returns the watcher of replica, whose reads fall back to primary.
// check is what the lag is asked on: the replica's plain pool (a check must
// not wait behind the request path's acquire bound, and its own timeout
// bounds it).
func New(primary, replica, check store.DB, opts Options) *Watcher {
	opts.MaxLag = cmp.Or(max(opts.MaxLag, 0), DefaultMaxLag)
	opts.Interval = cmp.Or(max(opts.Interval, 0), DefaultInterval)
	log := cmp.Or(opts.Logger, slog.Default())
	return &Watcher{primary: primary, replica: replica, check: check, opts: opts, log: log}
}

// Reads is the database the heavy reads go to now: the replica while it is
// usable, else the primary.
func (w *Watcher) Reads() store.DB {
	if w.InUse() {
		return w.replica
	}
	return w.primary
}

// InUse reports whether the heavy reads go to the replica now: the last
// check found it usable and is recent. A check that hangs ends within two
// Intervals and fails; until then a check older than three Intervals
// (the replica may have stopped replaying right after it) is not trusted.
func (w *Watcher) InUse() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last.kind == usable && time.Since(w.last.at) <= w.staleAfter()
}

func (w *Watcher) staleAfter() time.Duration { return 3 * w.opts.Interval }

// Lag is the replica's lag at the last check; false when the last check
// failed or could not tell.
func (w *Watcher) Lag() (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last.lag, w.last.lagKnown
}

// Rounds is how many checks have finished since the watcher was made.
func (w *Watcher) Rounds() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rounds
}

// MaxLag is the bound the watcher holds the replica to.
func (w *Watcher) MaxLag() time.Duration { return w.opts.MaxLag }

// Start checks the replica at once and then every Interval until ctx is
// cancelled or Stop is called.
func (w *Watcher) Start(ctx context.Context) error {
	return w.loop.Start(ctx, func(ctx context.Context, _ <-chan struct{}) { w.run(ctx) })
}

// Stop ends the checks; the heavy reads go to the primary from then on
// (the last check goes stale).
func (w *Watcher) Stop() { w.loop.Stop() }

func (w *Watcher) run(ctx context.Context) {
	t := time.NewTicker(w.opts.Interval)
	defer t.Stop()
	for {
		w.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// round asks the replica for its lag, judges it and logs a change of
// verdict (not every round: a replica that lags for an hour is one line).
func (w *Watcher) round(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 2*w.opts.Interval)
	st, err := store.GetReplicaState(cctx, w.check)
	cancel()
	if ctx.Err() != nil {
		return
	}
	v := judge(st, err, w.opts.MaxLag)
	v.at = time.Now()
	w.mu.Lock()
	prev := w.last
	w.last = v
	w.rounds++
	w.mu.Unlock()
	if v.kind == prev.kind {
		return
	}
	if v.kind == usable {
		w.log.Info("read replica in use: exports, trends, stats and admins' payment lists read it",
			"lag", v.lag.String(), "max_lag", w.opts.MaxLag.String())
		return
	}
	attrs := []any{"why", v.why, "max_lag", w.opts.MaxLag.String()}
	if v.lagKnown {
		attrs = append(attrs, "lag", v.lag.Round(time.Millisecond).String())
	}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	w.log.Warn("read replica not used: the heavy reads go to the primary until it is usable again", attrs...)
}

// kind is a verdict's class; the watcher logs when it changes.
type kind int

const (
	unchecked kind = iota
	usable
	lagging
	lagUnknown
	notStandby
	unreachable
)

// verdict is what one check found.
type verdict struct {
	kind     kind
	why      string
	lag      time.Duration
	lagKnown bool
	at       time.Time
}

// judge decides whether a replica in state st (or whose check failed with
// err) may answer the heavy reads.
func judge(st store.ReplicaState, err error, maxLag time.Duration) verdict {
	switch {
	case err != nil:
		return verdict{kind: unreachable, why: "the lag check failed"}
	case !st.Standby:
		// A promoted standby, or a primary named as the replica: nothing
		// says it still receives the primary's writes (after a failover
		// that left [db].url on the old primary it never will), so it
		// cannot be held to a lag.
		return verdict{kind: notStandby, why: "not a standby (pg_is_in_recovery() is false)"}
	case !st.LagKnown:
		return verdict{kind: lagUnknown, why: "lag unknown: nothing replayed since the standby started"}
	case st.Lag > maxLag:
		return verdict{kind: lagging, why: fmt.Sprintf("lag %s over the maximum", st.Lag.Round(time.Millisecond)), lag: st.Lag, lagKnown: true}
	}
	return verdict{kind: usable, lag: st.Lag, lagKnown: true}
}
