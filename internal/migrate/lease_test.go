package migrate_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/migrate"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// migrationLease is the `migration` row of leader_leases, if any, on the
// database clock.
type migrationLease struct {
	holder             string
	electedAt, expires time.Time
	valid              bool
}

func readMigrationLease(t *testing.T, db *sql.DB) (migrationLease, bool) {
	t.Helper()
	var l migrationLease
	err := db.QueryRowContext(context.Background(), `SELECT holder, elected_at, expires_at, expires_at > now()
		FROM leader_leases WHERE role = 'migration'`).Scan(&l.holder, &l.electedAt, &l.expires, &l.valid)
	if errors.Is(err, sql.ErrNoRows) {
		return l, false
	}
	require.NoError(t, err)
	return l, true
}

// While a run migrates, the `migration` role is a row of leader_leases
// like billing and event_worker — once the migration creating the table
// has run — and the admin view (store.ListLeases, behind
// EventAdminService.ListLeaders) shows it; the run resigns it at the end.
func TestTheMigrationLeaseIsVisibleWhileMigratingAndResignedAfter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.EmptyURL(t)
	db := open(t, url)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	type seen struct {
		version int64
		leases  []store.LeaseState
	}
	var during []seen
	o := migrate.WithBeforeMigration(migrate.Options{Holder: "migrator-a", LeaseTTL: 3 * time.Second, LeaseRenew: time.Second},
		func(ctx context.Context, version int64) error {
			s := seen{version: version}
			if version > 8 { // 00008 creates leader_leases
				var err error
				s.leases, err = store.Q(pool).ListLeaderLeases(ctx)
				if err != nil {
					return err
				}
			}
			during = append(during, s)
			return nil
		})
	require.NoError(t, migrate.UpWith(ctx, db, o))
	require.Len(t, during, latest, "one call before each migration")
	last := during[latest-1]
	require.EqualValues(t, latest, last.version)
	require.Len(t, last.leases, 1)
	require.Equal(t, cluster.RoleMigration, last.leases[0].Role)
	require.Equal(t, "migrator-a", last.leases[0].Holder)
	require.True(t, last.leases[0].Valid)

	_, held := readMigrationLease(t, db)
	require.False(t, held, "resigned when the run ended")
	require.Equal(t, latest, appliedVersions(t, db))

	// Nothing pending: a later run takes neither lock for long nor lease.
	var calls int
	require.NoError(t, migrate.UpWith(ctx, db, migrate.WithBeforeMigration(migrate.Options{Holder: "migrator-b"},
		func(context.Context, int64) error { calls++; return nil })))
	require.Zero(t, calls)
	_, held = readMigrationLease(t, db)
	require.False(t, held)
}

