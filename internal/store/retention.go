package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// PurgeCursor is where a purge walk stands: the (created_at, id) of the
// last row it examined. The zero cursor is before every row.
type PurgeCursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// PurgeBatch is what one purge statement did: rows examined after the
// cursor (at most the limit; fewer means the walk reached before), rows
// deleted of them, and the cursor for the next statement.
type PurgeBatch struct {
	Examined int
	Deleted  int
	Next     PurgeCursor
}

// start is the zero cursor as the database compares it: before any
// created_at (time.Time{} is year 1, which timestamptz holds).
func (c PurgeCursor) start() PurgeCursor {
	if c.CreatedAt.IsZero() {
		c.CreatedAt = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return c
}

// PurgeDoneEvents deletes, among at most limit events created after from
// and before before, those done before before whose type is not in keep.
func PurgeDoneEvents(ctx context.Context, db DB, from PurgeCursor, before time.Time, keep []string, limit int) (PurgeBatch, error) {
	from = from.start()
	if keep == nil {
		keep = []string{}
	}
	r, err := dbsqlc.New(db).PurgeDoneEvents(ctx, dbsqlc.PurgeDoneEventsParams{
		AfterCreatedAt: from.CreatedAt, AfterID: from.ID, Before: before, RowLimit: int32(limit), KeptTypes: keep,
	})
	if err != nil {
		return PurgeBatch{}, MapError(err)
	}
	return PurgeBatch{Examined: int(r.Examined), Deleted: int(r.Deleted), Next: PurgeCursor{CreatedAt: r.LastCreatedAt, ID: r.LastID}}, nil
}

// PurgeSentNotifications deletes, among at most limit notifications
// created after from and before before, those sent before before.
func PurgeSentNotifications(ctx context.Context, db DB, from PurgeCursor, before time.Time, limit int) (PurgeBatch, error) {
	from = from.start()
	r, err := dbsqlc.New(db).PurgeSentNotifications(ctx, dbsqlc.PurgeSentNotificationsParams{
		AfterCreatedAt: from.CreatedAt, AfterID: from.ID, Before: before, RowLimit: int32(limit),
	})
	if err != nil {
		return PurgeBatch{}, MapError(err)
	}
	return PurgeBatch{Examined: int(r.Examined), Deleted: int(r.Deleted), Next: PurgeCursor{CreatedAt: r.LastCreatedAt, ID: r.LastID}}, nil
}

// CreateAuditPartitions makes sure the audit_log partitions of months UTC
// months from first's on exist; how many it created.
func CreateAuditPartitions(ctx context.Context, db DB, first time.Time, months int) (int, error) {
	n, err := dbsqlc.New(db).CreateAuditPartitions(ctx, dbsqlc.CreateAuditPartitionsParams{FirstMonth: first, Months: int32(months)})
	return int(n), MapError(err)
}
