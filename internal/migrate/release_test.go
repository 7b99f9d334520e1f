package migrate_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/migrate"
	"github.com/rustbill/paymentd/internal/testdb"
)

// A released migration is never edited (docs/decisions.md, "Released
// migrations"): each file of a release is the one whose sum
// releases/migrations.txt records, and the one in the release's commit.
// The sums hold without git; the commit's copy holds the sums themselves.
func TestReleasedMigrationsAreNeverEdited(t *testing.T) {
	t.Parallel()
	files := map[string]bool{}
	entries, err := fs.ReadDir(migrate.FS(), ".")
	require.NoError(t, err)
	for _, e := range entries {
		files[e.Name()] = true
	}
	listed := map[string]map[int64]bool{}
	for _, m := range migrate.ReleasedMigrations() {
		raw, err := fs.ReadFile(migrate.FS(), m.File)
		require.NoError(t, err, "released migration %s (%s) is gone: a released migration is never removed", m.File, m.Release)
		sum := sha256.Sum256(raw)
		require.Equal(t, m.SHA256, hex.EncodeToString(sum[:]),
			"sql/migrations/%s was released in %s and has been edited: undo the edit and write the change as a new migration (docs/development.md, \"Adding a column\")", m.File, m.Release)
		if listed[m.Release] == nil {
			listed[m.Release] = map[int64]bool{}
		}
		prefix, _, _ := strings.Cut(m.File, "_")
		v, err := strconv.ParseInt(prefix, 10, 64)
		require.NoError(t, err, "a migration file begins with its number: %s", m.File)
		listed[m.Release][v] = true
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	for _, r := range migrate.Releases {
		for v := int64(1); v <= r.Migration; v++ {
			require.True(t, listed[r.Version][v], "release %s's migration %05d has no sum in releases/migrations.txt", r.Version, v)
		}
		if r.Commit == "" {
			t.Logf("%s is this commit: its migrations are the files here", r.Version)
			continue
		}
		require.Regexp(t, `^[0-9a-f]{40}$`, r.Commit)
		for _, m := range migrate.ReleasedMigrations() {
			if m.Release != r.Version {
				continue
			}
			path := "sql/migrations/" + m.File
			out, err := exec.Command("git", "-C", root, "show", r.Commit+":"+path).Output()
			require.NoError(t, err, "read %s from %s's commit %s: run the tests in a full clone (git fetch --unshallow in a shallow one)", path, r.Version, r.Commit)
			now, err := fs.ReadFile(migrate.FS(), m.File)
			require.NoError(t, err)
			require.Equal(t, string(out), string(now), "%s differs from %s's copy (commit %s): a released migration is never edited", path, r.Version, r.Commit[:12])
		}
	}
}

// releases/<version>.schema.txt is what the release's migrations make:
// an empty database migrated up to its last one reads the same.
func TestTheReleasesSchemaIsWhatItsMigrationsMake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, r := range migrate.Releases {
		url := testdb.EmptyURL(t)
		pool := newPool(t, url)
		p, err := goose.NewProvider(goose.DialectPostgres, open(t, url), migrate.FS())
		require.NoError(t, err)
		_, err = p.UpTo(ctx, r.Migration)
		require.NoError(t, err)
		want, err := migrate.ReleasedSchema(r.Version)
		require.NoError(t, err)
		live, err := migrate.ReadSchema(ctx, pool)
		require.NoError(t, err)
		require.Empty(t, migrate.CompareSchema(want, live, false), "%s's schema file is not what its migrations make", r.Version)
		require.Greater(t, len(want), 300)
	}
}

// releasePool is a database at the first release's last migration: a
// clone of this build's, the migrations after the release's rolled back.
func releasePool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	url := testdb.URL(t)
	require.NoError(t, migrate.DownTo(ctx, open(t, url), migrate.FirstRelease().Migration))
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// A database at a release's last migration gets a newer build's
// migrations only if it has the release's schema. A pre-release build's
// database (the same nine migrations recorded, other contents) is refused
// before anything is applied, in one line that says so.
func TestAPreReleaseDatabaseIsRefusedBeforeNewerMigrationsRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first := migrate.FirstRelease()

	// The release's own database: newer migrations may run.
	pool := releasePool(t)
	require.NoError(t, migrate.CheckBeforeUp(ctx, pool, first.Migration, first.Migration+1))

	// A pre-release build's: a column of the release missing, one it did
	// not have.
	pool = releasePool(t)
	for _, sql := range []string{
		`ALTER TABLE customers DROP COLUMN token_generation`,
		`ALTER TABLE customers ADD COLUMN legacy_flag boolean NOT NULL`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err)
	}
	// Nothing newer to apply: the check after the run decides.
	require.NoError(t, migrate.CheckBeforeUp(ctx, pool, first.Migration, first.Migration))
	err := migrate.CheckBeforeUp(ctx, pool, first.Migration, first.Migration+1)
	require.ErrorIs(t, err, migrate.ErrSchemaDrift)
	msg := err.Error()
	require.NotContains(t, msg, "\n")
	require.Contains(t, msg, "column customers.token_generation is missing (00001_identity.sql makes it) (and 2 more refused)")
	require.Contains(t, msg, "the database records migration 00009, the last of v0.1.0, without v0.1.0's schema, so this build's newer migrations were not applied")
	require.Contains(t, msg, "if a pre-release build (from before v0.1.0) made this database, it has no upgrade path")

	// The check after a run says the same of a pre-release database.
	r, err := migrate.CheckSchema(ctx, pool)
	require.NoError(t, err)
	require.Contains(t, r.Err().Error(), "nothing was served: if a pre-release build (from before v0.1.0) made this database, it has no upgrade path: export what you keep and start on a new database (CHANGELOG.md, v0.1.0)")
	require.True(t, strings.HasPrefix(r.Err().Error(), "schema check: "))
}

// The release is recorded where every clone sees it, the same in each
// place: CHANGELOG.md's heading, .ci/upgrade-from (what the upgrade tests
// start from) and migrate.Releases.
func TestTheNewestReleaseIsNamedAlikeInTheChangelogAndUpgradeFrom(t *testing.T) {
	t.Parallel()
	newest := migrate.Releases[len(migrate.Releases)-1]
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	require.NoError(t, err)
	heading := `(?m)^## ` + regexp.QuoteMeta(newest.Version) + ` — \d{4}-\d{2}-\d{2}`
	if newest.Commit == "" {
		// The release's own commit, which cannot name itself: its heading
		// names no commit either.
		require.Regexp(t, heading+`$`, string(changelog))
		return
	}
	require.Regexp(t, heading+`, commit `+newest.Commit+`$`, string(changelog))
	upgradeFrom, err := os.ReadFile(filepath.Join(root, ".ci", "upgrade-from"))
	require.NoError(t, err)
	require.Regexp(t, `(?m)^`+newest.Commit+`$`, string(upgradeFrom), ".ci/upgrade-from names the newest release")
}
