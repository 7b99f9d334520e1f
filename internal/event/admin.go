package event

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/paging"
	"github.com/rustbill/paymentd/internal/store"
)

// ActionEventRetry is the audit action of an admin's RetryEvent.
const ActionEventRetry = "event.retry"

// AdminOptions configure Admin.
type AdminOptions struct {
	// MaxAttempts is [events].max_attempts, shown with every event.
	MaxAttempts int
	// NodeLostAfter is [cluster].node_lost_after.
	NodeLostAfter time.Duration
	// Clock stamps audit rows; nil: time.Now.
	Clock  func() time.Time
	Logger *slog.Logger
}

// Admin is the admin view of the queue and the cluster
// (billing.event.EventAdminService). Every operation is admin only.
type Admin struct {
	db   store.DB
	opts AdminOptions
	log  *slog.Logger
}

// NewAdmin returns the admin service over db.
func NewAdmin(db store.DB, opts AdminOptions) *Admin {
	opts.MaxAttempts = cmp.Or(max(opts.MaxAttempts, 0), DefaultMaxAttempts)
	opts.NodeLostAfter = cmp.Or(max(opts.NodeLostAfter, 0), cluster.DefaultNodeLostAfter)
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Admin{db: db, opts: opts, log: opts.Logger}
}

// MaxAttempts is the configured number of attempts per event.
func (a *Admin) MaxAttempts() int { return a.opts.MaxAttempts }

func pageOf(page, size uint32) (store.Page, paging.Page, error) {
	pg, err := paging.Normalize(page, size)
	if err != nil {
		return store.Page{}, paging.Page{}, err
	}
	return store.PageOf(pg), pg, nil
}

// ListEvents returns a page of events, newest first. A type filter must
// be one of Types (InvalidArgument naming it).
func (a *Admin) ListEvents(ctx context.Context, f store.EventFilter, page, size uint32) ([]store.Event, paging.Page, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return nil, paging.Page{}, err
	}
	if f.EventType != nil {
		if err := CheckType(*f.EventType); err != nil {
			return nil, paging.Page{}, err
		}
	}
	sp, pg, err := pageOf(page, size)
	if err != nil {
		return nil, paging.Page{}, err
	}
	rows, total, err := store.ListEvents(ctx, a.db, f, sp)
	pg.Total = uint64(total)
	return rows, pg, err
}

// GetEvent returns one event.
func (a *Admin) GetEvent(ctx context.Context, id uuid.UUID) (store.Event, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return store.Event{}, err
	}
	e, err := store.Q(a.db).GetEvent(ctx, id)
	return e, store.NotFound(err, "event %s not found", id)
}

// RetryEvent puts a failed event back to pending, due at once, with its
// attempts reset: the admin asks for a full new set of attempts, since a
// single one more would fail it again at the first error. last_error is
// kept until the next attempt replaces it. Any status but failed is
// InvalidArgument. The change is audited.
func (a *Admin) RetryEvent(ctx context.Context, id uuid.UUID) (store.Event, error) {
	p, err := auth.RequireAdmin(ctx)
	if err != nil {
		return store.Event{}, err
	}
	var out store.Event
	err = store.WithTx(ctx, a.db, func(tx pgx.Tx) error {
		e, err := store.Q(tx).RetryFailedEvent(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			cur, gerr := store.Q(tx).GetEvent(ctx, id)
			if gerr != nil {
				return store.NotFound(gerr, "event %s not found", id)
			}
			return apperr.New(apperr.InvalidArgument, "event %s is %s; only a failed event can be retried", id, cur.Status)
		}
		if err != nil {
			return err
		}
		if err := audit.Write(ctx, tx, audit.Of(p), store.Timestamp(a.opts.Clock()), ActionEventRetry, "event", id.String(),
			map[string]any{"status": store.EventFailed, "last_error": e.LastError},
			map[string]any{"status": e.Status, "attempts": e.Attempts}); err != nil {
			return err
		}
		out = e
		return nil
	})
	if err != nil {
		return store.Event{}, err
	}
	a.log.InfoContext(ctx, "failed event queued again by an admin", "event_id", id, "order_id", out.OrderID,
		"event_type", out.EventType, "principal", p.String())
	return out, nil
}

// ListNodes returns every node with its heartbeat age and whether it is lost.
func (a *Admin) ListNodes(ctx context.Context) ([]store.NodeState, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	return store.Q(a.db).ListNodesWithAge(ctx, a.opts.NodeLostAfter)
}

// ListLeaders returns the held leader roles.
func (a *Admin) ListLeaders(ctx context.Context) ([]store.LeaseState, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return nil, err
	}
	return store.Q(a.db).ListLeaderLeases(ctx)
}

// ListNotifications returns a page of notifications, newest first.
func (a *Admin) ListNotifications(ctx context.Context, f store.NotificationFilter, page, size uint32) ([]store.Notification, paging.Page, error) {
	if _, err := auth.RequireAdmin(ctx); err != nil {
		return nil, paging.Page{}, err
	}
	sp, pg, err := pageOf(page, size)
	if err != nil {
		return nil, paging.Page{}, err
	}
	rows, total, err := store.ListNotifications(ctx, a.db, f, sp)
	pg.Total = uint64(total)
	return rows, pg, err
}
