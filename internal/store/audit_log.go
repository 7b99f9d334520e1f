package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/logging"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// Audit actor kinds (audit_log_actor_kind_check).
const (
	ActorAdmin    = "admin"
	ActorCustomer = "customer"
	ActorAPIKey   = "api_key"
	ActorGateway  = "gateway"
	ActorSystem   = "system"
)

// AuditRecord is one audit_log row: who did what to which entity, and the
// entity before and after as JSON (nil for none). Never put a secret in it.
type AuditRecord struct {
	// ActorKind is admin, customer, api_key, gateway or system.
	ActorKind  string
	ActorID    string
	Action     string
	EntityType string
	EntityID   string
	Before     []byte
	After      []byte
	RequestID  string
	At         time.Time
}

// AppendAudit writes one audit_log row (internal/audit is its one caller);
// an empty RequestID takes the id of the request ctx belongs to, so an
// audit row leads to the request's log lines.
func AppendAudit(ctx context.Context, db DB, r AuditRecord) error {
	if r.RequestID == "" {
		r.RequestID = logging.RequestID(ctx)
	}
	row := dbsqlc.InsertAuditLogParams{
		ActorKind:  r.ActorKind,
		ActorID:    r.ActorID,
		Action:     r.Action,
		EntityType: r.EntityType,
		EntityID:   r.EntityID,
		Before:     r.Before,
		After:      r.After,
		RequestID:  r.RequestID,
		CreatedAt:  r.At,
	}
	if t, ok := db.(*pipelinedTx); ok {
		// It waits for the next statement that answers, and goes with
		// the other rows waiting beside it as one statement.
		return t.laterAudit(row)
	}
	return MapError(dbsqlc.New(db).InsertAuditLog(ctx, row))
}

// auditStatements appends to b the audit rows rows as statements: one
// InsertAuditLog for a single row, one InsertAuditLogs for several.
func auditStatements(ctx context.Context, b *pgx.Batch, rows []dbsqlc.InsertAuditLogParams) {
	rec := &batchDB{}
	q := dbsqlc.New(rec)
	if len(rows) == 1 {
		_ = q.InsertAuditLog(ctx, rows[0]) // errQueued
	} else {
		var all dbsqlc.InsertAuditLogsParams
		for _, r := range rows {
			all.ActorKinds = append(all.ActorKinds, r.ActorKind)
			all.ActorIds = append(all.ActorIds, r.ActorID)
			all.Actions = append(all.Actions, r.Action)
			all.EntityTypes = append(all.EntityTypes, r.EntityType)
			all.EntityIds = append(all.EntityIds, r.EntityID)
			all.Befores = append(all.Befores, r.Before)
			all.Afters = append(all.Afters, r.After)
			all.RequestIds = append(all.RequestIds, r.RequestID)
			all.CreatedAts = append(all.CreatedAts, r.CreatedAt)
		}
		_ = q.InsertAuditLogs(ctx, all) // errQueued
	}
	b.QueuedQueries = append(b.QueuedQueries, rec.batch.QueuedQueries...)
}