// Three instances start together on an empty database: one migrates, the
// others wait for the role and find nothing to do; the lease was only ever
// held by the one that migrated.
func TestConcurrentInstancesMigrateOnceUnderTheLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.EmptyURL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	const instances = 3
	var mu sync.Mutex
	applied := map[string][]int64{}
	holders := map[string]bool{}
	var wg sync.WaitGroup
	errs := make([]error, instances)
	for i := range instances {
		name := "instance-" + string(rune('a'+i))
		wg.Go(func() {
			db, err := sql.Open("pgx", url)
			if err != nil {
				errs[i] = err
				return
			}
			defer db.Close()
			o := migrate.WithBeforeMigration(migrate.Options{Holder: name, LeaseTTL: 3 * time.Second, LeaseRenew: time.Second},
				func(ctx context.Context, version int64) error {
					var holder string
					if version > 8 {
						if err := pool.QueryRow(ctx, `SELECT holder FROM leader_leases WHERE role = 'migration' AND expires_at > now()`).Scan(&holder); err != nil {
							return err
						}
					}
					mu.Lock()
					defer mu.Unlock()
					applied[name] = append(applied[name], version)
					if holder != "" {
						holders[holder] = true
					}
					return nil
				})
			errs[i] = migrate.UpWith(ctx, db, o)
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, applied, 1, "one instance migrated: %v", applied)
	for name, versions := range applied {
		want := make([]int64, latest)
		for i := range want {
			want[i] = int64(i + 1)
		}
		require.Equal(t, want, versions)
		require.Equal(t, map[string]bool{name: true}, holders, "the migrator held the lease")
	}
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM goose_db_version WHERE version_id > 0`).Scan(&rows))
	require.Equal(t, latest, rows, "each migration applied exactly once")
}

// helperEnv makes the test binary, run again as a child process, act as a
// migrator that stops before the last migration and waits to be killed.
const helperEnv = "MIGRATE_TEST_KILLED_MIGRATOR_URL"

// killedMigrator is the child process of
// TestAKilledMigratorsLeaseExpiresAndAnotherTakesOver (TestMain runs it
// instead of the tests when helperEnv is set): a migrator that stops
// before the last migration, renewing its lease, until it is killed.
func killedMigrator(url string) int {
	db, err := sql.Open("pgx", url)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 2
	}
	o := migrate.WithBeforeMigration(migrate.Options{Holder: "migrator-killed", LeaseTTL: 2 * time.Second, LeaseRenew: 400 * time.Millisecond},
		func(ctx context.Context, version int64) error {
			if version == int64(latest) {
				os.Stdout.WriteString("paused before the last\n")
				select {} // until killed, renewing the lease meanwhile
			}
			return nil
		})
	_ = migrate.UpWith(context.Background(), db, o)
	os.Stderr.WriteString("the killed migrator was not killed\n")
	return 1
}

// A migrator killed with SIGKILL mid-run leaves its `migration` lease row
// (its advisory lock goes with its session). The next instance takes the
// role over the way other roles are taken over: it waits until that lease
// expires on the database clock — within one TTL of the kill — then takes
// the lease and applies what is left, each migration exactly once.
func TestAKilledMigratorsLeaseExpiresAndAnotherTakesOver(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.EmptyURL(t)
	db := open(t, url)

	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), helperEnv+"="+url)
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	paused := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "paused before the last") {
				close(paused)
			}
		}
	}()
	testkit.WaitOrTimeoutFor(t, paused, 60*time.Second, "the child migrator to reach the last migration")
	dead, held := readMigrationLease(t, db)
	require.True(t, held)
	require.Equal(t, "migrator-killed", dead.holder)
	require.True(t, dead.valid)
	require.Equal(t, latest-1, appliedVersions(t, db))

	var killedAt time.Time
	require.NoError(t, db.QueryRowContext(ctx, `SELECT now()`).Scan(&killedAt))
	require.NoError(t, child.Process.Kill())
	_ = child.Wait()

	const ttl = 2 * time.Second
	var tookOver time.Time
	var versions []int64
	o := migrate.WithBeforeMigration(migrate.Options{Holder: "migrator-next", Wait: 10 * time.Second, LeaseTTL: ttl, LeaseRenew: 400 * time.Millisecond},
		func(ctx context.Context, version int64) error {
			versions = append(versions, version)
			l, _ := readMigrationLease(t, db)
			if l.holder != "migrator-next" {
				return errors.New("migrating without the lease: held by " + l.holder)
			}
			tookOver = l.electedAt
			return nil
		})
	require.NoError(t, migrate.UpWith(ctx, db, o))
	require.Equal(t, []int64{int64(latest)}, versions, "only what was left")
	require.Equal(t, latest, appliedVersions(t, db))
	var rows int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM goose_db_version WHERE version_id > 0`).Scan(&rows))
	require.Equal(t, latest, rows)

	took := tookOver.Sub(killedAt)
	t.Logf("migration lease taken over %s after the kill (TTL %s)", took.Round(time.Millisecond), ttl)
	require.False(t, tookOver.Before(dead.expires), "not before the killed migrator's lease ran out")
	// The killed run renewed at most a renew interval before the kill; the
	// successor bids 5 ms after the expiry it reads. The slack is that
	// wake-up and a round trip on a loaded machine.
	require.Less(t, took, ttl+250*time.Millisecond, "within one TTL of the kill")
	_, held = readMigrationLease(t, db)
	require.False(t, held, "resigned at the end")
}
