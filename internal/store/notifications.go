package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The parameters of the queries run through Q.
type (
	ClaimNotificationsParams            = dbsqlc.ClaimNotificationsParams
	MarkNotificationAttemptFailedParams = dbsqlc.MarkNotificationAttemptFailedParams
)

// Notification is a notifications row.
type Notification = dbsqlc.Notification

// Notification statuses (notifications_status_check).
const (
	NotificationPending = "pending"
	NotificationSent    = "sent"
	NotificationFailed  = "failed"
)

// NewNotification is one notification to queue.
type NewNotification struct {
	Recipient string
	Channel   string
	Subject   string
	Body      string
}

// InsertNotifications queues ns, the notifications of one event (eventID;
// nil for none), in one statement, and wakes the senders at commit (NOTIFY
// paymentd_notifications). A notification of the same event, channel and
// recipient that already exists is skipped, so a retried event handler
// queues nothing twice. It returns how many were inserted.
func InsertNotifications(ctx context.Context, db DB, eventID *uuid.UUID, ns []NewNotification) (int, error) {
	if len(ns) == 0 {
		return 0, nil
	}
	p := dbsqlc.InsertNotificationsParams{EventID: eventID}
	for _, r := range ns {
		p.Recipients = append(p.Recipients, r.Recipient)
		p.Channels = append(p.Channels, r.Channel)
		p.Subjects = append(p.Subjects, r.Subject)
		p.Bodies = append(p.Bodies, r.Body)
	}
	row, err := dbsqlc.New(db).InsertNotifications(ctx, p)
	if err != nil {
		return 0, MapError(err)
	}
	return int(row.Inserted), nil
}

// MarkNotificationSent records the successful delivery of the claimed
// attempt; ErrNotFound when the claim was lost.
func MarkNotificationSent(ctx context.Context, db DB, id uuid.UUID, attempts int32) error {
	n, err := dbsqlc.New(db).MarkNotificationSent(ctx, dbsqlc.MarkNotificationSentParams{ID: id, Attempts: attempts})
	if err != nil {
		return MapError(err)
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// NotificationFilter selects notifications; nil fields do not filter.
type NotificationFilter struct {
	Status  *string
	Channel *string
	EventID *uuid.UUID
}

// ListNotifications returns one page of notifications, newest first, and
// the number matching f.
func ListNotifications(ctx context.Context, db DB, f NotificationFilter, p Page) ([]Notification, int64, error) {
	q := dbsqlc.New(db)
	return countThenList(func() (int64, error) {
		return q.CountNotifications(ctx, dbsqlc.CountNotificationsParams{Status: f.Status, Channel: f.Channel, EventID: f.EventID})
	}, p.Offset,
		func() ([]Notification, error) {
			return q.ListNotifications(ctx, dbsqlc.ListNotificationsParams{
				Status: f.Status, Channel: f.Channel, EventID: f.EventID, RowLimit: p.Limit, RowOffset: p.Offset,
			})
		})
}
