package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The parameters of the queries run through Q.
type (
	LeaderAttemptElectParams  = dbsqlc.LeaderAttemptElectParams
	LeaderReElectParams       = dbsqlc.LeaderReElectParams
	UpsertNodeHeartbeatParams = dbsqlc.UpsertNodeHeartbeatParams
)

// LeaderLease is a leader_leases row: a term (Holder, ElectedAt) of a role,
// valid until ExpiresAt by the database clock.
type LeaderLease = dbsqlc.LeaderLease

// LeaseState is the admin view of a held role; Valid is false once the
// lease has expired but nobody has taken the role over yet.
type LeaseState = dbsqlc.ListLeaderLeasesRow

// LeaseRemaining is who holds a role and how long the lease has left by the
// database clock (zero once expired).
type LeaseRemaining = dbsqlc.LeaderLeaseRemainingRow

// Node is a nodes row: an instance's heartbeat.
type Node = dbsqlc.Node

// NodeState is a node with the age of its last heartbeat and whether that
// makes it lost, both by the database clock.
type NodeState = dbsqlc.ListNodesWithAgeRow

// Resign ends the term (holder, electedAt) of role and tells every instance
// that the role is free (NOTIFY paymentd_leadership at commit). It reports
// whether the term was still there to end.
func Resign(ctx context.Context, db DB, role, holder string, electedAt time.Time) (bool, error) {
	var n int64
	err := WithTx(ctx, db, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		var err error
		if n, err = q.LeaderResign(ctx, dbsqlc.LeaderResignParams{Role: role, Holder: holder, ElectedAt: electedAt}); err != nil {
			return MapError(err)
		}
		if n == 0 {
			return nil
		}
		return MapError(q.NotifyLeadershipChange(ctx, role))
	})
	return n > 0, err
}

// DeleteNode removes node id (it stopped cleanly).
func DeleteNode(ctx context.Context, db DB, id string) error {
	_, err := dbsqlc.New(db).DeleteNode(ctx, id)
	return MapError(err)
}
