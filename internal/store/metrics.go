package store

import (
	"context"
	"time"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// QueueStat is one group of a queue that is not yet worked off: events of
// a type, or notifications of a channel, in one status.
type QueueStat struct {
	// Kind is the event type or the notification channel.
	Kind   string
	Status string
	Count  int64
	// OldestAge is how long the oldest of them has existed, on the
	// database's clock.
	OldestAge time.Duration
}

// EventQueueStats groups the events that are not done by type and status.
func EventQueueStats(ctx context.Context, db DB) ([]QueueStat, error) {
	rows, err := dbsqlc.New(db).EventQueueStats(ctx)
	if err != nil {
		return nil, MapError(err)
	}
	out := make([]QueueStat, len(rows))
	for i, r := range rows {
		out[i] = QueueStat{Kind: r.EventType, Status: r.Status, Count: r.Events, OldestAge: seconds(r.OldestAgeSeconds)}
	}
	return out, nil
}

// NotificationQueueStats groups the notifications that are not sent by
// channel and status.
func NotificationQueueStats(ctx context.Context, db DB) ([]QueueStat, error) {
	rows, err := dbsqlc.New(db).NotificationQueueStats(ctx)
	if err != nil {
		return nil, MapError(err)
	}
	out := make([]QueueStat, len(rows))
	for i, r := range rows {
		out[i] = QueueStat{Kind: r.Channel, Status: r.Status, Count: r.Notifications, OldestAge: seconds(r.OldestAgeSeconds)}
	}
	return out, nil
}

func seconds(s float64) time.Duration {
	if s < 0 { // created_at set by a clock a moment ahead of the database's
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// PendingRefundStats counts the refunds waiting for the gateway or for an
// admin, with the age of the oldest.
func PendingRefundStats(ctx context.Context, db DB) (QueueStat, error) {
	r, err := dbsqlc.New(db).PendingRefundStats(ctx)
	if err != nil {
		return QueueStat{}, MapError(err)
	}
	return QueueStat{Kind: "refund", Status: "pending", Count: r.Refunds, OldestAge: seconds(r.OldestAgeSeconds)}, nil
}

// SyncReplicationWaits is how many commits of this database wait for a
// synchronous standby now, and the oldest's wait so far.
func SyncReplicationWaits(ctx context.Context, db DB) (QueueStat, error) {
	r, err := dbsqlc.New(db).SyncReplicationWaits(ctx)
	if err != nil {
		return QueueStat{}, MapError(err)
	}
	return QueueStat{Kind: "commit", Status: "sync_rep", Count: r.Waiting, OldestAge: seconds(r.OldestWaitSeconds)}, nil
}
