package store

import (
	"context"

	"github.com/google/uuid"

	"github.com/rustbill/paymentd/internal/apperr"

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
		EventType: eventType, OrderID: orderID, Payload: payload, WakeAfterCommit: wakeAfterCommit(db),
	}))
}

// AppendEvents is AppendEvent for events of one type, one per order of
// orderIDs with the payload of the same index, in one statement that
// waits like AppendEvent's.
func AppendEvents(ctx context.Context, db DB, eventType string, orderIDs []uuid.UUID, payloads [][]byte) error {
	if len(orderIDs) != len(payloads) {
		return apperr.New(apperr.Internal, "AppendEvents: %d orders, %d payloads", len(orderIDs), len(payloads))
	}
	if len(orderIDs) == 0 {
		return nil
	}
	return MapError(dbsqlc.New(later(db)).AppendEvents(ctx, dbsqlc.AppendEventsParams{
		EventType: eventType, OrderIds: orderIDs, Payloads: payloads, WakeAfterCommit: wakeAfterCommit(db),
	}))
}
