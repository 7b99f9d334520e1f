package clustertest_test

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/clustertest"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/migrate"
	"github.com/rustbill/paymentd/internal/testdb"
)

// replacement is one instance's binary replaced, as an operator does it:
// from the SIGTERM to the new process's /ready.
type replacement struct {
	name string
	node string
	// from is the SIGTERM, exited when the old process was gone, to when
	// the new one answered /ready.
	from, exited, to time.Time
	// failed are the exchanges through the balancer that failed during it;
	// window is from the first one's start to the last one's end.
	failed []clustertest.Exchange
	window time.Duration
}

// during reports whether [start, end] overlaps the replacement.
func (r *replacement) during(start, end time.Time) bool {
	return !end.Before(r.from) && !start.After(r.to)
}

// explains reports whether the replacement accounts for a failed call: the
// stopping instance took it and broke it off, and it was sent before that
// instance was gone — a connection its closing listener had queued. A call
// that failed because an instance was down, not ready yet, or busy
// migrating, or that another instance failed, is not explained.
func (r *replacement) explains(ex clustertest.Exchange) bool {
	return r.during(ex.Start, ex.End) && ex.Node == r.node && !ex.Start.After(r.exited)
}

// replace stops n with SIGTERM (it must drain and exit cleanly), starts bin
// in its place on the same port and waits for /ready.
func replace(ctx context.Context, t *testing.T, name string, n *clustertest.Node, bin, plugins string) *replacement {
	t.Helper()
	r := &replacement{name: name, node: n.Name, from: time.Now()}
	require.NoError(t, n.Stop(30*time.Second), "%s drains and exits cleanly on SIGTERM", n.Name)
	r.exited = time.Now()
	n.Use(bin, plugins)
	require.NoError(t, n.Start())
	require.NoError(t, n.WaitReady(ctx))
	r.to = time.Now()
	t.Logf("%s: %s exited %s after the SIGTERM, the new process was ready %s after it", name, n.Name,
		r.exited.Sub(r.from).Round(time.Millisecond), r.to.Sub(r.from).Round(time.Millisecond))
	return r
}

// migrations counts the numbered migration files of a tree.
func migrations(t *testing.T, fsys fs.FS) int {
	t.Helper()
	files, err := fs.Glob(fsys, "[0-9][0-9][0-9][0-9][0-9]_*.sql")
	require.NoError(t, err)
	return len(files)
}

