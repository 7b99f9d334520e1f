package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestVersionPrintsModuleCommitAndCommitTimeFromBuildInfo(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.7",
		Main:      debug.Module{Path: "github.com/rustbill/paymentd", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{
			{Key: "-buildmode", Value: "exe"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-11-22T04:08:59Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	require.Equal(t, "paymentd v1.4.0\n"+
		"module:      github.com/rustbill/paymentd\n"+
		"commit:      0123456789abcdef0123456789abcdef01234567 (with uncommitted changes)\n"+
		"commit time: 2026-11-22T04:08:59Z\n"+
		"go:          go1.26.7\n", versionOf(bi, true).String())

	// Built without VCS information (go run, -buildvcs=false, a test binary):
	// the commit fields say they are unknown instead of being left out.
	bi.Settings = bi.Settings[:1]
	bi.Main.Version = "(devel)"
	out := versionOf(bi, true).String()
	require.Contains(t, out, "paymentd (devel)\n")
	require.Contains(t, out, "commit:      unknown\n")
	require.Contains(t, out, "commit time: unknown\n")
	require.Equal(t, "unknown", versionOf(nil, false).Commit)
}

func TestVersionOfABinaryBuiltFromACheckoutNamesItsCommit(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	git := func(args ...string) string {
		c := exec.Command("git", args...)
		c.Dir = root
		out, err := c.Output()
		require.NoError(t, err, "git %s", strings.Join(args, " "))
		return strings.TrimSpace(string(out))
	}
	if err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Run(); err != nil {
		// Not a git checkout (an unpacked archive): there is nothing to
		// stamp, and the binary must say so rather than invent a commit.
		bin := filepath.Join(t.TempDir(), "paymentd")
		build := exec.Command("go", "build", "-o", bin, "./cmd/paymentd")
		build.Dir = root
		out, err := build.CombinedOutput()
		require.NoError(t, err, "%s", out)
		out, err = exec.Command(bin, "version").Output()
		require.NoError(t, err)
		require.Contains(t, string(out), "commit:      unknown\n")
		require.Contains(t, string(out), "commit time: unknown\n")
		return
	}
	head := git("rev-parse", "HEAD")
	dirtyBefore := git("status", "--porcelain") != ""
	bin := filepath.Join(t.TempDir(), "paymentd")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/paymentd")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	dirtyAfter := git("status", "--porcelain") != ""
	commitTime, err := time.Parse(time.RFC3339, git("log", "-1", "--format=%cI", "HEAD"))
	require.NoError(t, err)

	out, err = exec.Command(bin, "version").Output()
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	require.Len(t, lines, 5, "%s", out)
	version := strings.TrimPrefix(lines[0], "paymentd ")
	require.Regexp(t, `^v\d+\.\d+\.\d+(-\S+)?$`, version, "a module version from the checkout (tag or pseudo-version)")
	if strings.Count(version, "-") >= 2 {
		require.Contains(t, version, head[:12], "a pseudo-version names the commit")
	}
	require.Equal(t, "module:      github.com/rustbill/paymentd", lines[1])
	require.Regexp(t, "^commit:      "+head+`( \(with uncommitted changes\))?$`, lines[2])
	if dirtyBefore == dirtyAfter { // the tree did not change under the build
		require.Equal(t, dirtyBefore, strings.HasSuffix(lines[2], "(with uncommitted changes)"), lines[2])
	}
	require.Equal(t, "commit time: "+commitTime.UTC().Format(time.RFC3339), lines[3], "vcs.time is the commit's time")
	require.Regexp(t, regexp.MustCompile(`^go:          go1\.\d+`), lines[4])
}

func TestTheBuildScriptsVersionAndCommitComeFirstAndDevelNamesTheRevision(t *testing.T) {
	t.Parallel()
	const rev = "0123456789abcdef0123456789abcdef01234567"
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.7",
		Main:      debug.Module{Path: "github.com/rustbill/paymentd", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-11-22T04:08:59Z"},
		},
	}
	v := versionOf(bi, true).stamped("v1.2.0-3-g0123456789ab", rev)
	require.Equal(t, "v1.2.0-3-g0123456789ab", v.Version)
	require.Equal(t, rev, v.Commit)
	require.Equal(t, "2026-11-22T04:08:59Z", v.CommitTime, "the commit Go recorded: its time stays")

	// Not stamped (go run, a plain go build in a container): not (devel),
	// but the revision Go recorded.
	v = versionOf(bi, true).stamped("", "")
	require.Equal(t, "devel+0123456789ab", v.Version)
	bi.Settings = append(bi.Settings, debug.BuildSetting{Key: "vcs.modified", Value: "true"})
	require.Equal(t, "devel+0123456789ab-dirty", versionOf(bi, true).stamped("", "").Version)

	// Nothing known at all: it says so.
	require.Equal(t, "unknown", versionOf(nil, false).stamped("", "").Version)
}

// deploy/build.sh, which ./run.sh, the image and the benchmark build with,
// stamps git describe's version and the commit into the binary.
func TestABinaryBuiltByTheBuildScriptPrintsItsGitVersionAndCommit(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	describe := func() string {
		out, err := exec.Command(filepath.Join(root, "deploy", "version.sh")).Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	require.NoError(t, err, "the tests run in a git checkout")
	before := describe()
	require.Regexp(t, `^v\d+\.\d+\.\d+(-\d+-g[0-9a-f]{12})?(-dirty)?$`, before)
	bin := filepath.Join(t.TempDir(), "paymentd")
	out, err := exec.Command(filepath.Join(root, "deploy", "build.sh"), bin).CombinedOutput()
	require.NoError(t, err, "%s", out)
	after := describe()

	out, err = exec.Command(bin, "version").Output()
	require.NoError(t, err)
	lines := strings.Split(string(out), "\n")
	if before == after { // the tree did not change under the build
		require.Equal(t, "paymentd "+before, lines[0])
	}
	require.NotContains(t, lines[0], "(devel)")
	require.True(t, strings.HasPrefix(lines[2], "commit:      "+strings.TrimSpace(string(head))), lines[2])
}
