package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// deploy/version.sh names the release where no tag reached the clone: the
// newest `## vX.Y.Z` heading of CHANGELOG.md and the commit it names, as
// git describe would name a tag. Run in a scratch repository.
func TestVersionShNamesTheChangelogsReleaseWhereNoTagReachedTheClone(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	script, err := os.ReadFile("version.sh")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "deploy"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "deploy", "version.sh"), script, 0o755))
	git := func(args ...string) string {
		t.Helper()
		c := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		c.Dir = repo
		c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+repo)
		out, err := c.CombinedOutput()
		require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
		return strings.TrimSpace(string(out))
	}
	version := func() string {
		t.Helper()
		out, err := exec.Command(filepath.Join(repo, "deploy", "version.sh")).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return strings.TrimSpace(string(out))
	}
	changelog := func(text string) {
		t.Helper()
		require.NoError(t, os.WriteFile(filepath.Join(repo, "CHANGELOG.md"), []byte(text), 0o644))
		git("add", "-A")
		git("commit", "-q", "-m", "changelog")
	}
	short := func() string { return git("rev-parse", "--short=12", "HEAD") }

	git("init", "-q")
	changelog("# Changelog\n\n## Unreleased\n")
	require.Equal(t, "v0.0.0-1-g"+short(), version(), "before any release")

	// The release's own commit: its heading cannot name it.
	changelog("# Changelog\n\n## v0.1.0 — 2026-11-29\n\nThe first release.\n")
	release := git("rev-parse", "HEAD")
	require.Equal(t, "v0.1.0", version())

	// The next commit names it; later ones count from it.
	changelog("# Changelog\n\n## Unreleased\n\n## v0.1.0 — 2026-11-29, commit " + release + "\n\nThe first release.\n")
	require.Equal(t, "v0.1.0-1-g"+short(), version())
	changelog("# Changelog\n\n## Unreleased\n\nMore.\n\n## v0.1.0 — 2026-11-29, commit " + release + "\n\nThe first release.\n")
	require.Equal(t, "v0.1.0-2-g"+short(), version())

	require.NoError(t, os.WriteFile(filepath.Join(repo, "CHANGELOG.md"), []byte("edited\n"), 0o644))
	require.Equal(t, "v0.0.0-4-g"+short()+"-dirty", version(), "the edited CHANGELOG names no release")
	git("checkout", "-q", "--", "CHANGELOG.md")

	// A tag, where it reached the clone, is what git describe says.
	git("tag", "v0.1.0", release)
	require.Equal(t, "v0.1.0-2-g"+short(), version())

	// A CHANGELOG naming a commit this history does not have is an error,
	// not a made-up version.
	git("tag", "-d", "v0.1.0")
	changelog("# Changelog\n\n## v0.1.0 — 2026-11-29, commit " + strings.Repeat("ab", 20) + "\n")
	out, err := exec.Command(filepath.Join(repo, "deploy", "version.sh")).CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "not in this checkout's history")
}
