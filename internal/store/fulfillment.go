package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The parameters of the queries run through Q.
type (
	EnsureOrderInstanceParams      = dbsqlc.EnsureOrderInstanceParams
	MarkInstanceFailedParams       = dbsqlc.MarkInstanceFailedParams
	MarkInstancesProvisionedParams = dbsqlc.MarkInstancesProvisionedParams
	EnsureOrderInstancesParams     = dbsqlc.EnsureOrderInstancesParams
	MarkInstanceTerminatedParams   = dbsqlc.MarkInstanceTerminatedParams
	SetInstanceLastErrorParams     = dbsqlc.SetInstanceLastErrorParams
	SetInstanceStatusParams        = dbsqlc.SetInstanceStatusParams
)

// Instance is an instances row: the service an order provisioned.
type Instance = dbsqlc.Instance

// Instance statuses (instances_status_check).
const (
	InstanceProvisioning = "provisioning"
	InstanceRunning      = "running"
	InstanceStopped      = "stopped"
	InstanceSuspended    = "suspended"
	InstanceError        = "error"
	InstanceTerminated   = "terminated"
)

// AuditedForEvent reports whether the audit log holds an entry of action on
// the entity whose after.event_id is eventID: the durable mark of an event's
// one-time side effect.
func AuditedForEvent(ctx context.Context, db DB, entityType, entityID, action string, eventID uuid.UUID) (bool, error) {
	ok, err := dbsqlc.New(db).AuditEntryExists(ctx, dbsqlc.AuditEntryExistsParams{
		EntityType: entityType, EntityID: entityID, Action: action, EventID: eventID.String(),
	})
	return ok, MapError(err)
}
