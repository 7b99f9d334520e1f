package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
	"github.com/rustbill/paymentd/internal/testsignal"
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
	leader := waitLeader(t, firstElection, ms...)

	first, err := store.Q(pool).LeaderLeaseRemaining(context.Background(), cluster.RoleEventWorker)
	require.NoError(t, err)
	require.Equal(t, leader.name, first.Holder)

	// Over several TTLs: still one leader, the same one, and its lease
	// moves. Counted in the leader's renewals rather than in time, so that
	// a slow machine makes the test slower, not weaker: twelve renewals
	// begun after the lease was read, each a renew interval after the one
	// before, move its expiry more than two seconds.
	const renewals = 12
	from := leader.rounds.Mark()
	marks := make([]testsignal.Mark, 0, 2)
	for _, m := range others(ms, leader) {
		marks = append(marks, m.rounds.Mark())
	}
	stop := time.Now().Add(testsignal.Timeout)
	for leader.rounds.Count() < int(from)+renewals {
		require.True(t, time.Now().Before(stop), "the leader did not renew %d times within %s", renewals, testsignal.Timeout)
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
	// The followers went on bidding meanwhile: "never gained" below is
	// about bids that were made and lost.
	for i, m := range others(ms, leader) {
		m.rounds.WaitAfter(t, marks[i], 2, m.name+"'s bids")
	}
	now, err := store.Q(pool).LeaderLeaseRemaining(context.Background(), cluster.RoleEventWorker)
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
	waitLeader(t, firstElection, billing)
	waitLeader(t, firstElection, worker)
	leases, err := store.Q(pool).ListLeaderLeases(context.Background())
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
	leader := waitLeader(t, firstElection, ms...)

	leader.cancel() // no Stop(): no resign
	require.Eventually(t, func() bool { return !leader.isLeader() }, 5*time.Second, 5*time.Millisecond)
	// Read after the death: a renewal cut off by it can only have moved the
	// expiry later, which makes the check below stricter, never looser.
	dead, err := store.Q(pool).LeaderLeaseRemaining(context.Background(), cluster.RoleEventWorker)
	require.NoError(t, err)
	require.Equal(t, leader.name, dead.Holder, "the dead leader keeps the role until its lease runs out")
	// Liveness: a follower takes over; how soon depends on the machine's
	// load, so the bound is generous and the delay is logged.
	next := waitLeader(t, 10*ttl, others(ms, leader)...)
	now, err := store.Q(pool).LeaderLeaseRemaining(context.Background(), cluster.RoleEventWorker)
	require.NoError(t, err)
	require.Equal(t, next.name, now.Holder)
	// Safety, on the database's clock (the one the lease uses): the new
	// term began once the dead leader's lease had run out, not before.
	require.False(t, now.ElectedAt.Before(dead.ExpiresAt),
		"new term at %s, the dead leader's lease expired at %s", now.ElectedAt.Format(time.RFC3339Nano), dead.ExpiresAt.Format(time.RFC3339Nano))
	t.Logf("taken over %s after the dead leader's lease expired (TTL %s)", now.ElectedAt.Sub(dead.ExpiresAt).Round(time.Millisecond), ttl)
	require.False(t, leader.isLeader())
}

// A graceful stop resigns: the role is free at once and a follower, woken
// by NOTIFY paymentd_leadership, takes it in milliseconds, not a TTL later.
func TestGracefulStopHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	// A renew interval far longer than a hand-over may take even on a busy
	// machine, so a follower that only polled would rarely pass.
	opts := cluster.ElectorOptions{TTL: 5 * time.Minute, RenewInterval: 100 * time.Second}
	var ms []*member
	for _, name := range []string{"node-a", "node-b"} {
		o := opts
		o.Waker = startListener(t, pool, name)
		ms = append(ms, startMember(t, pool, name, o))
	}
	leader := waitLeader(t, firstElection, ms...)
	before, err := store.Q(pool).LeaderLeaseRemaining(context.Background(), cluster.RoleEventWorker)
	require.NoError(t, err)

	leader.e.Stop()
	resigned := time.Now() // the database runs on this machine: one clock
	next := waitLeader(t, 30*time.Second, others(ms, leader)...)
	after, err := store.Q(pool).LeaderLeaseRemaining(context.Background(), cluster.RoleEventWorker)
	require.NoError(t, err)
	require.Equal(t, next.name, after.Holder)
	// The new term (the database's time of the election, not when this
	// test noticed it) began before the old lease could run out, so the
	// role was handed over, not timed out; and well within one renew
	// interval, so the follower was woken, not polling. The usual figure is
	// milliseconds (logged); the bound leaves room for a busy machine.
	require.True(t, after.ElectedAt.Before(before.ExpiresAt), "handed over before the old lease expired")
	took := after.ElectedAt.Sub(resigned)
	t.Logf("graceful hand-over took %s after the resignation (TTL %s, renew interval %s)", took.Round(time.Millisecond), opts.TTL, opts.RenewInterval)
	require.Less(t, took, 10*time.Second, "woken by the resignation, not by its next poll")
	require.NotEmpty(t, leader.lostAt())
}

