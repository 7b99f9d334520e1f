package testdb

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestResolveBaseURLPrefersEnvironmentThenLocalServerThenPrivateCluster(t *testing.T) {
	t.Parallel()
	answering := func(_ context.Context, u string) (string, bool) { return u, true }
	silent := func(context.Context, string) (string, bool) { return "", false }
	private := func(context.Context) (string, error) { return "postgres://postgres@127.0.0.1:23456/postgres", nil }

	tests := []struct {
		name  string
		env   string
		probe func(context.Context, string) (string, bool)
		want  string
	}{
		{name: "EnvironmentWins", env: "postgres://ci@db/x", probe: answering, want: "postgres://ci@db/x"},
		{name: "LocalServerWhenItAnswers", probe: answering, want: localURL},
		{name: "PrivateClusterOtherwise", probe: silent, want: "postgres://postgres@127.0.0.1:23456/postgres"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := resolveBaseURL(t.Context(), tt.env, tt.probe, private)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestProbeOfAPortWithoutServerFailsWithinASecond(t *testing.T) {
	t.Parallel()
	start := time.Now()
	_, ok := probe(t.Context(), "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5")
	require.False(t, ok)
	require.Less(t, time.Since(start), 2*time.Second)
}

func TestWithDatabaseReplacesTheDatabaseInBothConnectionStringForms(t *testing.T) {
	t.Parallel()
	for _, conn := range []string{
		"postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
		"postgresql://u:p%40ss@db.example:6543?sslmode=disable",
		"host=127.0.0.1 port=5432 user=postgres dbname=test sslmode=disable",
	} {
		got := withDatabase(conn, "paymentd_test_x")
		cfg, err := pgx.ParseConfig(got)
		require.NoError(t, err, got)
		require.Equal(t, "paymentd_test_x", cfg.Database, got)
		orig, err := pgx.ParseConfig(conn)
		require.NoError(t, err)
		require.Equal(t, orig.Host, cfg.Host)
		require.Equal(t, orig.Port, cfg.Port)
		require.Equal(t, orig.User, cfg.User)
		require.Equal(t, orig.Password, cfg.Password)
	}
}

func TestRepoRootIsTheDirectoryOfOurGoModNotOfAnother(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	tools := filepath.Join(root, "tools", "sub")
	require.NoError(t, os.MkdirAll(tools, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "go.mod"), []byte("module "+modulePath+"\n\ngo 1.26.0\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "tools", "go.mod"), []byte("module "+modulePath+"/tools\n"), 0o644))

	got, err := repoRoot(tools)
	require.NoError(t, err)
	require.Equal(t, root, got)

	_, err = repoRoot(t.TempDir())
	require.ErrorContains(t, err, "no go.mod of module "+modulePath)
}

func TestRepoRootFindsThisRepository(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	require.NoError(t, err)
	root, err := repoRoot(wd)
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "internal", "testdb", "doc.go"))
}

func TestPackageLabelIsAShortIdentifier(t *testing.T) {
	t.Parallel()
	require.Equal(t, "payment", packageLabel("/tmp/go-build1/b001/payment.test"))
	require.Equal(t, "my_pkg_v2", packageLabel("My-Pkg.v2.test"))
	require.Equal(t, "averyveryverylongpac", packageLabel("averyveryverylongpackagename.test"))
	require.Equal(t, "pkg", packageLabel("---.test"))
}

func TestCloneNameFitsAndCarriesItsCreationTime(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_790_000_000, 0)
	name, err := cloneName(packageLabel("averyveryverylongpackagename.test"), now)
	require.NoError(t, err)
	require.LessOrEqual(t, len(name), 63)
	require.True(t, strings.HasPrefix(name, clonePrefix))
	got, ok := cloneCreatedAt(name)
	require.True(t, ok)
	require.Equal(t, now, got)

	_, ok = cloneCreatedAt(clonePrefix + "hand_made")
	require.False(t, ok)
}

// adminConn connects to the test server's admin database.
func adminConn(t *testing.T) (context.Context, *pgx.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	base, err := BaseURL(ctx)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, base)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return ctx, conn
}

func databaseFlags(ctx context.Context, t *testing.T, conn *pgx.Conn, name string) (exists, isTemplate, allowConn bool) {
	t.Helper()
	err := conn.QueryRow(ctx, "SELECT datistemplate, datallowconn FROM pg_database WHERE datname = $1", name).
		Scan(&isTemplate, &allowConn)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, false, false
	}
	require.NoError(t, err)
	return true, isTemplate, allowConn
}

