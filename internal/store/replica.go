package store

import (
	"context"
	"time"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// ReplicaState is what a read replica says of itself.
type ReplicaState struct {
	// Standby is false on a server that is not in recovery: a promoted
	// replica, or a primary named as the replica.
	Standby bool
	// Lag is how far behind the primary the standby's data is; LagKnown is
	// false when it cannot tell (not a standby, nothing replayed since it
	// started).
	Lag      time.Duration
	LagKnown bool
}

// GetReplicaState asks db, a standby, how far behind it is (ReplicaLag in
// sql/queries/replica.sql).
func GetReplicaState(ctx context.Context, db DB) (ReplicaState, error) {
	r, err := dbsqlc.New(db).ReplicaLag(ctx)
	if err != nil {
		return ReplicaState{}, MapError(err)
	}
	s := ReplicaState{Standby: r.InRecovery}
	if r.InRecovery && r.LagSeconds >= 0 {
		s.Lag, s.LagKnown = time.Duration(r.LagSeconds*float64(time.Second)), true
	}
	return s, nil
}
