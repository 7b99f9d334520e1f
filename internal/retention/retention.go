package retention

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/rustbill/paymentd/internal/event"
	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
)

// Defaults of Options, and the floor of AuditMonths.
const (
	DefaultEventDays        = 30
	DefaultNotificationDays = 90
	// DefaultAuditMonths is seven years: the longest of the usual
	// bookkeeping periods (six to seven years in the UK and the US).
	DefaultAuditMonths = 84
	// MinAuditMonths is the shortest audit retention paymentd accepts:
	// PCI DSS (requirement 10.5.1) asks for a year of audit trail.
	MinAuditMonths   = 12
	DefaultInterval  = time.Hour
	DefaultBatchSize = 10000
	// MonthsAhead is how many months after the current one have their
	// audit partition ready.
	MonthsAhead = 2
)

// KeepForever, as a retention of Options, deletes nothing of that kind.
const KeepForever = -1

// KeptEventTypes are the event types never deleted, done or not:
// order_paid is how the ledger check (internal/ledger) knows that every
// paid order was paid once, and by which payment.
var KeptEventTypes = []string{event.TypeOrderPaid}

// Options configure a Purger; zero fields take the defaults.
type Options struct {
	// EventDays: a done event is deleted this many days after it finished
	// (KeepForever: never).
	EventDays int
	// NotificationDays: a sent notification is deleted this many days
	// after it was sent (KeepForever: never).
	NotificationDays int
	// AuditMonths: an audit month is dropped this many whole months after
	// it ended (KeepForever: never; at least MinAuditMonths).
	AuditMonths int
	// Interval is the time between rounds.
	Interval time.Duration
	// BatchSize bounds the rows one delete statement examines.
	BatchSize int
	// Clock is what "old" is measured from (default time.Now).
	Clock func() time.Time
	// Job: Active is the event_worker elector's IsLeader in internal/app.
	startstop.Job
}

// DefaultOptions are the options with every default.
func DefaultOptions() Options {
	return Options{
		EventDays: DefaultEventDays, NotificationDays: DefaultNotificationDays, AuditMonths: DefaultAuditMonths,
		Interval: DefaultInterval, BatchSize: DefaultBatchSize,
	}
}

