package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// Event is an events row.
type Event = dbsqlc.Event

// InsertEvent queues an event of eventType for an order with a JSON payload.
// Call it with the transaction that made the business change (docs/api.md,
// "Events", rule 1): the event exists exactly when the change is committed.
func InsertEvent(ctx context.Context, db DB, eventType string, orderID uuid.UUID, payload []byte) (Event, error) {
	e, err := dbsqlc.New(db).InsertEvent(ctx, dbsqlc.InsertEventParams{
		EventType: eventType, OrderID: orderID, Payload: payload,
	})
	return e, MapError(err)
}

// AppendEvent is InsertEvent without the row back: in a pipelined
// transaction it waits to go with the next statement (WithPipelinedTx).
func AppendEvent(ctx context.Context, db DB, eventType string, orderID uuid.UUID, payload []byte) error {
	return MapError(dbsqlc.New(later(db)).AppendEvent(ctx, dbsqlc.AppendEventParams{
		EventType: eventType, OrderID: orderID, Payload: payload,
	}))
}

// ListOrderEvents returns an order's events, oldest first.
func ListOrderEvents(ctx context.Context, db DB, orderID uuid.UUID) ([]Event, error) {
	rows, err := dbsqlc.New(db).ListOrderEvents(ctx, orderID)
	return rows, MapError(err)
}
