package migrate_test

import (
	"context"
	"database/sql"
	"io/fs"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rustbill/paymentd/internal/migrate"
	"github.com/rustbill/paymentd/internal/testdb"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(helperEnv); url != "" {
		os.Exit(killedMigrator(url))
	}
	goleak.VerifyTestMain(testdb.Main(m))
}

func open(t *testing.T, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", url)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// latest is the number of the newest migration: the migrations are
// numbered 1, 2, ... without a gap (TestTheContractsNineMigrationsComeFirstNumberedWithoutAGap).
var latest = func() int {
	files, err := fs.Glob(migrate.FS(), "*.sql")
	if err != nil {
		panic(err)
	}
	return len(files)
}()

func appliedVersions(t *testing.T, db *sql.DB) int {
	t.Helper()
	st, err := migrate.Status(context.Background(), db)
	require.NoError(t, err)
	n := 0
	for _, s := range st {
		if !s.AppliedAt.IsZero() {
			n++
		}
	}
	return n
}

// The contract's nine migrations are the first release's; later ones
// follow them, numbered on without a gap (docs/decisions.md, "Released
// migrations").
func TestTheContractsNineMigrationsComeFirstNumberedWithoutAGap(t *testing.T) {
	t.Parallel()
	db := open(t, testdb.EmptyURL(t))
	st, err := migrate.Status(context.Background(), db)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(st), 9, "the API contract counts 9 migrations (docs/api.md)")
	require.EqualValues(t, 9, migrate.FirstRelease().Migration, "the first release is the contract's nine")
	for i, s := range st {
		require.EqualValues(t, i+1, s.Source.Version)
	}
}

func TestUpDownUpOnARealDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := open(t, testdb.EmptyURL(t))
	require.NoError(t, migrate.Up(ctx, db))
	require.Equal(t, latest, appliedVersions(t, db))
	require.NoError(t, migrate.Up(ctx, db), "a second run has nothing to do")

	require.NoError(t, migrate.Down(ctx, db))
	require.Equal(t, latest-1, appliedVersions(t, db))
	require.NoError(t, migrate.DownTo(ctx, db, 0))
	require.Equal(t, 0, appliedVersions(t, db))

	var tables int
	require.NoError(t, db.QueryRowContext(ctx,
		`SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' AND table_name <> 'goose_db_version'`).Scan(&tables))
	require.Zero(t, tables, "down to zero leaves only goose's own table")

	require.NoError(t, migrate.Up(ctx, db))
	require.Equal(t, latest, appliedVersions(t, db))
}

func TestConcurrentInstancesMigrateOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.EmptyURL(t)
	const instances = 3
	var wg sync.WaitGroup
	errs := make([]error, instances)
	for i := range instances {
		wg.Go(func() {
			db, err := sql.Open("pgx", url)
			if err != nil {
				errs[i] = err
				return
			}
			defer db.Close()
			errs[i] = migrate.Up(ctx, db)
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	db := open(t, url)
	var rows int
	require.NoError(t, db.QueryRowContext(ctx, `SELECT count(*) FROM goose_db_version WHERE version_id > 0`).Scan(&rows))
	require.Equal(t, latest, rows, "each migration applied exactly once")
}

func TestWaiterGivesUpWhenTheMigrationRoleStaysTaken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.EmptyURL(t)

	// Another "instance" holds the migration role and never finishes.
	holder, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer holder.Close(ctx)
	_, err = holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrate.LockID)
	require.NoError(t, err)

	db := open(t, url)
	start := time.Now()
	err = migrate.UpWith(ctx, db, migrate.Options{Wait: 2 * time.Second})
	require.Error(t, err)
	require.Less(t, time.Since(start), 10*time.Second)
	require.Equal(t, 0, appliedVersions(t, db), "nothing applied while another instance holds the role")

	// Once the holder is gone, the waiter's next attempt migrates.
	require.NoError(t, holder.Close(ctx))
	require.NoError(t, migrate.UpWith(ctx, db, migrate.Options{Wait: 5 * time.Second}))
	require.Equal(t, latest, appliedVersions(t, db))
}

func TestFingerprintIsStable(t *testing.T) {
	t.Parallel()
	require.Len(t, migrate.Fingerprint(), 64)
	require.Equal(t, migrate.Fingerprint(), migrate.Fingerprint())
}
