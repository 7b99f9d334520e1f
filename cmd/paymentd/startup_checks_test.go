package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/migrate"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// These tests set environment variables and change directory, so they do
// not run in parallel.

// repoPluginsDir is the checkout's plugin directory, absolute: taken when
// the test binary starts, in the package's directory, before a test moves.
var repoPluginsDir, repoPluginsErr = filepath.Abs(filepath.Join("..", "..", "plugins"))

// repoPlugins is repoPluginsDir, for tests that run a service.
func repoPlugins(t *testing.T) string {
	t.Helper()
	require.NoError(t, repoPluginsErr)
	return repoPluginsDir
}

// etcDir is a configuration directory with a paymentd.toml holding body
// and a valid JWT secret; the working directory is another one.
func etcDir(t *testing.T, body string) (dir, file string) {
	t.Helper()
	dir = t.TempDir()
	file = filepath.Join(dir, "paymentd.toml")
	require.NoError(t, os.WriteFile(file, []byte("[jwt]\nsecret = \""+cliSecret+"\"\n"+body), 0o600))
	t.Chdir(t.TempDir())
	return dir, file
}

func TestServeRefusesAMissingPluginDirInOneLineNamingTheKeyAndThePath(t *testing.T) {
	dir, file := etcDir(t, "[db]\nurl = \"postgres://postgres@127.0.0.1:1/none\"\n")
	code, _, stderr := runCLI(t, "serve", "--config", file)
	require.Equal(t, exitUsage, code, "a bad configuration: systemd does not restart it")
	want := "paymentd: [plugins].dir " + filepath.Join(dir, "plugins") + " cannot be read: no such file or directory"
	require.True(t, strings.HasPrefix(stderr, want), stderr)
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %s", stderr)

	// The default found next to the configuration file, wherever the
	// service is started: the refusal is gone (the database is next).
	require.NoError(t, os.Symlink(repoPlugins(t), filepath.Join(dir, "plugins")))
	code, _, stderr = runCLI(t, "serve", "--config", file)
	require.Equal(t, 1, code, stderr)
	require.NotContains(t, stderr, "[plugins].dir")
	require.Contains(t, stderr, "[db].url")
}

func TestConfigCheckFailsOnAMissingPluginDirAndPrintsTheResolvedPath(t *testing.T) {
	dir, file := etcDir(t, "[plugins]\ndir = \"scripts\"\n[bootstrap]\nadmin_password = \"bootstrap-password\"\n")
	code, stdout, stderr := runCLI(t, "config", "check", "--config", file)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "[plugins].dir "+filepath.Join(dir, "scripts")+" cannot be read: no such file or directory")
	require.NotContains(t, stderr, "configuration is valid")
	require.Contains(t, stdout, "\n[plugins]\ndir = \""+filepath.Join(dir, "scripts")+"\"\n")

	require.NoError(t, os.Mkdir(filepath.Join(dir, "scripts"), 0o755))
	code, _, stderr = runCLI(t, "config", "check", "--config", file)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "configuration is valid")
}

func TestConfigCheckWarnsOfAPublicURLLeftOnTheOldPort(t *testing.T) {
	_, file := etcDir(t, "[server]\nport = 6000\n[bootstrap]\nadmin_password = \"bootstrap-password\"\n")
	t.Setenv("PAYMENTD_PLUGINS__DIR", repoPlugins(t))
	code, _, stderr := runCLI(t, "config", "check", "--config", file)
	require.Equal(t, 0, code, "a warning: a proxy on this host may listen there: %s", stderr)
	require.Contains(t, stderr, "warning: [server].public_url http://127.0.0.1:50051 is this host on port 50051 but [server].port is 6000")
	require.Contains(t, stderr, "configuration is valid")

	t.Setenv("PAYMENTD_SERVER__PUBLIC_URL", "http://127.0.0.1:6000")
	code, _, stderr = runCLI(t, "config", "check", "--config", file)
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stderr, "warning:")
}

