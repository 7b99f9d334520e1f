package clustertest_test

import (
	"context"
	"flag"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rustbill/paymentd/internal/clustertest"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/migrate"
	"github.com/rustbill/paymentd/internal/testdb"
)

// minParallel is how many of this package's tests run at once unless
// go test's -parallel says otherwise. Its tests mostly wait (for leases
// to lapse, storms to run, processes to start and die), each with its own
// processes, ports and database, so the default of one test per CPU left
// a 2-CPU machine idle: 105 to 109 s for the package at -parallel 2,
// 67 s at 4, with the same CPU time (docs/testing.md).
const minParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit && runtime.GOMAXPROCS(0) < minParallel {
		if err := flag.Set("test.parallel", strconv.Itoa(minParallel)); err != nil {
			panic(err)
		}
	}
	// The release is built for the rolling upgrade only: not when -run
	// leaves that test out.
	release := true
	if run := flag.Lookup("test.run").Value.String(); run != "" {
		top, _, _ := strings.Cut(run, "/")
		release, _ = regexp.MatchString(top, "TestARollingUpgradeFromTheReleaseAndBackLosesNothingAndFailsOnlyCallsCaughtInAStop")
	}
	stopBuilds := clustertest.Prebuild(release)
	code := testdb.Main(m).Run()
	stopBuilds()
	clustertest.RemoveBuilt()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// bundle is a started cluster with its world.
type bundle struct {
	c    *clustertest.Cluster
	w    *clustertest.Bundle
	fake *epay.Server
}

// setup builds the binary, starts a fake gateway and nodes paymentd
// processes on one empty database, and sets up the world. On failure the
// nodes' last log lines are printed.
func setup(t *testing.T, nodes int, dbURL string, env ...string) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, err := clustertest.Build(ctx)
	require.NoError(t, err)
	if dbURL == "" {
		dbURL = testdb.EmptyURL(t)
	}
	fake := epay.New(epay.Options{NotifyScale: 0.01})
	require.NoError(t, fake.Start())
	t.Cleanup(fake.Close)
	c, err := clustertest.Start(ctx, clustertest.Options{
		Binary: bin, Nodes: nodes, DatabaseURL: dbURL, Dir: t.TempDir(), Env: env, Logf: t.Logf,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Tails(60))
		}
		require.NoError(t, c.Close())
	})
	w, err := clustertest.Setup(ctx, c, fake)
	require.NoError(t, err)
	t.Cleanup(w.Close)
	return &bundle{c: c, w: w, fake: fake}
}

// requireClean settles the run and checks it: nothing lost, nothing
// doubled, a clean ledger.
func (b *bundle) requireClean(t *testing.T, settle time.Duration) clustertest.Result {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, b.w.Settle(ctx, settle))
	res, err := b.w.Check(ctx)
	require.NoError(t, err)
	t.Log(res.String())
	require.True(t, res.OK(), "%s", res)
	require.Zero(t, res.Lost)
	require.Zero(t, res.Doubled)
	return res
}

