package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/config"
)

// These tests set environment variables, so they do not run in parallel.

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestServeRefusesAShortJWTSecretNamingTheKey(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("PAYMENTD_JWT__SECRET", "abcde")
	t.Setenv("PAYMENTD_DB__URL", "postgres://postgres@127.0.0.1:1/none")
	code, _, stderr := runCLI(t, "serve")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "[jwt].secret must be at least 32 characters, got 5")
}

func TestServeRefusesTheExampleConfigAsIs(t *testing.T) {
	example := exampleFile(t)
	t.Chdir(t.TempDir())
	code, _, stderr := runCLI(t, "serve", "--config", example)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "[jwt].secret is the placeholder")
}

func exampleFile(t *testing.T) string {
	t.Helper()
	// Tests start in the package directory.
	p, err := filepath.Abs(filepath.Join("..", "..", "koanf.example.toml"))
	require.NoError(t, err)
	return p
}

func TestUnknownCommandIsAUsageError(t *testing.T) {
	code, _, stderr := runCLI(t, "serv")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, `unknown command "serv"`)
}

func TestNoArgumentsPrintsUsage(t *testing.T) {
	code, _, stderr := runCLI(t)
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "Usage:")
}

func TestMigrateNeedsAnAction(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("PAYMENTD_JWT__SECRET", strings.Repeat("s", 32))
	code, _, stderr := runCLI(t, "migrate")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "up, down, status")
}

func TestDevConfigIsGeneratedOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".data", "dev.toml")
	pw, err := ensureDevConfig(path)
	require.NoError(t, err)
	require.Len(t, pw, 16)
	again, err := ensureDevConfig(path)
	require.NoError(t, err)
	require.Equal(t, pw, again, "the second run reuses the generated password")
	body, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(body), "[jwt]\nsecret = ")
	require.Contains(t, string(body), "\n[secrets]\n")
	c, err := config.LoadFiles([]string{path}, nil)
	require.NoError(t, err)
	keys, err := c.Secrets.Keyring()
	require.NoError(t, err)
	require.Equal(t, "dev", keys.Current(), "a key that encrypts gateway secrets")
	again2, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(body), string(again2), "the key is generated once")
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the dev secrets are private to the user")
}

func TestDevConfigWrittenBeforeSecretsGetsAKeyOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dev.toml")
	old := "[jwt]\nsecret = \"" + strings.Repeat("a", 64) + "\"\n\n[bootstrap]\nadmin_username = \"admin\"\nadmin_password = \"old-dev-password\"\n"
	require.NoError(t, os.WriteFile(path, []byte(old), 0o600))
	pw, err := ensureDevConfig(path)
	require.NoError(t, err)
	require.Equal(t, "old-dev-password", pw)
	body, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(body), old), "what was there stays")
	c, err := config.LoadFiles([]string{path}, nil)
	require.NoError(t, err)
	require.NoError(t, c.Validate())
	require.Equal(t, "dev", c.Secrets.Current)

	_, err = ensureDevConfig(path)
	require.NoError(t, err)
	again, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(body), string(again), "added once")
}

func TestDevTurnsTheTestClockOnAndServeLeavesItAsTheFileSays(t *testing.T) {
	t.Chdir(t.TempDir())
	p := filepath.Join(t.TempDir(), "paymentd.toml")
	require.NoError(t, os.WriteFile(p, []byte("[jwt]\nsecret = \""+strings.Repeat("s", 32)+"\"\n[billing]\ntest_clock = false\n"), 0o600))
	dev, err := loadDevConfig([]string{p}, nil)
	require.NoError(t, err)
	require.True(t, dev.Billing.TestClock, "paymentd dev allows the test clock")
	served, err := loadConfig(p)
	require.NoError(t, err)
	require.False(t, served.Billing.TestClock, "serve keeps the file's value")

	require.NoError(t, os.WriteFile(p, []byte("[jwt]\nsecret = \""+strings.Repeat("s", 32)+"\"\n[billing]\ntest_clock = true\n"), 0o600))
	served, err = loadConfig(p)
	require.NoError(t, err)
	require.True(t, served.Billing.TestClock)
}

func TestFlagsMayFollowTheCommandsArguments(t *testing.T) {
	// operations.md's `paymentd migrate status --config FILE` failed with
	// exit 2: the flag package stopped at "status".
	fs := newFlags("migrate", "", &bytes.Buffer{})
	cfg := configFlag(fs)
	keep := fs.Bool("keep", false, "")
	require.NoError(t, parseFlags(fs, []string{"status", "--config", "a.toml", "--keep"}))
	require.Equal(t, "a.toml", *cfg)
	require.True(t, *keep)
	require.Equal(t, []string{"status"}, fs.Args())

	fs = newFlags("plugin check", "", &bytes.Buffer{})
	cfg = configFlag(fs)
	require.NoError(t, parseFlags(fs, []string{"a.lua", "--config=b.toml", "--", "--not-a-flag"}))
	require.Equal(t, "b.toml", *cfg)
	require.Equal(t, []string{"a.lua", "--not-a-flag"}, fs.Args(), "after -- nothing is a flag")

	fs = newFlags("verify", "", &bytes.Buffer{})
	configFlag(fs)
	err := parseFlags(fs, []string{"status", "--nope"})
	require.ErrorAs(t, err, new(usageError))
	require.ErrorContains(t, err, "nope", "an unknown flag is refused by name")

	fs = newFlags("admin", "", &bytes.Buffer{})
	user := fs.String("username", "", "")
	err = parseFlags(fs, []string{"--username"})
	require.ErrorContains(t, err, "flag needs an argument", "a last flag without its value is refused, not given the \"--\"")
	require.Empty(t, *user)
}

func TestMigrateStatusTakesItsConfigAfterTheAction(t *testing.T) {
	t.Chdir(t.TempDir())
	cfg := filepath.Join(t.TempDir(), "paymentd.toml")
	require.NoError(t, os.WriteFile(cfg, []byte("[db]\nurl = \"postgres://postgres@127.0.0.1:1/none?connect_timeout=1\"\n"), 0o600))
	code, _, stderr := runCLI(t, "migrate", "status", "--config", cfg)
	require.Equal(t, 1, code, "the flag is read (the database is what fails): %s", stderr)
	require.Contains(t, stderr, "127.0.0.1:1")
}
