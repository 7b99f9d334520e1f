package store

import (
	"context"

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

// AuditEntry is one row of the append-only audit log: who did what to which
// entity, with the entity before and after as JSON (nil for none). Before and
// After must never hold a secret.
type AuditEntry struct {
	ActorKind  string
	ActorID    string
	Action     string
	EntityType string
	EntityID   string
	Before     []byte
	After      []byte
	RequestID  string
}

// InsertAudit appends e to the audit log; write it in the transaction of the
// change it records. An empty RequestID takes the id of the request ctx
// belongs to, so an audit row leads to the request's log lines.
func InsertAudit(ctx context.Context, db DB, e AuditEntry) error {
	if e.RequestID == "" {
		e.RequestID = logging.RequestID(ctx)
	}
	return MapError(dbsqlc.New(db).InsertAuditLog(ctx, dbsqlc.InsertAuditLogParams(e)))
}