func (o *Options) defaults() error {
	o.EventDays = cmp.Or(o.EventDays, DefaultEventDays)
	o.NotificationDays = cmp.Or(o.NotificationDays, DefaultNotificationDays)
	o.AuditMonths = cmp.Or(o.AuditMonths, DefaultAuditMonths)
	o.Interval = cmp.Or(max(o.Interval, 0), DefaultInterval)
	o.BatchSize = cmp.Or(max(o.BatchSize, 0), DefaultBatchSize)
	if o.AuditMonths > 0 && o.AuditMonths < MinAuditMonths {
		return fmt.Errorf("retention: audit months must be at least %d (PCI DSS 10.5.1 asks for a year), or kept forever; got %d",
			MinAuditMonths, o.AuditMonths)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Purger is the background service that applies the retention.
type Purger struct {
	*startstop.Periodic
	db   store.DB
	opts Options
	log  *slog.Logger
}

// Report is what one round did.
type Report struct {
	// PartitionsCreated and PartitionsDropped are audit months.
	PartitionsCreated int
	PartitionsDropped []string
	Notifications     Purged
	Events            Purged
}

// Purged is what a round did to one table: rows examined and deleted,
// statements run, and how long they took.
type Purged struct {
	Examined   int
	Deleted    int
	Statements int
	Took       time.Duration
}

// New returns a stopped Purger over db; an AuditMonths below
// MinAuditMonths is refused.
func New(db store.DB, o Options) (*Purger, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	p := &Purger{db: db, opts: o, log: o.Logger.With("service", "retention")}
	p.Periodic = startstop.NewPeriodic(startstop.PeriodicOptions{
		Job: o.Job, Name: "retention", Service: "retention", Span: "retention.round", Interval: o.Interval,
		Round: p.round, StartAttrs: []any{"event_days", o.EventDays, "notification_days", o.NotificationDays,
			"audit_months", o.AuditMonths, "batch_size", o.BatchSize},
	})
	return p, nil
}

// round is one background round, what it did on the round's span.
func (p *Purger) round(ctx context.Context) error {
	rep, err := p.RunOnce(ctx)
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int("retention.events_deleted", rep.Events.Deleted),
		attribute.Int("retention.notifications_deleted", rep.Notifications.Deleted),
		attribute.Int("retention.partitions_dropped", len(rep.PartitionsDropped)))
	return err
}

// RunOnce runs one round now, whoever leads: the audit months, then the
// notifications, then the events. Running it again at once deletes
// nothing more.
func (p *Purger) RunOnce(ctx context.Context) (Report, error) {
	var rep Report
	now := p.opts.Clock().UTC()
	var err error
	if rep.PartitionsCreated, err = store.CreateAuditPartitions(ctx, p.db, now, 1+MonthsAhead); err != nil {
		return rep, fmt.Errorf("audit partitions: %w", err)
	}
	if rep.PartitionsCreated > 0 {
		p.log.InfoContext(ctx, "audit months created", "created", rep.PartitionsCreated)
	}
	if p.opts.AuditMonths > 0 {
		if rep.PartitionsDropped, err = store.Q(p.db).DropAuditPartitions(ctx, AuditKeepFrom(now, p.opts.AuditMonths)); err != nil {
			return rep, fmt.Errorf("audit months past retention: %w", err)
		}
		if len(rep.PartitionsDropped) > 0 {
			p.log.InfoContext(ctx, "audit months dropped", "partitions", rep.PartitionsDropped, "audit_months", p.opts.AuditMonths)
		}
	}
	if p.opts.NotificationDays > 0 {
		before := now.Add(-time.Duration(p.opts.NotificationDays) * 24 * time.Hour)
		rep.Notifications, err = p.purge(ctx, func(from store.PurgeCursor) (store.PurgeBatch, error) {
			return store.PurgeSentNotifications(ctx, p.db, from, before, p.opts.BatchSize)
		})
		if rep.Notifications.Deleted > 0 {
			p.log.InfoContext(ctx, "sent notifications deleted", "deleted", rep.Notifications.Deleted, "sent_before", before,
				"took", rep.Notifications.Took.String())
		}
		if err != nil {
			return rep, fmt.Errorf("sent notifications: %w", err)
		}
	}
	if p.opts.EventDays > 0 {
		before := now.Add(-time.Duration(p.opts.EventDays) * 24 * time.Hour)
		rep.Events, err = p.purge(ctx, func(from store.PurgeCursor) (store.PurgeBatch, error) {
			return store.PurgeDoneEvents(ctx, p.db, from, before, KeptEventTypes, p.opts.BatchSize)
		})
		if rep.Events.Deleted > 0 {
			p.log.InfoContext(ctx, "done events deleted", "deleted", rep.Events.Deleted, "done_before", before,
				"took", rep.Events.Took.String())
		}
		if err != nil {
			return rep, fmt.Errorf("done events: %w", err)
		}
	}
	return rep, nil
}

// purge runs batch from the oldest row until a batch examines fewer rows
// than BatchSize (the walk reached its bound).
func (p *Purger) purge(ctx context.Context, batch func(from store.PurgeCursor) (store.PurgeBatch, error)) (Purged, error) {
	var done Purged
	start := time.Now()
	var from store.PurgeCursor
	for {
		if err := ctx.Err(); err != nil {
			done.Took = time.Since(start)
			return done, err
		}
		b, err := batch(from)
		if err != nil {
			done.Took = time.Since(start)
			return done, err
		}
		done.Statements++
		done.Examined += b.Examined
		done.Deleted += b.Deleted
		from = b.Next
		if b.Examined < p.opts.BatchSize {
			done.Took = time.Since(start)
			return done, nil
		}
	}
}

// AuditKeepFrom is the first instant whose audit month is kept at now
// with a retention of months: the start of the UTC month months before
// now's. A month that ended before it is dropped.
func AuditKeepFrom(now time.Time, months int) time.Time {
	now = now.UTC()
	return time.Date(now.Year(), now.Month()-time.Month(months), 1, 0, 0, 0, 0, time.UTC)
}
