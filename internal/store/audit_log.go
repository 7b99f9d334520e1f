package store

import (
	"context"
	"time"

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
	return MapError(dbsqlc.New(later(db)).InsertAuditLog(ctx, dbsqlc.InsertAuditLogParams{
		ActorKind:  r.ActorKind,
		ActorID:    r.ActorID,
		Action:     r.Action,
		EntityType: r.EntityType,
		EntityID:   r.EntityID,
		Before:     r.Before,
		After:      r.After,
		RequestID:  r.RequestID,
		CreatedAt:  r.At,
	}))
}