// testTemplateName is outside both prefixes testdb cleans up, so no
// concurrent test process drops it from under this test.
func testTemplateName(t *testing.T) string {
	name, err := cloneName("x", time.Now())
	require.NoError(t, err)
	return "paymentd_testtmpl_" + name[len(name)-8:]
}

func TestFailedMigrationLeavesNoTemplateBehind(t *testing.T) {
	t.Parallel()
	ctx, conn := adminConn(t)
	name := testTemplateName(t)

	failing := func(ctx context.Context, db *sql.DB) error {
		if _, err := db.ExecContext(ctx, "CREATE TABLE half_done (id int)"); err != nil {
			return err
		}
		return errors.New("migration 00042 failed")
	}
	err := buildTemplate(ctx, conn, mustBaseURL(ctx, t), name, failing)
	require.ErrorContains(t, err, "migration 00042 failed")

	for _, db := range []string{name, name + buildSuffix} {
		exists, _, _ := databaseFlags(ctx, t, conn, db)
		require.False(t, exists, db)
	}
}

func TestBuiltTemplateIsClosedToConnectionsAndClonable(t *testing.T) {
	t.Parallel()
	ctx, conn := adminConn(t)
	name := testTemplateName(t)
	t.Cleanup(func() { require.NoError(t, dropDatabase(context.Background(), conn, name)) })

	up := func(ctx context.Context, db *sql.DB) error {
		_, err := db.ExecContext(ctx, "CREATE TABLE marker (id int); INSERT INTO marker VALUES (7)")
		return err
	}
	require.NoError(t, buildTemplate(ctx, conn, mustBaseURL(ctx, t), name, up))

	exists, isTemplate, allowConn := databaseFlags(ctx, t, conn, name)
	require.True(t, exists)
	require.True(t, isTemplate)
	require.False(t, allowConn)
	buildExists, _, _ := databaseFlags(ctx, t, conn, name+buildSuffix)
	require.False(t, buildExists)

	clone := name + "_clone"
	require.NoError(t, cloneDatabase(ctx, mustBaseURL(ctx, t), name, clone))
	t.Cleanup(func() { require.NoError(t, dropDatabase(context.Background(), conn, clone)) })
	cc, err := pgx.Connect(ctx, withDatabase(mustBaseURL(ctx, t), clone))
	require.NoError(t, err)
	defer cc.Close(ctx)
	var id int
	require.NoError(t, cc.QueryRow(ctx, "SELECT id FROM marker").Scan(&id))
	require.Equal(t, 7, id)
}

func TestOrphanedClonesAreDroppedOnlyWhenOldAndUnused(t *testing.T) {
	t.Parallel()
	ctx, conn := adminConn(t)
	now := time.Now()
	old, err := cloneName("orphan", now.Add(-orphanAge-time.Hour))
	require.NoError(t, err)
	fresh, err := cloneName("orphan", now)
	require.NoError(t, err)
	for _, name := range []string{old, fresh} {
		_, err := conn.Exec(ctx, "CREATE DATABASE "+ident(name)+" TEMPLATE template0")
		require.NoError(t, err)
		t.Cleanup(func() { _ = dropDatabase(context.Background(), conn, name) })
	}

	// Under the lock, as ensureTemplate does: other test processes may be
	// cleaning up the same orphans right now.
	require.NoError(t, withLock(ctx, conn, func() error {
		dropOrphanClones(ctx, conn, now, t.Logf)
		return nil
	}))

	oldExists, _, _ := databaseFlags(ctx, t, conn, old)
	freshExists, _, _ := databaseFlags(ctx, t, conn, fresh)
	require.False(t, oldExists)
	require.True(t, freshExists)
}

func TestTemplateNameFollowsTheMigrations(t *testing.T) {
	t.Parallel()
	name := templateName()
	require.Regexp(t, `^paymentd_tmpl_[0-9a-f]{12}$`, name)
	_, err := strconv.ParseUint(strings.TrimPrefix(name, templatePrefix), 16, 64)
	require.NoError(t, err)
}

func mustBaseURL(ctx context.Context, t *testing.T) string {
	t.Helper()
	u, err := BaseURL(ctx)
	require.NoError(t, err)
	return u
}
