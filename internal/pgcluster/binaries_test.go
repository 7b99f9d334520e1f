package pgcluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeBin creates dir with an executable file for each name.
func fakeBin(t *testing.T, dir string, names ...string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, name := range names {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755))
	}
	return dir
}

func TestFindBinariesPrefersPath(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	onPath := fakeBin(t, filepath.Join(root, "path"), "initdb", "pg_ctl")
	fakeBin(t, filepath.Join(root, "lib", "17", "bin"), "initdb", "pg_ctl")

	got, err := findBinaries(filepath.Join(root, "empty")+string(os.PathListSeparator)+onPath, filepath.Join(root, "lib"))
	require.NoError(t, err)
	require.Equal(t, onPath, got)
}

func TestFindBinariesFollowsASymlinkOnPathToTheRealDirectory(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	real := fakeBin(t, filepath.Join(root, "lib", "15", "bin"), "initdb", "pg_ctl", "postgres")
	link := filepath.Join(root, "local", "bin")
	require.NoError(t, os.MkdirAll(link, 0o755))
	for _, name := range []string{"initdb", "pg_ctl"} {
		require.NoError(t, os.Symlink(filepath.Join(real, name), filepath.Join(link, name)))
	}

	got, err := findBinaries(link, filepath.Join(root, "nothing"))
	require.NoError(t, err)
	require.Equal(t, real, got)
}

func TestFindBinariesTakesTheHighestCompleteDebianVersion(t *testing.T) {
	t.Parallel()
	lib := filepath.Join(t.TempDir(), "lib")
	fakeBin(t, filepath.Join(lib, "9.6", "bin"), "initdb", "pg_ctl")
	fakeBin(t, filepath.Join(lib, "15", "bin"), "initdb", "pg_ctl")
	fakeBin(t, filepath.Join(lib, "16", "bin"), "initdb", "pg_ctl")
	fakeBin(t, filepath.Join(lib, "17", "bin"), "psql", "pg_ctl") // client only: no initdb
	fakeBin(t, filepath.Join(lib, "devel", "bin"), "initdb", "pg_ctl")

	got, err := findBinaries("", lib)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(lib, "16", "bin"), got)
}

func TestFindBinariesIgnoresFilesThatAreNotExecutable(t *testing.T) {
	t.Parallel()
	dir := fakeBin(t, filepath.Join(t.TempDir(), "bin"), "initdb", "pg_ctl")
	require.NoError(t, os.Chmod(filepath.Join(dir, "pg_ctl"), 0o644))

	_, err := findBinaries(dir, filepath.Join(dir, "nothing"))
	require.ErrorIs(t, err, ErrNoBinaries)
}

func TestMissingBinariesMessageIsOneLineThatSaysWhatToInstall(t *testing.T) {
	t.Parallel()
	msg := ErrNoBinaries.Error()
	require.NotContains(t, msg, "\n")
	require.Equal(t, "PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's postgresql package "+
		"(sudo apt-get install postgresql) or set [db].url", msg)
}

func TestInstallCommandsOnlyWhenRootWithAptGet(t *testing.T) {
	t.Parallel()
	withAptGet := func(name string) (string, error) {
		if name == "apt-get" {
			return "/usr/bin/apt-get", nil
		}
		return "", errors.New("not found")
	}
	withoutAptGet := func(string) (string, error) { return "", errors.New("not found") }

	tests := []struct {
		name     string
		euid     int
		lookPath func(string) (string, error)
		want     [][]string
	}{
		{
			name: "RootWithAptGetInstallsPostgresql", euid: 0, lookPath: withAptGet,
			want: [][]string{
				{"/usr/bin/apt-get", "update"},
				{"/usr/bin/apt-get", "install", "-y", "--no-install-recommends", "postgresql"},
			},
		},
		{name: "RootWithoutAptGetIsToldWhatToInstall", euid: 0, lookPath: withoutAptGet},
		{name: "UserWithAptGetIsToldWhatToInstall", euid: 1000, lookPath: withAptGet},
		{name: "UserWithoutAptGetIsToldWhatToInstall", euid: 1000, lookPath: withoutAptGet},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := installCommands(tt.euid, tt.lookPath)
			if tt.want == nil {
				require.ErrorIs(t, err, ErrNoBinaries)
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestLineWriterLogsOneLinePerLine(t *testing.T) {
	t.Parallel()
	var got []string
	w := &lineWriter{prefix: "apt-get", logf: func(format string, args ...any) {
		got = append(got, strings.TrimSpace(sprintf(format, args...)))
	}}
	_, _ = w.Write([]byte("Reading package"))
	_, _ = w.Write([]byte(" lists...\r\n\nDone\npartial"))
	w.flush()
	require.Equal(t, []string{"apt-get: Reading package lists...", "apt-get: Done", "apt-get: partial"}, got)
}

func TestCompareVersionsIsNumeric(t *testing.T) {
	t.Parallel()
	require.Positive(t, compareVersions("10", "9.6"))
	require.Positive(t, compareVersions("15", "devel"))
	require.Zero(t, compareVersions("15", "15"))
	require.Negative(t, compareVersions("9.5", "9.6"))
}

func TestMajorVersionReadsPgCtlVersionLines(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]string{
		"pg_ctl (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)\n": "15",
		"pg_ctl (PostgreSQL) 17.0\n":                           "17",
		"pg_ctl (PostgreSQL) 18beta1\n":                        "18",
		"pg_ctl (PostgreSQL) 9.6.24\n":                         "9.6",
		"something else\n":                                     "",
	} {
		require.Equal(t, want, majorVersion(line), line)
	}
}

func TestBinariesForAnExistingClusterMustMatchItsVersion(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	bin := filepath.Join(root, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	// Major versions no Debian directory will have, so the fake pg_ctl decides.
	require.NoError(t, os.WriteFile(filepath.Join(bin, "pg_ctl"),
		[]byte("#!/bin/sh\necho 'pg_ctl (PostgreSQL) 142.3'\n"), 0o755))
	cluster := func(version string) string {
		dir := filepath.Join(root, "data"+version)
		require.NoError(t, os.MkdirAll(dir, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "PG_VERSION"), []byte(version+"\n"), 0o600))
		return dir
	}

	got, err := binariesFor(t.Context(), cluster("142"), bin)
	require.NoError(t, err)
	require.Equal(t, bin, got)

	_, err = binariesFor(t.Context(), cluster("141"), bin)
	require.ErrorContains(t, err, "was made by PostgreSQL 141, but the binaries in "+bin+" are version 142")

	got, err = binariesFor(t.Context(), filepath.Join(root, "not-yet"), bin)
	require.NoError(t, err, "a cluster still to be made takes what was found")
	require.Equal(t, bin, got)
}
