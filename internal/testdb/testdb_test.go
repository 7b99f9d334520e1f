package testdb_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/testdb"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// requireMigrated checks that goose has applied at least one migration.
func requireMigrated(ctx context.Context, t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	var applied int
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT count(*) FROM goose_db_version WHERE version_id > 0 AND is_applied").Scan(&applied))
	require.Positive(t, applied)
}

func currentDatabase(ctx context.Context, t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var name string
	require.NoError(t, pool.QueryRow(ctx, "SELECT current_database()").Scan(&name))
	return name
}

// databaseExists asks the admin database whether name still exists.
func databaseExists(ctx context.Context, t *testing.T, name string) bool {
	t.Helper()
	base, err := testdb.BaseURL(ctx)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var exists bool
	require.NoError(t, conn.QueryRow(ctx,
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists))
	return exists
}

func TestParallelTestsGetDistinctMigratedDatabasesThatAreDroppedAfterwards(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)

	var (
		mu    sync.Mutex
		names []string
	)
	t.Run("group", func(t *testing.T) {
		for _, name := range []string{"first", "second"} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				pool := testdb.Pool(t)
				requireMigrated(ctx, t, pool)
				db := currentDatabase(ctx, t, pool)
				mu.Lock()
				names = append(names, db)
				mu.Unlock()
			})
		}
	})
	// The group returns after both subtests and their cleanups.

	require.Len(t, names, 2)
	require.NotEqual(t, names[0], names[1])
	for _, name := range names {
		require.True(t, strings.HasPrefix(name, "paymentd_test_testdb_"), name)
		require.False(t, databaseExists(ctx, t, name), "%s should be dropped after its test", name)
	}
}

func TestDatabaseIsDroppedEvenWhileATestLeavesAConnectionOpen(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)

	var (
		name string
		conn *pgx.Conn
	)
	t.Run("leaky", func(t *testing.T) {
		var err error
		conn, err = pgx.Connect(ctx, testdb.URL(t))
		require.NoError(t, err)
		require.NoError(t, conn.QueryRow(ctx, "SELECT current_database()").Scan(&name))
	})
	defer conn.Close(ctx)

	require.False(t, databaseExists(ctx, t, name))
}

func TestEachDatabaseIsIsolatedFromTheOthers(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	a, b := testdb.Pool(t), testdb.Pool(t)

	_, err := a.Exec(ctx, "CREATE TABLE only_in_a (id int)")
	require.NoError(t, err)

	var exists bool
	require.NoError(t, b.QueryRow(ctx, "SELECT to_regclass('only_in_a') IS NOT NULL").Scan(&exists))
	require.False(t, exists)
}

func TestSharedIsOneMigratedDatabaseForThePackage(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)

	urls := make(chan string, 2)
	t.Run("group", func(t *testing.T) {
		for _, name := range []string{"first", "second"} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				pool := testdb.SharedPool(t)
				requireMigrated(ctx, t, pool)
				urls <- testdb.Shared(t)
			})
		}
	})
	first, second := <-urls, <-urls
	require.Equal(t, first, second)
	require.Contains(t, first, "paymentd_test_testdb_")
}
