package store

import (
	"context"
	"time"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The parameters of the queries run through Q.
type (
	GetIdempotencyKeyParams    = dbsqlc.GetIdempotencyKeyParams
	SweepIdempotencyKeysParams = dbsqlc.SweepIdempotencyKeysParams
)

// IdempotencyKey is a kept Idempotency-Key (internal/idempotency): who sent
// it, for which request, and the first call's outcome once it is done.
type IdempotencyKey = dbsqlc.IdempotencyKey

// IdempotencyClaim is a key a call claims before it runs.
type IdempotencyClaim = dbsqlc.ClaimIdempotencyKeyParams

// The states of a kept key.
const (
	IdempotencyRunning = "running"
	IdempotencyDone    = "done"
)

// IdempotencyOutcome is a finished call's outcome: Response, or ErrorCode
// and ErrorMessage.
type IdempotencyOutcome struct {
	Principal, Key string
	Response       []byte
	ErrorCode      *string
	ErrorMessage   *string
	FinishedAt     time.Time
}

// ClaimIdempotencyKey takes a key for a call that is about to run: false
// when it is taken already (GetIdempotencyKey says by what).
func ClaimIdempotencyKey(ctx context.Context, db DB, c IdempotencyClaim) (bool, error) {
	n, err := dbsqlc.New(db).ClaimIdempotencyKey(ctx, c)
	return n == 1, MapError(err)
}

// FinishIdempotencyKey keeps a running key's outcome.
func FinishIdempotencyKey(ctx context.Context, db DB, o IdempotencyOutcome) error {
	_, err := dbsqlc.New(db).FinishIdempotencyKey(ctx, dbsqlc.FinishIdempotencyKeyParams{
		Principal: o.Principal, Key: o.Key, Response: o.Response,
		ErrorCode: o.ErrorCode, ErrorMessage: o.ErrorMessage, FinishedAt: &o.FinishedAt,
	})
	return MapError(err)
}

// ReleaseIdempotencyKey gives back a running key whose call changed
// nothing.
func ReleaseIdempotencyKey(ctx context.Context, db DB, principal, key string) error {
	_, err := dbsqlc.New(db).ReleaseIdempotencyKey(ctx, dbsqlc.ReleaseIdempotencyKeyParams{Principal: principal, Key: key})
	return MapError(err)
}

// DeleteExpiredIdempotencyKey deletes the key if it expired by now.
func DeleteExpiredIdempotencyKey(ctx context.Context, db DB, principal, key string, now time.Time) error {
	_, err := dbsqlc.New(db).DeleteExpiredIdempotencyKey(ctx, dbsqlc.DeleteExpiredIdempotencyKeyParams{Principal: principal, Key: key, Now: now})
	return MapError(err)
}
