package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// AuditLogRow is a stored audit_log row as the admin reads it back.
type AuditLogRow = dbsqlc.AuditLog

// ListRefundsNewestFirst returns a payment's refunds, newest first (none for
// an unknown payment).
func ListRefundsNewestFirst(ctx context.Context, db DB, paymentID uuid.UUID) ([]Refund, error) {
	rows, err := dbsqlc.New(db).ListRefundsNewestFirst(ctx, paymentID)
	return rows, MapError(err)
}

// ListAuditEntries returns one page of an entity's audit log, newest first,
// and how many entries the entity has in all.
func ListAuditEntries(ctx context.Context, db DB, entityType, entityID string, page Page) ([]AuditLogRow, int64, error) {
	q := dbsqlc.New(db)
	total, err := q.CountAuditEntries(ctx, dbsqlc.CountAuditEntriesParams{EntityType: entityType, EntityID: entityID})
	if err != nil {
		return nil, 0, MapError(err)
	}
	rows, err := q.ListAuditEntries(ctx, dbsqlc.ListAuditEntriesParams{
		EntityType: entityType, EntityID: entityID, RowLimit: page.Limit, RowOffset: page.Offset,
	})
	if err != nil {
		return nil, 0, MapError(err)
	}
	return rows, total, nil
}
