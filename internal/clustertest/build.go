package clustertest

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"

	"github.com/rustbill/paymentd/internal/pgcluster"
)

// RepoRoot is the repository's root directory (where go.mod is).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// PluginsDir is the repository's plugins/ directory.
func PluginsDir() string { return filepath.Join(RepoRoot(), "plugins") }

// built holds the binaries of this process's builds: Build's under "",
// BuildCommit's under their commit. Each has its own lock, so that a
// build of one waits for no other; the go commands themselves then take
// turns (goBuild).
var built struct {
	sync.Mutex
	m map[string]*build
}

type build struct {
	sync.Mutex
	b Built
}

// entry is key's build (locked by the caller while it builds).
func entry(key string) *build {
	built.Lock()
	defer built.Unlock()
	if built.m == nil {
		built.m = map[string]*build{}
	}
	e := built.m[key]
	if e == nil {
		e = &build{}
		built.m[key] = e
	}
	return e
}

// Build compiles cmd/paymentd into a directory of its own under os.TempDir
// once per process and returns the binary's path. The binary is the one
// production runs: no test hooks, deploy/build.sh's flags.
func Build(ctx context.Context) (string, error) {
	e := entry("")
	e.Lock()
	defer e.Unlock()
	if e.b.Binary != "" {
		if _, err := os.Stat(e.b.Binary); err == nil {
			return e.b.Binary, nil
		}
	}
	dir, err := os.MkdirTemp("", "paymentd-bin-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "paymentd")
	if err := goBuild(ctx, RepoRoot(), out, ""); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	e.b = Built{Binary: out, Src: RepoRoot(), Plugins: PluginsDir()}
	return out, nil
}

// goBuild builds dir's cmd/paymentd into out with deploy/build.sh's flags
// (static, -trimpath, grpcnotrace): the build cache is then shared by
// every build of every commit, so a commit whose packages equal the
// working tree's costs a link. commit, when given, is stamped in as
// deploy/build.sh does (the process logs it at start).
//
// Builds take a lock file in os.TempDir one at a time, in this process and
// across the test processes of one go test run (cmd/paymentd's tests build
// the release too): two go commands compiling the same packages at once
// both compile them, where the second one, waiting, finds them in the
// build cache and only links.
func goBuild(ctx context.Context, dir, out, commit string) error {
	unlock, err := pgcluster.LockFile(ctx, buildLock)
	if err != nil {
		return err
	}
	defer unlock()
	args := []string{"build", "-trimpath", "-tags", "grpcnotrace", "-o", out}
	if commit != "" {
		args = append(args, "-buildvcs=false", "-ldflags", "-X main.buildCommit="+commit)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/paymentd")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("clustertest: go build ./cmd/paymentd in %s: %w\n%s", dir, err, b)
	}
	return nil
}

// Built is a paymentd of another commit, with that commit's tree: its
// instances load the plugins it shipped with (Plugins), and a test may
// read the rest (its migrations under Src/sql/migrations).
type Built struct {
	Commit, Binary, Src, Plugins string
}

// BuildCommit builds commit's paymentd (once per process and commit) from
// its tree, extracted with git archive — which reads the repository and
// changes nothing in it — and built as deploy/build.sh does. The clone
// must hold the commit (a shallow one may not: the error says so).
func BuildCommit(ctx context.Context, commit string) (Built, error) {
	if commit == "" {
		return Built{}, errors.New("clustertest: BuildCommit needs a commit")
	}
	e := entry(commit)
	e.Lock()
	defer e.Unlock()
	if e.b.Binary != "" {
		if _, err := os.Stat(e.b.Binary); err == nil {
			return e.b, nil
		}
	}
	root := RepoRoot()
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		return Built{}, fmt.Errorf("clustertest: this checkout does not have commit %s (%v: %s): use a full clone (git fetch --unshallow)",
			commit, err, strings.TrimSpace(string(out)))
	}
	dir, err := os.MkdirTemp("", "paymentd-"+commit[:min(12, len(commit))]+"-")
	if err != nil {
		return Built{}, err
	}
	src := filepath.Join(dir, "src")
	b := Built{Commit: commit, Binary: filepath.Join(dir, "paymentd"), Src: src, Plugins: filepath.Join(src, "plugins")}
	err = extract(ctx, root, commit, src)
	if err == nil {
		err = goBuild(ctx, src, b.Binary, commit)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return Built{}, err
	}
	e.b = b
	return b, nil
}

// extract writes commit's tree into dir (git archive, read as a tar).
func extract(ctx context.Context, root, commit, dir string) error {
	cmd := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", commit)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	err = untar(tar.NewReader(stdout), dir)
	_, _ = io.Copy(io.Discard, stdout)
	if werr := cmd.Wait(); werr != nil {
		return fmt.Errorf("clustertest: git archive %s: %w: %s", commit, werr, stderr.String())
	}
	return err
}

func untar(tr *tar.Reader, dir string) error {
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, dir+string(filepath.Separator)) {
			return fmt.Errorf("clustertest: archive entry %q leaves the directory", h.Name)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, path)
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777); err == nil {
				_, err = io.Copy(f, tr)
				err = errors.Join(err, f.Close())
			}
		}
		if err != nil {
			return err
		}
	}
}

// UpgradeFromFile names the commit of the last release, the one upgrades
// are tested from (docs/operations.md, "Upgrading").
const UpgradeFromFile = ".ci/upgrade-from"

var commitLine = regexp.MustCompile(`^[0-9a-f]{40}$`)

// UpgradeFrom is the commit .ci/upgrade-from names (its first line that is
// neither empty nor a # comment).
func UpgradeFrom() (string, error) {
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), UpgradeFromFile))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			if !commitLine.MatchString(l) {
				return "", fmt.Errorf("clustertest: %s names %q, not a full commit id", UpgradeFromFile, l)
			}
			return l, nil
		}
	}
	return "", fmt.Errorf("clustertest: %s names no commit", UpgradeFromFile)
}

// RemoveBuilt deletes the binaries Build and BuildCommit made (TestMain
// calls it at the end).
func RemoveBuilt() {
	built.Lock()
	defer built.Unlock()
	for key, e := range built.m {
		e.Lock()
		if e.b.Binary != "" {
			_ = os.RemoveAll(filepath.Dir(e.b.Binary))
		}
		e.Unlock()
		delete(built.m, key)
	}
}

// buildLock is the lock file goBuild holds while it builds.
var buildLock = filepath.Join(os.TempDir(), "paymentd-clustertest-build.lock")

// Prebuild starts Build and then, with release, the build of the release
// upgrades are tested from (UpgradeFrom, BuildCommit) in the background,
// so that they run while the first tests make their databases; Build and
// BuildCommit then wait for them or find them done. A build that fails
// here is tried again, and reported, by the test that needs it. The
// returned function cancels what is still building and waits for it to
// end; call it before leaving TestMain.
func Prebuild(release bool) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := Build(ctx); err != nil || !release {
			return
		}
		if from, err := UpgradeFrom(); err == nil {
			_, _ = BuildCommit(ctx, from)
		}
	}()
	return func() { cancel(); <-done }
}
