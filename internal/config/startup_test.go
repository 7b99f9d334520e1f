package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestARelativePluginDirIsResolvedAgainstTheFileThatSetsIt(t *testing.T) {
	t.Parallel()
	etc := t.TempDir()
	p := filepath.Join(etc, "paymentd.toml")
	require.NoError(t, os.WriteFile(p, []byte("[plugins]\ndir = \"scripts\"\n"), 0o600))
	c, err := Load(p, nil)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(etc, "scripts"), c.Plugins.Dir)

	// A later file that does not set the key leaves the base where it was.
	other := writeFile(t, "[server]\nport = 6000\n")
	c, err = LoadFiles([]string{p, other}, nil)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(etc, "scripts"), c.Plugins.Dir)

	abs := filepath.Join(t.TempDir(), "elsewhere")
	c, err = Load(writeFile(t, "[plugins]\ndir = \""+abs+"\"\n"), nil)
	require.NoError(t, err)
	require.Equal(t, abs, c.Plugins.Dir, "an absolute dir is kept")
}

func TestTheDefaultPluginDirIsNextToTheConfigurationFileElseTheBinary(t *testing.T) {
	t.Parallel()
	p := writeFile(t, "[server]\nport = 6000\n")
	c, err := Load(p, nil)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(filepath.Dir(p), "plugins"), c.Plugins.Dir)

	c, err = Load("", nil)
	require.NoError(t, err)
	exe, err := os.Executable()
	require.NoError(t, err)
	exe, err = filepath.EvalSymlinks(exe)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(filepath.Dir(exe), "plugins"), c.Plugins.Dir, "without a file: next to the binary, wherever it is started")

	base := t.TempDir()
	c, err = LoadFilesFrom([]string{p}, nil, base)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(base, "plugins"), c.Plugins.Dir, "paymentd dev's base for the default")
}

func TestARelativePluginDirFromTheEnvironmentIsTheWorkingDirectorys(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	require.NoError(t, err)
	c, err := Load(writeFile(t, "[plugins]\ndir = \"from-file\"\n"), []string{"PAYMENTD_PLUGINS__DIR=mine"})
	require.NoError(t, err)
	require.Equal(t, filepath.Join(wd, "mine"), c.Plugins.Dir)
}

func TestAMissingPluginDirIsRefusedInOneLineNamingTheKeyAndThePath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := Load(writeFile(t, "[plugins]\ndir = \""+filepath.Join(dir, "nope")+"\"\n"), nil)
	require.NoError(t, err)
	err = c.CheckPluginDir()
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorContains(t, err, "[plugins].dir "+filepath.Join(dir, "nope")+" cannot be read: no such file or directory")
	require.NotContains(t, err.Error(), "\n")

	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	c.Plugins.Dir = file
	require.ErrorContains(t, c.CheckPluginDir(), "not a directory")

	c.Plugins.Dir = dir
	require.NoError(t, c.CheckPluginDir())
}

func TestValidateSectionsAsksOnlyForTheNamedSections(t *testing.T) {
	t.Parallel()
	c := Default() // no [jwt].secret
	c.DB.URL = "postgres://paymentd@127.0.0.1/paymentd"
	require.ErrorContains(t, c.Validate(), "[jwt].secret is required")
	require.NoError(t, c.ValidateSections(SectionDB), "verify reads the ledger: no JWT secret needed")

	c.DB.MaxConnections = 0
	require.ErrorContains(t, c.ValidateSections(SectionDB), "[db].max_connections must be at least 1")
	c.DB.MaxConnections = 20
	c.Cluster.MigrationWait = 0
	require.NoError(t, c.ValidateSections(SectionDB))
	require.ErrorContains(t, c.ValidateSections(SectionDB, SectionCluster), "[cluster].migration_wait must be positive")
}

func TestALoopbackPublicURLOnAnotherPortIsWarnedOf(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		url  string
		port int
		warn string // "" for none
	}{
		{"http://127.0.0.1:50051", 6000, "[server].public_url http://127.0.0.1:50051 is this host on port 50051 but [server].port is 6000: gateways would post callbacks to http://127.0.0.1:50051/callbacks/… where the service does not listen; set [server].public_url to http://127.0.0.1:6000 unless a proxy on this host listens on 50051"},
		{"http://localhost:8080/", 6000, "set [server].public_url to http://localhost:6000"},
		{"http://[::1]:50051", 6000, "set [server].public_url to http://[::1]:6000"},
		{"http://127.0.0.2", 6000, "is this host on port 80 but [server].port is 6000"},
		{"http://127.0.0.1:6000", 6000, ""},
		{"http://localhost:6000", 6000, ""},
		{"https://pay.example.com", 6000, ""}, // a proxy's port is its own
		{"http://10.0.0.5:50051", 6000, ""},   // another host: a proxy or NAT
		{"https://127.0.0.1", 443, ""},        // the scheme's port
	} {
		c := valid()
		c.Session.CookieSecure = true
		c.Server.PublicURL, c.Server.Port = tt.url, tt.port
		w := strings.Join(c.Warnings(), "\n")
		if tt.warn == "" {
			require.Empty(t, w, tt.url)
			continue
		}
		require.Contains(t, w, tt.warn, tt.url)
		require.NoError(t, c.Validate(), "a warning, not a refusal: %s", tt.url)
	}
}