func TestThreeInstancesMigrateOnceElectOneLeaderAndSurviveAKilledEventWorker(t *testing.T) {
	t.Parallel()
	b := setup(t, 3, "")
	ctx := context.Background()

	// Migrations ran exactly once: all of them applied by one instance, the
	// others waited for the migration role and found nothing to do.
	var applied, distinct int
	require.NoError(t, b.c.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT version_id) FROM goose_db_version WHERE version_id > 0`).Scan(&applied, &distinct))
	require.EqualValues(t, migrate.KnownVersion(), applied, "every migration of this build, numbered 1 to the last")
	require.EqualValues(t, migrate.KnownVersion(), distinct)
	var migrators int
	total := 0
	for _, n := range b.c.Nodes {
		if m := n.Logged("migration applied"); m > 0 {
			migrators++
			total += m
		}
	}
	require.Equal(t, 1, migrators, "one instance applied the migrations")
	require.EqualValues(t, migrate.KnownVersion(), total)
	// It did so under the `migration` lease, which nobody else held, and
	// resigned it afterwards.
	for _, n := range b.c.Nodes {
		gained := 0
		for _, ch := range n.Leadership() {
			if ch.Role == "migration" && ch.Leading {
				gained++
			}
		}
		if n.Logged("migration applied") > 0 {
			require.Equal(t, 1, gained, "%s migrated under the lease", n.Name)
		} else {
			require.Zero(t, gained, "%s had nothing to migrate and took no lease", n.Name)
		}
	}
	require.NoError(t, b.c.CheckLeadership("migration"))
	leases, err := b.c.Leases(ctx)
	require.NoError(t, err)
	require.NotContains(t, leases, "migration", "resigned when the run ended")

	// One leader per role, and it is one of ours.
	worker, err := b.c.WaitLeader(ctx, "event_worker", nil)
	require.NoError(t, err)
	biller, err := b.c.WaitLeader(ctx, "billing", nil)
	require.NoError(t, err)

	// Load on every node: orders, payments, duplicate and hostile callbacks.
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		b.w.Run(loadCtx, clustertest.LoadOptions{Workers: 4, Duplicates: 0.7, Hostile: 0.3})
	}()
	defer func() { stopLoad(); <-loadDone }()

	// Sample the lease table while the load runs: one row per role (its
	// key), held by one of the nodes, and how long a role went unheld.
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan map[string]time.Duration, 1)
	go func() {
		gaps, unheldSince := map[string]time.Duration{}, map[string]time.Time{}
		for sampleCtx.Err() == nil {
			leases, err := b.c.Leases(sampleCtx)
			now := time.Now()
			for _, role := range []string{"event_worker", "billing"} {
				l, ok := leases[role]
				held := err == nil && ok && l.Valid && b.c.NodeOf(l.Holder) != nil
				switch {
				case held:
					if since, was := unheldSince[role]; was {
						gaps[role] = max(gaps[role], now.Sub(since))
						delete(unheldSince, role)
					}
				case err == nil:
					if _, was := unheldSince[role]; !was {
						unheldSince[role] = now
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		sampled <- gaps
	}()
	time.Sleep(3 * time.Second)

	// Crash the event_worker leader mid-load: no resignation, no handed
	// back events. Another instance must take over within one TTL of the
	// kill. Measured on the database clock, from the moment the kill has
	// returned (the process is gone: its last renewal was before that
	// moment, so its lease ends at most one TTL after it) to the
	// successor's election, so the harness's polling is not part of it.
	leases, err = b.c.Leases(ctx)
	require.NoError(t, err)
	dead := leases["event_worker"]
	killedAt, err := worker.Kill()
	require.NoError(t, err)
	var killedAtDB time.Time
	require.NoError(t, b.c.Pool.QueryRow(ctx, `SELECT now()`).Scan(&killedAtDB))
	next, err := b.c.WaitLeader(ctx, "event_worker", worker)
	require.NoError(t, err)
	observed := time.Since(killedAt)
	leases, err = b.c.Leases(ctx)
	require.NoError(t, err)
	elected := leases["event_worker"].ElectedAt
	takeover := elected.Sub(killedAtDB)
	ttl := 3 * time.Second
	t.Logf("event_worker: %s killed (its lease, read just before, had %s left; it may have renewed once more); %s elected %s after the kill, seen by the harness after %s",
		worker.Name, dead.ExpiresIn.Round(time.Millisecond), next.Name, takeover.Round(time.Millisecond), observed.Round(time.Millisecond))
	// A follower bids 5 ms after the expiry it read from the database;
	// internal/cluster's TestKilledLeaderIsReplacedWithinOneTTL holds that
	// promptness tightly. Here three processes share 2 CPUs with the load
	// generator and the other tests of the command, so the slack is process
	// scheduling (seen past 500 ms on a loaded CI machine), not another
	// renew interval: the property is one TTL, not a timing target.
	const slack = time.Second
	require.Less(t, takeover, ttl+slack, "takeover within one TTL of the kill")
	require.False(t, elected.Before(dead.ExpiresAt), "not before the dead leader's lease ran out")

	// Keep the load on the two survivors for a while, then stop it.
	time.Sleep(4 * time.Second)
	stopLoad()
	<-loadDone
	stopSampling()
	gaps := <-sampled
	t.Logf("longest time a role had no valid lease: %v", gaps)
	if biller == worker {
		// Both roles were on the killed process: billing was taken over
		// like event_worker, from its lease's end.
		require.Less(t, gaps["billing"], ttl+slack, "billing taken over within one TTL of the kill")
	} else {
		require.Less(t, gaps["billing"], time.Second, "the billing leader was not killed: its role never lapsed")
	}

	// Every paid order has exactly one order_paid event, every event is done
	// or visibly failed, no order provisioned twice, nothing lost or doubled.
	res := b.requireClean(t, 60*time.Second)
	require.Greater(t, res.Ledger.Totals.SettledPayments, int64(10), "the load did something")
	var paidOrders, orderPaid, active int
	require.NoError(t, b.c.Pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM orders WHERE paid_at IS NOT NULL),
		(SELECT count(*) FROM events WHERE event_type = 'order_paid'),
		(SELECT count(*) FROM orders WHERE status = 'active')`).Scan(&paidOrders, &orderPaid, &active))
	require.Equal(t, paidOrders, orderPaid)
	require.Equal(t, paidOrders, active)

	// At no moment did two instances act as leader of a role.
	require.NoError(t, b.c.CheckLeadership("event_worker"))
	require.NoError(t, b.c.CheckLeadership("billing"))
}