// addStandInMigration makes the database what an additive migration of a
// later build leaves (a migration number past every build's, a new table,
// a nullable column on a table the release writes), for the rollback to
// meet while this code adds no migration to the release's. The table's
// name sorts first: the release's warning names the first five objects it
// leaves alone (changed ones, then tables by name, then the rest), and this
// code's own tables (disputes, invoice_lines, ...) would push a later name
// into "and N more".
func addStandInMigration(ctx context.Context, t *testing.T, pool *pgxpool.Pool, version int) {
	t.Helper()
	_, err := pool.Exec(ctx, `CREATE TABLE a_rolling_stand_in (id bigint PRIMARY KEY, note text)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ALTER TABLE payments ADD COLUMN rolling_stand_in text`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`, version)
	require.NoError(t, err)
}

// Two instances of the release (.ci/upgrade-from) serve a load through a
// load balancer — orders paid through epay and from the balance, duplicate
// and hostile callbacks, refunds, renewals on a moving billing clock, and
// the gateway's own notifications sent again and again (a storm) — while
// an operator replaces one with this code's binary (it applies this code's
// migrations while the other still runs the release), then the other,
// then rolls the first back to the release on the database this code
// migrated, with a stand-in for an additive migration of a later release.
// Each replacement is SIGTERM, a clean exit, a start, /ready; the balancer
// passes a refused connection to the next instance, as nginx does by
// default. Both builds run one configuration, so the harness's settings
// must be keys the release knows.
//
// Nothing is lost or doubled and the ledger is clean (Settle, Check). The
// only calls that fail, the gateway's notifications included, are ones the
// stopping instance had been sent before it exited and broke off — a
// connection its closing listener had queued — within the documented
// window (docs/operations.md, "Upgrading"); every notification refused so
// is acknowledged when the gateway sends it again. The rolled-back release
// serves, with a warning line naming what it leaves alone.
func TestARollingUpgradeFromTheReleaseAndBackLosesNothingAndFailsOnlyCallsCaughtInAStop(t *testing.T) {
	t.Parallel()
	began := time.Now()
	from, err := clustertest.UpgradeFrom()
	require.NoError(t, err)
	var release clustertest.Built
	var current string
	var relErr, curErr error
	buildCtx, cancelBuilds := context.WithTimeout(context.Background(), 10*time.Minute)
	var builds sync.WaitGroup
	builds.Go(func() { release, relErr = clustertest.BuildCommit(buildCtx, from) })
	builds.Go(func() { current, curErr = clustertest.Build(buildCtx) })
	builds.Wait()
	cancelBuilds()
	require.NoError(t, relErr)
	require.NoError(t, curErr)
	t.Logf("built the release %s and this code in %s", from[:12], time.Since(began).Round(time.Second))
	relMigrations := migrations(t, os.DirFS(filepath.Join(release.Src, "sql", "migrations")))
	curMigrations := migrations(t, migrate.FS())
	require.GreaterOrEqual(t, curMigrations, relMigrations, "this code keeps the release's migrations")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	bal, err := clustertest.StartBalancer()
	require.NoError(t, err)
	t.Cleanup(bal.Close)
	fake := epay.New(epay.Options{NotifyScale: 0.01})
	require.NoError(t, fake.Start())
	t.Cleanup(fake.Close)
	c, err := clustertest.Start(ctx, clustertest.Options{
		Binary: release.Binary, Plugins: release.Plugins, Nodes: 2,
		DatabaseURL: testdb.EmptyURL(t), Dir: t.TempDir(), Logf: t.Logf,
		Env: append([]string{"PAYMENTD_SERVER__PUBLIC_URL=" + bal.URL()}, clustertest.RenewalEnv...),
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Tails(60))
		}
		require.NoError(t, c.Close())
	})
	bal.Route(c)
	w, err := clustertest.Setup(ctx, c, fake)
	require.NoError(t, err)
	t.Cleanup(w.Close)
	w.Through(bal)
	b := &bundle{c: c, w: w, fake: fake}

	// The load, through the balancer; the gateway notifies the balancer.
	loadCtx, stopLoad := context.WithCancel(ctx)
	var load sync.WaitGroup
	stop := sync.OnceFunc(func() { stopLoad(); load.Wait() })
	defer stop()
	load.Go(func() {
		w.Run(loadCtx, clustertest.LoadOptions{Workers: 3, Duplicates: 0.5, Hostile: 0.2, Refunds: 0.1, Balance: 0.2})
	})
	renewals := w.NewRenewals(clustertest.RenewalOptions{Customers: 4, Every: 2 * time.Second, Balance: 0.5, Refunds: 0.2})
	load.Go(func() { renewals.Run(loadCtx) })
	var stormed atomic.Int64
	load.Go(func() {
		// The storm: the gateway notifies again about paid orders, one new
		// round every 20 ms, each retried on the gateway's schedule until
		// acknowledged.
		for loadCtx.Err() == nil {
			var paid []string
			for _, o := range fake.Orders() {
				if o.Paid {
					paid = append(paid, o.TradeNo)
				}
			}
			if len(paid) > 0 && fake.Renotify(paid[rand.IntN(len(paid))]) == nil {
				stormed.Add(1)
			}
			select {
			case <-loadCtx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	// Both versions serve a while between the steps.
	serveAWhile := func() { time.Sleep(3 * time.Second) }
	serveAWhile()

	// The upgrade, one instance at a time; the first to start applies this
	// code's migrations (none yet beyond the release's nine).
	var swaps []*replacement
	applied := func() int {
		var v int
		require.NoError(t, c.Pool.QueryRow(ctx, `SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied`).Scan(&v))
		return v
	}
	require.Equal(t, relMigrations, applied(), "the release made the database")
	for i, n := range c.Nodes {
		before := n.Logged("migration applied")
		swaps = append(swaps, replace(ctx, t, fmt.Sprintf("upgrade %d of %d", i+1, len(c.Nodes)), n, current, ""))
		require.Equal(t, curMigrations, applied(), "the database has this code's migrations")
		want := 0
		if i == 0 {
			want = curMigrations - relMigrations
		}
		require.Equal(t, want, n.Logged("migration applied")-before, "%s applied this code's migrations, the first to start", n.Name)
		serveAWhile()
	}

	// The rollback of one instance to the release, on a database this code
	// migrated additively; a stand-in migration makes it one today.
	addStandInMigration(ctx, t, c.Pool, curMigrations+1)
	back := c.Nodes[0]
	swaps = append(swaps, replace(ctx, t, "rollback", back, release.Binary, release.Plugins))
	logged, err := back.LogText()
	require.NoError(t, err)
	// The release's warning names the first five differences, the changed
	// ones first (this code's changes to the release's objects, such as
	// 00019's partial indexes), so the stand-in may be among "and N more";
	// the migration it recorded is always there.
	warned := false
	for _, l := range strings.Split(logged, "\n") {
		warned = warned || (strings.Contains(l, "schema check") && strings.Contains(l, "left alone") &&
			strings.Contains(l, fmt.Sprintf(`"recorded_migration":%d`, curMigrations+1)))
	}
	require.True(t, warned, "the release says what it leaves alone at start, on a database of a newer migration")
	serveAWhile()
	stop()

	res := b.requireClean(t, 90*time.Second)
	require.Greater(t, res.Ledger.Totals.SettledPayments, int64(20), "the load did something")
	require.NoError(t, c.CheckLeadership("event_worker"))
	require.NoError(t, c.CheckLeadership("billing"))

	// What failed, and when: only calls the stopping instance had taken
	// as it closed, during its replacement.
	exchanges := bal.Exchanges()
	var unexplained []string
	callbacks, failedCallbacks := 0, 0
	for _, ex := range exchanges {
		if strings.HasPrefix(ex.Path, "/callbacks/") {
			callbacks++
		}
		if !ex.Failed() {
			continue
		}
		if strings.HasPrefix(ex.Path, "/callbacks/") {
			failedCallbacks++
		}
		var in *replacement
		for _, r := range swaps {
			if r.explains(ex) {
				in = r
			}
		}
		if in == nil {
			unexplained = append(unexplained, ex.String())
			continue
		}
		in.failed = append(in.failed, ex)
	}
	// The gateway's refused notifications, and whether a later attempt
	// about the same payment (its retry) was acknowledged.
	var refused []epay.Notification
	notifications := fake.Notifications()
	unacked := map[string]bool{}
	for _, nf := range notifications {
		switch {
		case nf.Acked:
			delete(unacked, nf.TradeNo)
		case !nf.Dropped:
			refused = append(refused, nf)
			unacked[nf.TradeNo] = true
		}
	}
	for _, r := range swaps {
		if len(r.failed) > 0 {
			first, last := r.failed[0].Start, r.failed[0].End
			for _, ex := range r.failed {
				if ex.Start.Before(first) {
					first = ex.Start
				}
				if ex.End.After(last) {
					last = ex.End
				}
			}
			r.window = last.Sub(first)
		}
		t.Logf("%s: SIGTERM %s, exit %s, ready %s; %d calls failed, within %s: %v", r.name, r.from.Format("15:04:05.000"),
			r.exited.Format("15:04:05.000"), r.to.Format("15:04:05.000"), len(r.failed), r.window.Round(time.Millisecond), r.failed)
	}
	for _, nf := range refused {
		t.Logf("the gateway's notification of %s at %s was refused: %d %q %s", nf.OutTradeNo, nf.At.Format("15:04:05.000"), nf.Status, nf.Body, nf.Err)
	}
	t.Logf("%d calls through the balancer, %d of them the gateway's notifications (%d storm rounds); %d failed callbacks, %d notifications the gateway saw refused; %s; %s in all",
		len(exchanges), callbacks, stormed.Load(), failedCallbacks, len(refused), renewals, time.Since(began).Round(time.Second))
	require.Empty(t, unexplained, "calls failed that no replacement explains")
	require.Equal(t, failedCallbacks, len(refused), "the callbacks that failed are the gateway's refused notifications")
	require.Empty(t, unacked, "every refused notification was acknowledged when the gateway sent it again")
	for _, r := range swaps {
		require.LessOrEqual(t, r.window, unavailableWindow, "%s: the documented bound", r.name)
	}
}

// unavailableWindow bounds, per replaced instance, the time during which
// a call through the balancer may fail (docs/operations.md, "Upgrading").
const unavailableWindow = time.Second
