package reconcile

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testsignal"
)

// Options configure a Reconciler; zero fields take the defaults.
type Options struct {
	// Interval is the time between rounds (default DefaultInterval, or
	// BaseBackoff when that is shorter: a round at least as often as a
	// payment falls due).
	Interval time.Duration
	// BatchSize is how many due payments one round claims (default 10).
	BatchSize int
	// BaseBackoff is the wait after the first check of a payment; each
	// further check waits twice as long ([billing].reconcile_after; default
	// payment.DefaultReconcileAfter).
	BaseBackoff time.Duration
	// MaxBackoff caps the wait between two checks of one pending payment
	// (default 1 h).
	MaxBackoff time.Duration
	// LateCapture is how long after it failed a gateway payment is still
	// checked, in case the gateway took its money after all
	// ([payments].late_capture_days; default payment.DefaultLateCapture;
	// negative: never). LateMaxBackoff caps the wait between two of those
	// checks (default 24 h).
	LateCapture    time.Duration
	LateMaxBackoff time.Duration
	// Clock is the time due payments are compared with (default: time.Now).
	Clock func() time.Time
	// NodeID names this instance in audit rows and logs.
	NodeID string
	// Active, when set, is asked before every round, which runs only when
	// it answers true: internal/app passes the `billing` elector's
	// IsLeader, so only the billing leader reconciles. The claim (FOR UPDATE SKIP LOCKED plus rescheduling in the
	// same statement) would keep two instances from asking a gateway about
	// the same payment at once even without it.
	Active func() bool
	Logger *slog.Logger
	// Tracer, when set (tracing on), gives each background round a span,
	// whose trace id its lines, gateway calls included, carry.
	Tracer trace.Tracer
	// Rounds, set by tests only, counts the background rounds: each look
	// at Active and the round it then runs, if any (internal/testsignal).
	// Nil in the service: a nil check per round.
	Rounds *testsignal.Signal
}

// Defaults of Options.
const (
	DefaultInterval   = 30 * time.Second
	DefaultBatchSize  = 10
	DefaultMaxBackoff = time.Hour
	DefaultLateMax    = 24 * time.Hour
)

// Reconciler is the background service that repairs lost callbacks: it
// claims pending gateway payments whose next_reconcile_at has come, asks
// their gateway (query_payment, outside any transaction), and applies the
// answer through the same settlement code as a callback.
//
//	stopped ──Start──▶ running ──Stop──▶ stopped
//	                     │ every Interval (and once at start):
//	                     ▼
//	      claim ≤ BatchSize due payments (SKIP LOCKED; attempts+1 and
//	      next_reconcile_at = now + min(BaseBackoff·2^attempts, MaxBackoff)
//	      in the same statement) ──▶ query each gateway ──▶ settle
//
// Syncer asks a payment's gateway about it and applies the answer
// (*payment.Service).
type Syncer interface {
	SyncForReconciler(ctx context.Context, pay store.Payment, node string) (store.Payment, error)
}

type Reconciler struct {
	db   store.DB
	svc  Syncer
	opts Options
	log  *slog.Logger

	loop startstop.Loop
}

// Round is what one reconciliation round did.
type Round struct {
	Claimed int
	Settled int
	Failed  int
	// Captured: failed payments whose money the gateway took after all.
	Captured int
	Errors   int
}