func TestServeRefusesAMissingBootstrapPasswordBeforeMigratingWithExitTwo(t *testing.T) {
	url := testdb.EmptyURL(t)
	_, file := etcDir(t, "")
	t.Setenv("PAYMENTD_DB__URL", url)
	t.Setenv("PAYMENTD_PLUGINS__DIR", repoPlugins(t))
	t.Setenv("PAYMENTD_METRICS__PORT", "0")
	code, _, stderr := runCLI(t, "serve", "--config", file)
	require.Equal(t, exitUsage, code, stderr)
	require.Contains(t, stderr, "paymentd: [bootstrap].admin_password is required: the database has no admin users yet\n")
	require.NotContains(t, stderr, "schema migrated")

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var tables int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables))
	require.Zero(t, tables, "the empty database is left empty")
}

// A database whose schema is not this build's (here a column an older
// build lacked) is never served: serve exits 2 with the schema check's line
// last, before the bootstrap admin is made; migrate status lists every
// difference and exits 2 likewise; the operator's commands refuse it.
func TestServeRefusesADriftedDatabaseInOneLineAndMigrateStatusSaysWhy(t *testing.T) {
	conn := migratedEnv(t)
	ctx := context.Background()
	t.Setenv("PAYMENTD_BOOTSTRAP__ADMIN_PASSWORD", "bootstrap-password")
	t.Setenv("PAYMENTD_SERVER__PORT", strconv.Itoa(testkit.FreePort(t)))
	t.Setenv("PAYMENTD_METRICS__PORT", "0")
	t.Setenv("PAYMENTD_PLUGINS__DIR", repoPlugins(t))

	code, stdout, stderr := runCLI(t, "migrate", "status")
	require.Equal(t, 0, code, stderr)
	require.Regexp(t, `\nschema: as this build expects \(\d+ objects\)\n$`, stdout)
	code, _, stderr = runCLI(t, "config", "check")
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stderr, "schema")

	// An operator's own index is left alone by the start: config check warns.
	_, err := conn.Exec(ctx, `CREATE INDEX ops_payments_by_amount ON payments (amount)`)
	require.NoError(t, err)
	code, _, stderr = runCLI(t, "config", "check")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "warning: schema: the database holds 1 object(s) this build does not know or a newer release changed, which the start leaves alone: index payments.ops_payments_by_amount")
	_, err = conn.Exec(ctx, `DROP INDEX ops_payments_by_amount`)
	require.NoError(t, err)

	_, err = conn.Exec(ctx, `ALTER TABLE customers DROP COLUMN token_generation`)
	require.NoError(t, err)
	// config check foresees the start's refusal.
	code, _, stderr = runCLI(t, "config", "check")
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "invalid configuration:\nschema check: the database's schema is not the one this build expects: column customers.token_generation is missing")
	code, _, stderr = runCLI(t, "serve")
	require.Equal(t, exitUsage, code, "restarting cannot fix a schema: %s", stderr)
	require.Equal(t, "paymentd: schema check: the database's schema is not the one this build expects: "+
		"column customers.token_generation is missing (00001_identity.sql makes it) (and 1 more refused); nothing was served: "+
		"run the paymentd that made this database, or bring its schema back to this build's "+
		"(restore a backup, recreate the database, or undo a change made by hand); "+
		`paymentd migrate status lists every difference (docs/operations.md, "Upgrading")`, lastLine(stderr))
	require.NotContains(t, stderr, "bootstrap admin")
	require.NotContains(t, stderr, "schema migrated", "the refused start applied nothing, and its log says so")
	require.Contains(t, stderr, "no migration pending")
	var admins int
	require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM admin_users`).Scan(&admins))
	require.Zero(t, admins, "nothing was done after the check")

	code, stdout, stderr = runCLI(t, "migrate", "status")
	require.Equal(t, exitUsage, code, stderr)
	require.Contains(t, stdout, "\nschema: 2 difference(s) from this build's (2 refused, 0 left alone; "+
		fmt.Sprintf("the database records migration %05[1]d, this build knows up to %05[1]d):\n", migrate.KnownVersion())+
		"  missing  column customers.token_generation (00001_identity.sql): bigint not null default 0 [refused]\n"+
		"  missing  constraint customers.customers_token_generation_check (00001_identity.sql): CHECK ((token_generation >= 0)) [refused]\n")
	require.Contains(t, lastLine(stderr), "paymentd: schema check: ")

	code, _, stderr = runCLI(t, "verify")
	require.Equal(t, exitUsage, code, stderr)
	require.Contains(t, lastLine(stderr), "column customers.token_generation is missing")
}

func TestConfigCheckAsksTheDatabaseWhetherABootstrapPasswordIsNeeded(t *testing.T) {
	_, file := etcDir(t, "")
	t.Setenv("PAYMENTD_PLUGINS__DIR", repoPlugins(t))

	// Without [db].url (set only in the service's environment): a warning.
	code, _, stderr := runCLI(t, "config", "check", "--config", file)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "warning: [bootstrap].admin_password is empty: the service refuses to start on a database without admins ([db].url is not set here")

	// A database without admins: as the start would, it fails.
	t.Setenv("PAYMENTD_DB__URL", testdb.EmptyURL(t))
	code, _, stderr = runCLI(t, "config", "check", "--config", file)
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, "[bootstrap].admin_password is required: the database has no admin users yet (asked the database of [db].url)")

	// One with an admin: no password needed.
	url := testdb.URL(t)
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), `INSERT INTO admin_users (username, password_hash) VALUES ('ops', 'x')`)
	require.NoError(t, err)
	t.Setenv("PAYMENTD_DB__URL", url)
	code, _, stderr = runCLI(t, "config", "check", "--config", file)
	require.Equal(t, 0, code, stderr)
	require.NotContains(t, stderr, "warning:")
}

func TestVerifyAsksOnlyForTheDatabase(t *testing.T) {
	migratedEnv(t)
	t.Setenv("PAYMENTD_JWT__SECRET", "") // a scratch restore's configuration: [db] alone
	code, stdout, stderr := runCLI(t, "verify")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "ledger clean")

	// What it does use is still checked, naming the key.
	t.Setenv("PAYMENTD_DB__MAX_CONNECTIONS", "0")
	code, _, stderr = runCLI(t, "verify")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "[db].max_connections must be at least 1")
	require.NotContains(t, stderr, "[jwt]")
}

func TestVerifyOnADatabaseThatDoesNotExistSaysWhatToRun(t *testing.T) {
	t.Chdir(t.TempDir())
	base, err := testdb.BaseURL(context.Background())
	require.NoError(t, err)
	u, err := pgx.ParseConfig(base)
	require.NoError(t, err)
	t.Setenv("PAYMENTD_DB__URL", strings.Replace(base, "/"+u.Database, "/paymentd_restore_missing", 1))
	code, _, stderr := runCLI(t, "verify")
	require.Equal(t, 1, code, stderr)
	require.Contains(t, stderr, `paymentd: [db].url names database "paymentd_restore_missing", which does not exist`)
	require.Contains(t, stderr, "createdb -h ")
	require.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %s", stderr)
}

func TestDevMovesTheDefaultPublicURLWithThePortAndFindsTheCheckoutsPlugins(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	cfg, err := loadDevConfig(nil, []string{"PAYMENTD_SERVER__PORT=6000"})
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:6000", cfg.Server.PublicURL)
	require.Equal(t, filepath.Join(wd, "plugins"), cfg.Plugins.Dir, "the working directory's, where ./run.sh runs")

	cfg, err = loadDevConfig(nil, []string{"PAYMENTD_SERVER__PORT=6000", "PAYMENTD_SERVER__PUBLIC_URL=https://tunnel.example"})
	require.NoError(t, err)
	require.Equal(t, "https://tunnel.example", cfg.Server.PublicURL, "a URL set by the operator is kept")
}
