package store

import (
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// AuditLogRow is a stored audit_log row as the admin reads it back, with
// its actor's name as it is now (” for the system or an actor that is
// gone).
type AuditLogRow struct {
	dbsqlc.AuditLog
	ActorName string
}

// ListedRefund is a refund as the admin's lists show it: with the currency
// of its payment, which is the refund's.
type ListedRefund struct {
	Refund
	Currency string
	// RequestedByName is the username of the admin who asked for it; ""
	// for the system's refunds (and an admin since deleted).
	RequestedByName string
}

// NameRequesters fills in rows' RequestedByName with one read of the
// admins the rows name.
func NameRequesters(ctx context.Context, db DB, rows []ListedRefund) error {
	var ids []uuid.UUID
	for _, r := range rows {
		if r.RequestedBy != nil && !slices.Contains(ids, *r.RequestedBy) {
			ids = append(ids, *r.RequestedBy)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	admins, err := dbsqlc.New(db).AdminUsernames(ctx, ids)
	if err != nil {
		return MapError(err)
	}
	names := make(map[uuid.UUID]string, len(admins))
	for _, a := range admins {
		names[a.ID] = a.Username
	}
	for i, r := range rows {
		if r.RequestedBy != nil {
			rows[i].RequestedByName = names[*r.RequestedBy]
		}
	}
	return nil
}

// ListPaymentRefundsNewestFirst returns a payment's refunds, newest first
// (none for an unknown payment), in status when it is not nil, and how many
// match. A nil page returns every one of them.
func ListPaymentRefundsNewestFirst(ctx context.Context, db DB, paymentID uuid.UUID, status *string, page *Page) ([]Refund, int64, error) {
	q := dbsqlc.New(db)
	if page == nil {
		rows, err := q.ListPaymentRefundsNewestFirst(ctx, dbsqlc.ListPaymentRefundsNewestFirstParams{PaymentID: paymentID, Status: status})
		return rows, int64(len(rows)), MapError(err)
	}
	return countThenList(func() (int64, error) {
		return q.CountPaymentRefunds(ctx, dbsqlc.CountPaymentRefundsParams{PaymentID: paymentID, Status: status})
	}, page.Offset,
		func() ([]Refund, error) {
			return q.ListPaymentRefundsNewestFirst(ctx, dbsqlc.ListPaymentRefundsNewestFirstParams{
				PaymentID: paymentID, Status: status, RowLimit: &page.Limit, RowOffset: page.Offset,
			})
		})
}

// ListRefundsNewestFirst returns one page of every payment's refunds,
// newest first (created_at DESC, id DESC), in status when it is not nil,
// and how many match. Each page and the count of a status are read through
// an index, whatever the number of refunds.
func ListRefundsNewestFirst(ctx context.Context, db DB, status *string, page Page) ([]ListedRefund, int64, error) {
	q := dbsqlc.New(db)
	if status == nil {
		return countThenList(func() (int64, error) {
			return q.CountRefunds(ctx)
		}, page.Offset, func() ([]ListedRefund, error) {
			rows, err := q.ListRefundsNewestFirst(ctx, dbsqlc.ListRefundsNewestFirstParams{RowLimit: page.Limit, RowOffset: page.Offset})
			out := make([]ListedRefund, len(rows))
			for i, r := range rows {
				out[i] = ListedRefund{Refund: r.Refund, Currency: r.Currency}
			}
			return out, err
		})
	}
	return countThenList(func() (int64, error) {
		return q.CountRefundsInStatus(ctx, *status)
	}, page.Offset, func() ([]ListedRefund, error) {
		rows, err := q.ListRefundsInStatusNewestFirst(ctx, dbsqlc.ListRefundsInStatusNewestFirstParams{
			Status: *status, RowLimit: page.Limit, RowOffset: page.Offset,
		})
		out := make([]ListedRefund, len(rows))
		for i, r := range rows {
			out[i] = ListedRefund{Refund: r.Refund, Currency: r.Currency}
		}
		return out, err
	})
}

// AuditFilter selects audit entries; nil fields do not filter.
type AuditFilter struct {
	EntityType, EntityID *string
	ActorKind, ActorID   *string
	Action               *string
	// ExcludedActions leaves these actions out; empty leaves none out.
	ExcludedActions []string
}

// ListAuditEntries returns one page of the audit entries f selects, newest
// first, and how many there are in all.
func ListAuditEntries(ctx context.Context, db DB, f AuditFilter, page Page) ([]AuditLogRow, int64, error) {
	q := dbsqlc.New(db)
	// NULL, not an empty array, when nothing is left out.
	var excluded []string
	if len(f.ExcludedActions) > 0 {
		excluded = f.ExcludedActions
	}
	return countThenList(func() (int64, error) {
		return q.CountAuditEntries(ctx, dbsqlc.CountAuditEntriesParams{
			EntityType: f.EntityType, EntityID: f.EntityID, ActorKind: f.ActorKind, ActorID: f.ActorID, Action: f.Action,
			ExcludedActions: excluded,
		})
	}, page.Offset, func() ([]AuditLogRow, error) {
		rows, err := q.ListAuditEntries(ctx, dbsqlc.ListAuditEntriesParams{
			EntityType: f.EntityType, EntityID: f.EntityID, ActorKind: f.ActorKind, ActorID: f.ActorID, Action: f.Action,
			ExcludedActions: excluded, RowLimit: page.Limit, RowOffset: page.Offset,
		})
		out := make([]AuditLogRow, len(rows))
		for i, r := range rows {
			out[i] = AuditLogRow{AuditLog: r.AuditLog, ActorName: r.ActorName}
		}
		return out, err
	})
}
