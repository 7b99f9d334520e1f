package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The parameters of the queries run through Q.
type (
	InsertEventParams = dbsqlc.InsertEventParams
)

// Event is an events row.
type Event = dbsqlc.Event

// AppendEvent is InsertEvent without the row back: in a pipelined
// transaction it waits to go with the next statement (WithPipelinedTx).
func AppendEvent(ctx context.Context, db DB, eventType string, orderID uuid.UUID, payload []byte) error {
	return MapError(dbsqlc.New(later(db)).AppendEvent(ctx, dbsqlc.AppendEventParams{
		EventType: eventType, OrderID: orderID, Payload: payload,
	}))
}
