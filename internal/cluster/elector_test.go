package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testdb.Main(m)) }

func TestOneOfThreeElectorsLeadsAndKeepsRenewing(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	opts := cluster.ElectorOptions{TTL: time.Second, RenewInterval: 200 * time.Millisecond}
	ms := []*member{
		startMember(t, pool, "node-a", opts),
		startMember(t, pool, "node-b", opts),
		startMember(t, pool, "node-c", opts),
	}
	leader := waitLeader(t, 5*time.Second, ms...)

	first, err := store.LeaderRemaining(context.Background(), pool, cluster.RoleEventWorker)
	require.NoError(t, err)
	require.Equal(t, leader.name, first.Holder)

	// Over several TTLs: still one leader, the same one, and its lease moves.
	deadline := time.Now().Add(2500 * time.Millisecond)
	for time.Now().Before(deadline) {
		n := 0
		for _, m := range ms {
			if m.isLeader() {
				n++
			}
		}
		require.LessOrEqual(t, n, 1, "never two leaders")
		time.Sleep(10 * time.Millisecond)
	}
	require.True(t, leader.isLeader())
	now, err := store.LeaderRemaining(context.Background(), pool, cluster.RoleEventWorker)
	require.NoError(t, err)
	require.Equal(t, first.ElectedAt, now.ElectedAt, "one term, renewed")
	require.True(t, now.ExpiresAt.After(first.ExpiresAt.Add(2*time.Second)), "the lease was renewed")
	for _, m := range others(ms, leader) {
		require.Empty(t, m.gainedAt())
	}
}

func TestRolesAreIndependent(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	opts := cluster.ElectorOptions{TTL: time.Second, RenewInterval: 200 * time.Millisecond}
	opts.Role = cluster.RoleBilling
	billing := startMember(t, pool, "node-a", opts)
	opts.Role = cluster.RoleEventWorker
	worker := startMember(t, pool, "node-a", opts)
	waitLeader(t, 5*time.Second, billing)
	waitLeader(t, 5*time.Second, worker)
	leases, err := store.ListLeases(context.Background(), pool)
	require.NoError(t, err)
	require.Len(t, leases, 2)
	require.Equal(t, cluster.RoleBilling, leases[0].Role)
	require.Equal(t, cluster.RoleEventWorker, leases[1].Role)
	require.True(t, leases[0].Valid)
}

// A leader that dies (its context cancelled, no resign: kill -9) keeps the
// role until its lease runs out; a follower takes it over as soon as it
// does, so within one TTL of the death.
func TestKilledLeaderIsReplacedWithinOneTTL(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	const ttl = time.Second
	opts := cluster.ElectorOptions{TTL: ttl, RenewInterval: 250 * time.Millisecond}
	ms := []*member{
		startMember(t, pool, "node-a", opts),
		startMember(t, pool, "node-b", opts),
		startMember(t, pool, "node-c", opts),
	}
	leader := waitLeader(t, 5*time.Second, ms...)
	time.Sleep(300 * time.Millisecond) // let it renew at least once

	killed := time.Now()
	leader.cancel() // no Stop(): no resign
	next := waitLeader(t, 3*ttl, others(ms, leader)...)
	took := next.gainedAt()[0].Sub(killed)
	t.Logf("killed leader replaced after %s (TTL %s)", took.Round(time.Millisecond), ttl)
	require.Less(t, took, ttl+150*time.Millisecond, "taken over within one TTL of the death")
	require.Greater(t, took, ttl-opts.RenewInterval-100*time.Millisecond, "not before the dead leader's lease ran out")
	require.False(t, leader.isLeader())
}

// A graceful stop resigns: the role is free at once and a follower, woken
// by NOTIFY paymentd_leadership, takes it in milliseconds, not a TTL later.
func TestGracefulStopHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	opts := cluster.ElectorOptions{TTL: 10 * time.Second, RenewInterval: 3 * time.Second}
	var ms []*member
	for _, name := range []string{"node-a", "node-b"} {
		o := opts
		o.Waker = startListener(t, pool, name)
		ms = append(ms, startMember(t, pool, name, o))
	}
	leader := waitLeader(t, 5*time.Second, ms...)

	stopped := time.Now()
	leader.e.Stop()
	next := waitLeader(t, 2*time.Second, others(ms, leader)...)
	took := next.gainedAt()[0].Sub(stopped)
	t.Logf("graceful hand-over took %s (TTL %s)", took.Round(time.Millisecond), opts.TTL)
	require.Less(t, took, 500*time.Millisecond)
	require.NotEmpty(t, leader.lostAt())
}

// A leader whose database stops answering cannot renew; it steps down when
// its trust window closes, which is before its lease can expire, so there
// is never a moment with two instances acting as leader.
func TestLeaderThatCannotRenewStepsDownBeforeItsLeaseExpires(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	const ttl = 1500 * time.Millisecond
	opts := cluster.ElectorOptions{TTL: ttl, RenewInterval: 300 * time.Millisecond, Margin: 200 * time.Millisecond}
	flaky := &hangingDB{pool: pool}
	a := startMember(t, flaky, "node-a", opts)
	waitLeader(t, 5*time.Second, a)
	b := startMember(t, pool, "node-b", opts)
	time.Sleep(500 * time.Millisecond)

	flaky.down.Store(true)
	require.Eventually(t, func() bool { return len(a.lostAt()) == 1 }, 2*ttl, 5*time.Millisecond)
	steppedDown := a.lostAt()[0]
	require.False(t, a.isLeader())
	lease, err := store.LeaderRemaining(context.Background(), pool, cluster.RoleEventWorker)
	require.NoError(t, err)
	require.Equal(t, "node-a", lease.Holder, "the lease is still a's: nobody took over yet")
	require.True(t, steppedDown.Before(lease.ExpiresAt),
		"stepped down at %s, before the lease expires at %s", steppedDown.Format(time.RFC3339Nano), lease.ExpiresAt.Format(time.RFC3339Nano))
	t.Logf("stepped down %s before the lease expired", lease.ExpiresAt.Sub(steppedDown).Round(time.Millisecond))

	waitLeader(t, 2*ttl, b)
	require.True(t, b.gainedAt()[0].After(lease.ExpiresAt.Add(-50*time.Millisecond)), "b took over when the lease had expired")
	flaky.down.Store(false)
}

func TestElectorOptionsAreChecked(t *testing.T) {
	t.Parallel()
	_, err := cluster.NewElector(nil, cluster.ElectorOptions{Role: cluster.RoleBilling})
	require.Error(t, err, "holder required")
	_, err = cluster.NewElector(nil, cluster.ElectorOptions{Role: cluster.RoleBilling, Holder: "x", TTL: time.Second, RenewInterval: time.Second})
	require.ErrorContains(t, err, "renew interval")
	e, err := cluster.NewElector(nil, cluster.ElectorOptions{Role: cluster.RoleBilling, Holder: "x"})
	require.NoError(t, err, "the defaults (30 s, 10 s) are valid")
	require.False(t, e.IsLeader())
}