// An elector on a connection of its own (the migration role's) is stopped
// while a renewal is on the wire — here held up by a row lock. The renewal
// is let finish instead of being cut off, which would close the connection,
// so the stop still resigns: the role is free at once, not a TTL later.
func TestStopDuringARenewalStillResignsOnASingleConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.Pool(t)
	conn, err := pgx.Connect(ctx, pool.Config().ConnConfig.ConnString())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	// A bid waits at most RenewInterval for its answer, and a query given
	// up on a lone *pgx.Conn closes it for good: at 50 ms, a first bid
	// that a loaded machine answered late (preparing its statement) left
	// the elector without a connection, never elected (twice on a fresh
	// clone's test command). A second is room; the renewal then comes
	// within a second of the row's lock below.
	opts := cluster.WithStopGrace(cluster.ElectorOptions{TTL: time.Minute, RenewInterval: time.Second}, 20*time.Second)
	m := startMember(t, conn, "node-a", opts)
	waitLeader(t, firstElection, m)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `SELECT 1 FROM leader_leases WHERE role = $1 FOR UPDATE`, cluster.RoleEventWorker)
	require.NoError(t, err)
	// Wait until a renewal on the elector's connection is blocked on the
	// locked row.
	pid := conn.PgConn().PID()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var waiting bool
		require.NoError(c, pool.QueryRow(ctx, `SELECT coalesce(bool_or(wait_event_type = 'Lock'), false) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting))
		assert.True(c, waiting, "the renewal waits on the locked row")
	}, 20*time.Second, 10*time.Millisecond)
	stopped := make(chan struct{})
	go func() { m.e.Stop(); close(stopped) }()
	// The stop has reached the renewal on the wire and waits for it (for
	// stopGrace, set long above so that a slow machine cannot run it out).
	m.stopping.Wait(t, 1, "the stop to reach the renewal on the wire")
	require.NoError(t, tx.Rollback(ctx))
	testkit.WaitOrTimeout(t, stopped, "the stop")

	_, err = store.Q(pool).LeaderLeaseRemaining(ctx, cluster.RoleEventWorker)
	require.ErrorIs(t, err, store.ErrNotFound, "resigned by the stop")
	require.False(t, conn.IsClosed(), "the connection survived the stop")
}

// A leader whose database stops answering cannot renew; it steps down when
// its trust window closes, which is before its lease can expire, so there
// is never a moment with two instances acting as leader.
func TestLeaderThatCannotRenewStepsDownBeforeItsLeaseExpires(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	// The margin is the room a busy machine has between a's stepping down
	// and its lease's expiry (and b's take-over): a whole second.
	const ttl = 3 * time.Second
	opts := cluster.ElectorOptions{TTL: ttl, RenewInterval: 300 * time.Millisecond, Margin: time.Second}
	flaky := &hangingDB{pool: pool}
	a := startMember(t, flaky, "node-a", opts)
	waitLeader(t, firstElection, a)
	b := startMember(t, pool, "node-b", opts)
	b.rounds.Wait(t, 1, "b's first bid") // b is a follower that has seen a's lease

	flaky.down.Store(true)
	// a's lease as last seen while a still holds it: its final renewal
	// (one already past the hanging database when it went down may land
	// after the first look). Read once after a stepped down, it could
	// already be b's on a machine that kept this test waiting a second.
	var lease store.LeaseRemaining
	require.Eventually(t, func() bool {
		if l, err := store.Q(pool).LeaderLeaseRemaining(context.Background(), cluster.RoleEventWorker); err == nil && l.Holder == "node-a" {
			lease = l
		}
		return len(a.lostAt()) == 1
	}, 2*ttl, 5*time.Millisecond)
	steppedDown := a.lostAt()[0]
	require.False(t, a.isLeader())
	require.Equal(t, "node-a", lease.Holder, "a's lease was seen")
	require.True(t, steppedDown.Before(lease.ExpiresAt),
		"stepped down at %s, before the lease expires at %s", steppedDown.Format(time.RFC3339Nano), lease.ExpiresAt.Format(time.RFC3339Nano))
	t.Logf("stepped down %s before the lease expired", lease.ExpiresAt.Sub(steppedDown).Round(time.Millisecond))

	waitLeader(t, 10*ttl, b)
	now, err := store.Q(pool).LeaderLeaseRemaining(context.Background(), cluster.RoleEventWorker)
	require.NoError(t, err)
	require.Equal(t, "node-b", now.Holder)
	require.False(t, now.ElectedAt.Before(lease.ExpiresAt), "b took over once a's lease had expired (the database's clock)")
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
