package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rustbill/paymentd/internal/store/dbsqlc"
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

// AttemptElect takes role for holder for ttl when nobody holds it or the
// lease has expired. ErrNotFound when someone (holder included) holds an
// unexpired lease.
func AttemptElect(ctx context.Context, db DB, role, holder string, ttl time.Duration) (LeaderLease, error) {
	l, err := dbsqlc.New(db).LeaderAttemptElect(ctx, dbsqlc.LeaderAttemptElectParams{Role: role, Holder: holder, Ttl: ttl})
	return l, MapError(err)
}

// ReElect extends the term (holder, electedAt) of role by ttl from the
// database's now. ErrNotFound when the term is over: it expired or another
// holder took the role.
func ReElect(ctx context.Context, db DB, role, holder string, electedAt time.Time, ttl time.Duration) (LeaderLease, error) {
	l, err := dbsqlc.New(db).LeaderReElect(ctx, dbsqlc.LeaderReElectParams{Role: role, Holder: holder, ElectedAt: electedAt, Ttl: ttl})
	return l, MapError(err)
}

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

// LeaderRemaining is the lease of role and its time left; ErrNotFound when
// nobody holds the role.
func LeaderRemaining(ctx context.Context, db DB, role string) (LeaseRemaining, error) {
	r, err := dbsqlc.New(db).LeaderLeaseRemaining(ctx, role)
	return r, MapError(err)
}

// ListLeases returns every held role, by role name.
func ListLeases(ctx context.Context, db DB) ([]LeaseState, error) {
	rows, err := dbsqlc.New(db).ListLeaderLeases(ctx)
	return rows, MapError(err)
}

// Heartbeat records that node id is alive now (database clock), creating
// its row on the first beat.
func Heartbeat(ctx context.Context, db DB, id, hostname, version string) (Node, error) {
	n, err := dbsqlc.New(db).UpsertNodeHeartbeat(ctx, dbsqlc.UpsertNodeHeartbeatParams{ID: id, Hostname: hostname, Version: version})
	return n, MapError(err)
}

// ListNodes returns every node, newest start first, lost when its last
// heartbeat is older than lostAfter.
func ListNodes(ctx context.Context, db DB, lostAfter time.Duration) ([]NodeState, error) {
	rows, err := dbsqlc.New(db).ListNodesWithAge(ctx, lostAfter)
	return rows, MapError(err)
}

// DeleteNode removes node id (it stopped cleanly).
func DeleteNode(ctx context.Context, db DB, id string) error {
	_, err := dbsqlc.New(db).DeleteNode(ctx, id)
	return MapError(err)
}

// ForgetSilentNodes removes nodes without a heartbeat for forgetAfter and
// returns how many.
func ForgetSilentNodes(ctx context.Context, db DB, forgetAfter time.Duration) (int64, error) {
	n, err := dbsqlc.New(db).DeleteNodesSilentFor(ctx, forgetAfter)
	return n, MapError(err)
}

// MigrationTryLock takes the migration role's session advisory lock lockID
// on db, which must be one connection (the lock is the session's), without
// waiting; false when another session holds it.
func MigrationTryLock(ctx context.Context, db DB, lockID int64) (bool, error) {
	ok, err := dbsqlc.New(db).MigrationTryLock(ctx, lockID)
	return ok, MapError(err)
}

// MigrationUnlock releases the advisory lock lockID taken on the same
// connection; false when this session did not hold it.
func MigrationUnlock(ctx context.Context, db DB, lockID int64) (bool, error) {
	ok, err := dbsqlc.New(db).MigrationUnlock(ctx, lockID)
	return ok, MapError(err)
}

// LeaderLeasesTableExists reports whether the migrations have created the
// lease table yet.
func LeaderLeasesTableExists(ctx context.Context, db DB) (bool, error) {
	ok, err := dbsqlc.New(db).LeaderLeasesTableExists(ctx)
	return ok, MapError(err)
}
