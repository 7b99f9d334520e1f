package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
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

// NewInstance is what EnsureOrderInstance creates.
type NewInstance struct {
	CustomerID     uuid.UUID
	OrderID        uuid.UUID
	ProductID      *uuid.UUID
	ProviderPlugin *string
	Name           string
	At             time.Time
}

// EnsureOrderInstance returns the order's instance, creating it (status
// provisioning) when the order has none yet. Call it with the order row
// locked.
func EnsureOrderInstance(ctx context.Context, db DB, in NewInstance) (Instance, error) {
	row, err := dbsqlc.New(db).EnsureOrderInstance(ctx, dbsqlc.EnsureOrderInstanceParams{
		CustomerID: in.CustomerID, OrderID: in.OrderID, ProductID: in.ProductID,
		ProviderPlugin: in.ProviderPlugin, Name: in.Name, At: in.At,
	})
	return row, MapError(err)
}

// GetOrderInstance reads the instance of an order; ErrNotFound when none.
func GetOrderInstance(ctx context.Context, db DB, orderID uuid.UUID) (Instance, error) {
	row, err := dbsqlc.New(db).GetOrderInstance(ctx, orderID)
	return row, MapError(err)
}

// MarkInstanceProvisioned moves a provisioning instance to status with the
// provider's id and details (JSON). ErrNotFound when it is not provisioning.
func MarkInstanceProvisioned(ctx context.Context, db DB, id uuid.UUID, externalID, status string, details []byte, at time.Time) (Instance, error) {
	row, err := dbsqlc.New(db).MarkInstanceProvisioned(ctx, dbsqlc.MarkInstanceProvisionedParams{
		ID: id, ExternalID: externalID, Status: status, Details: details, At: at,
	})
	return row, MapError(err)
}

// MarkInstanceTerminated records that the provider ended the instance;
// ErrNotFound when it is already terminated.
func MarkInstanceTerminated(ctx context.Context, db DB, id uuid.UUID, at time.Time) (Instance, error) {
	r, err := dbsqlc.New(db).MarkInstanceTerminated(ctx, dbsqlc.MarkInstanceTerminatedParams{ID: id, At: at})
	return r, MapError(err)
}

// SetInstanceStatus moves a live instance (running, stopped or suspended)
// to status, what the provider reported after suspending or resuming it.
// ErrNotFound when the instance is not live or has that status already.
func SetInstanceStatus(ctx context.Context, db DB, id uuid.UUID, status string, at time.Time) (Instance, error) {
	row, err := dbsqlc.New(db).SetInstanceStatus(ctx, dbsqlc.SetInstanceStatusParams{ID: id, Status: status, At: at})
	return row, MapError(err)
}

// MarkInstanceFailed moves a provisioning instance to error with lastError.
// ErrNotFound when it is not provisioning.
func MarkInstanceFailed(ctx context.Context, db DB, id uuid.UUID, lastError string, at time.Time) (Instance, error) {
	row, err := dbsqlc.New(db).MarkInstanceFailed(ctx, dbsqlc.MarkInstanceFailedParams{ID: id, LastError: lastError, At: at})
	return row, MapError(err)
}

// SetInstanceLastError records why an attempt to provision a provisioning
// instance failed.
func SetInstanceLastError(ctx context.Context, db DB, id uuid.UUID, lastError string, at time.Time) error {
	return MapError(dbsqlc.New(db).SetInstanceLastError(ctx, dbsqlc.SetInstanceLastErrorParams{ID: id, LastError: lastError, At: at}))
}

// AuditedForEvent reports whether the audit log holds an entry of action on
// the entity whose after.event_id is eventID: the durable mark of an event's
// one-time side effect.
func AuditedForEvent(ctx context.Context, db DB, entityType, entityID, action string, eventID uuid.UUID) (bool, error) {
	ok, err := dbsqlc.New(db).AuditEntryExists(ctx, dbsqlc.AuditEntryExistsParams{
		EntityType: entityType, EntityID: entityID, Action: action, EventID: eventID.String(),
	})
	return ok, MapError(err)
}
