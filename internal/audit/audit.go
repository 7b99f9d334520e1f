package audit

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/store"
)

// Actor is who a row names: an admin, a customer, an API key, a gateway
// interface (its callbacks) or a part of the system (the reconciler, the
// plugin scanner, the event worker's node, an operator command).
type Actor struct {
	Kind string
	ID   string
}

// Of names a principal: an admin or customer by id, or the API key it
// called with.
func Of(p auth.Principal) Actor {
	switch {
	case p.Kind == auth.KindAPIKey && p.CredentialID != "":
		return Actor{store.ActorAPIKey, p.CredentialID}
	case p.IsAdmin():
		return Actor{store.ActorAdmin, p.ID.String()}
	default:
		return Actor{store.ActorCustomer, p.ID.String()}
	}
}

// Gateway names a gateway interface, for what its callbacks change.
func Gateway(interfaceID uuid.UUID) Actor {
	return Actor{store.ActorGateway, interfaceID.String()}
}

// System names a part of the service acting on its own.
func System(name string) Actor {
	return Actor{store.ActorSystem, name}
}

// Write appends one row in db's transaction for a change of an entity.
// before and after are marshalled to JSON (nil: none); at is when the
// change happened by the writer's clock (zero: now).
//
// When both are JSON objects the row keeps only what changed (Changed):
// before holds the old values of the fields that changed or went away,
// after the new values of the fields that changed or came. The entity's
// whole state stays reconstructible from its history: its first row (a
// creation, before NULL) holds it whole, and each later row, applied in
// order, removes the fields of before that after does not name and sets
// those of after.
func Write(ctx context.Context, db store.DB, who Actor, at time.Time, action, entityType, entityID string, before, after any) error {
	return write(ctx, db, who, at, action, entityType, entityID, before, after, true)
}

// Note appends one row that records something observed about an entity
// rather than a change of it (a payment anomaly: the payment as it was,
// and what the gateway reported): before and after are kept whole.
func Note(ctx context.Context, db store.DB, who Actor, at time.Time, action, entityType, entityID string, before, after any) error {
	return write(ctx, db, who, at, action, entityType, entityID, before, after, false)
}

func write(ctx context.Context, db store.DB, who Actor, at time.Time, action, entityType, entityID string, before, after any, diff bool) error {
	b, err := jsonOrNil(before)
	if err != nil {
		return err
	}
	a, err := jsonOrNil(after)
	if err != nil {
		return err
	}
	if diff && b != nil && a != nil {
		if cb, ca, ok := Changed(b, a); ok {
			b, a = cb, ca
		}
	}
	if at.IsZero() {
		at = time.Now().UTC()
	}
	return store.AppendAudit(ctx, db, store.AuditRecord{
		ActorKind: who.Kind, ActorID: who.ID, Action: action,
		EntityType: entityType, EntityID: entityID,
		Before: b, After: a, At: at,
	})
}

func jsonOrNil(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}