// New returns a stopped Reconciler: it claims due payments in db and has
// svc ask their gateways.
func New(db store.DB, svc Syncer, o Options) *Reconciler {
	if o.BatchSize <= 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.BaseBackoff <= 0 {
		o.BaseBackoff = payment.DefaultReconcileAfter
	}
	if o.Interval <= 0 {
		o.Interval = min(DefaultInterval, o.BaseBackoff)
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.MaxBackoff < o.BaseBackoff {
		o.MaxBackoff = o.BaseBackoff
	}
	switch {
	case o.LateCapture == 0:
		o.LateCapture = payment.DefaultLateCapture
	case o.LateCapture < 0:
		o.LateCapture = 0
	}
	if o.LateMaxBackoff <= 0 {
		o.LateMaxBackoff = DefaultLateMax
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Reconciler{db: db, svc: svc, opts: o, log: log.With("service", "reconciler")}
}

// Start runs rounds in the background until ctx ends or Stop is called.
func (r *Reconciler) Start(ctx context.Context) error {
	if err := r.loop.Start(ctx, func(ctx context.Context, _ <-chan struct{}) { r.run(ctx) }); err != nil {
		return err
	}
	r.log.Info("reconciler started", "interval", r.opts.Interval.String(), "batch_size", r.opts.BatchSize,
		"base_backoff", r.opts.BaseBackoff.String(), "max_backoff", r.opts.MaxBackoff.String())
	return nil
}

// Stop ends the background rounds and waits for the one in progress.
func (r *Reconciler) Stop() {
	if r.loop.Stop() {
		r.log.Info("reconciler stopped")
	}
}

func (r *Reconciler) run(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	active := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.opts.Rounds.Begin()
		now := r.opts.Active == nil || r.opts.Active()
		if now != active {
			active = now
			r.log.Info("reconciler activity changed", "active", active)
		}
		if active {
			r.round(ctx)
		}
		r.opts.Rounds.Done()
		t.Reset(r.opts.Interval)
	}
}

// round is one background round, under a span of its own.
func (r *Reconciler) round(ctx context.Context) {
	ctx, span := logging.BackgroundSpan(ctx, r.opts.Tracer, "reconcile.round")
	defer span.End()
	done, err := r.RunOnce(ctx)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("reconcile.claimed", done.Claimed), attribute.Int("reconcile.settled", done.Settled),
			attribute.Int("reconcile.errors", done.Errors))
	}
	if err != nil && ctx.Err() == nil {
		span.SetStatus(codes.Error, "reconciliation round failed")
		r.log.ErrorContext(ctx, "reconciliation round failed", "err", err)
	}
}

// RunOnce runs one round now: claim due payments, reconcile each.
func (r *Reconciler) RunOnce(ctx context.Context) (Round, error) {
	var round Round
	now := store.Timestamp(r.opts.Clock())
	var claimed []store.Payment
	err := store.WithTx(ctx, r.db, func(tx pgx.Tx) error {
		var err error
		claimed, err = store.ClaimDuePayments(ctx, tx, store.ReconcileClaim{
			Now: now, BatchSize: int32(r.opts.BatchSize), BaseBackoff: r.opts.BaseBackoff, MaxBackoff: r.opts.MaxBackoff,
			LateMaxBackoff: r.opts.LateMaxBackoff, LateCapture: r.opts.LateCapture,
		})
		return err
	})
	if err != nil {
		return round, err
	}
	round.Claimed = len(claimed)

	// The claimed payments are rescheduled already: each is asked about
	// once here, concurrently, and a failure simply waits for its next turn.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, pay := range claimed {
		wg.Go(func() {
			after, err := r.svc.SyncForReconciler(ctx, pay, r.opts.NodeID)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				round.Errors++
				level := slog.LevelWarn
				if apperr.Is(err, apperr.Internal) {
					level = slog.LevelError
				}
				r.log.Log(ctx, level, "payment not reconciled", "payment_id", pay.ID, "attempt", pay.ReconcileAttempts, "err", err)
			case after.CapturedAmount.Sign() > 0 && pay.CapturedAmount.Sign() == 0:
				round.Captured++
				r.log.WarnContext(ctx, "money captured for a payment that cannot apply, found by reconciliation", "payment_id", pay.ID,
					"amount", after.CapturedAmount.String(), "currency", after.Currency)
			case payment.Status(pay.Status) != payment.StatusPending:
				// A failed payment asked about again: nothing new.
			case payment.Status(after.Status) == payment.StatusSuccess:
				round.Settled++
				r.log.InfoContext(ctx, "payment settled by reconciliation", "payment_id", pay.ID, "attempt", pay.ReconcileAttempts)
			case payment.Status(after.Status) == payment.StatusFailed:
				round.Failed++
				r.log.InfoContext(ctx, "payment failed by reconciliation", "payment_id", pay.ID, "attempt", pay.ReconcileAttempts)
			}
		})
	}
	wg.Wait()

	if round.Claimed > 0 {
		r.log.InfoContext(ctx, "reconciliation round", "claimed", round.Claimed, "settled", round.Settled, "failed", round.Failed, "captured", round.Captured, "errors", round.Errors)
	}
	return round, nil
}
