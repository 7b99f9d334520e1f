package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrNoBinaries is returned when initdb and pg_ctl cannot be found and cannot
// be installed here. Its message is the one line a user needs to act on.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, pg_ctl) not found: " +
	"install Debian's postgresql package (sudo apt-get install postgresql) or set [db].url")

// debianLibRoot is where Debian and Ubuntu put each major version's server
// binaries (/usr/lib/postgresql/<version>/bin); they are not on PATH there.
const debianLibRoot = "/usr/lib/postgresql"

// FindBinaries returns the directory holding initdb and pg_ctl: the first
// directory on PATH that has both, else the highest version under
// /usr/lib/postgresql/*/bin.
func FindBinaries() (binDir string, err error) {
	return findBinaries(os.Getenv("PATH"), debianLibRoot)
}

func findBinaries(pathEnv, libRoot string) (string, error) {
	for _, dir := range filepath.SplitList(pathEnv) {
		// An empty PATH element means the working directory; running a
		// database server found there would be a surprise, so skip it.
		if dir == "" || !filepath.IsAbs(dir) || !hasServerBinaries(dir) {
			continue
		}
		// /usr/local/bin/initdb is often a symlink into the real bin
		// directory; prefer that one, where postgres itself also lives.
		if real, err := filepath.EvalSymlinks(filepath.Join(dir, "initdb")); err == nil {
			if realDir := filepath.Dir(real); hasServerBinaries(realDir) {
				return realDir, nil
			}
		}
		return dir, nil
	}

	matches, _ := filepath.Glob(filepath.Join(libRoot, "*", "bin"))
	slices.SortFunc(matches, func(a, b string) int {
		return -compareVersions(filepath.Base(filepath.Dir(a)), filepath.Base(filepath.Dir(b)))
	})
	for _, dir := range matches {
		if hasServerBinaries(dir) {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
}

func hasServerBinaries(dir string) bool {
	return isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "pg_ctl"))
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// compareVersions orders Debian's version directory names ("9.6", "15",
// "17") numerically; names that are not numbers sort below all numbers.
func compareVersions(a, b string) int {
	pa, okA := parseVersion(a)
	pb, okB := parseVersion(b)
	switch {
	case okA && !okB:
		return 1
	case !okA && okB:
		return -1
	case !okA && !okB:
		return strings.Compare(a, b)
	}
	return slices.Compare(pa, pb)
}

func parseVersion(s string) ([]int, bool) {
	var parts []int
	for f := range strings.SplitSeq(s, ".") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, false
		}
		parts = append(parts, n)
	}
	return parts, true
}

// binariesFor returns the binaries to run an existing cluster in dir with:
// found must be of the major version that made it (PG_VERSION), else the
// server refuses the data files. Debian keeps each version in its own
// directory, so a matching one is looked for there first.
func binariesFor(ctx context.Context, dir, found string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "PG_VERSION"))
	if err != nil {
		return found, nil // no cluster yet: initdb makes it with found
	}
	want := strings.TrimSpace(string(b))
	if debian := filepath.Join(debianLibRoot, want, "bin"); hasServerBinaries(debian) {
		return debian, nil
	}
	out, err := exec.CommandContext(ctx, filepath.Join(found, "pg_ctl"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("pgcluster: %s --version: %w", filepath.Join(found, "pg_ctl"), err)
	}
	if got := majorVersion(string(out)); got != want {
		return "", fmt.Errorf("pgcluster: the cluster in %s was made by PostgreSQL %s, but the binaries in %s are version %s: "+
			"install PostgreSQL %s, or remove %s to start afresh", dir, want, found, got, want, dir)
	}
	return found, nil
}

// majorVersion reads the major version out of "pg_ctl (PostgreSQL) 15.20
// (Debian 15.20-0+deb12u1)": the first number from 10 on, the first two
// before ("9.6").
func majorVersion(versionLine string) string {
	fields := strings.Fields(versionLine)
	for i, f := range fields {
		if f != "(PostgreSQL)" || i+1 == len(fields) {
			continue
		}
		parts := strings.FieldsFunc(fields[i+1], func(r rune) bool { return r != '.' && (r < '0' || r > '9') })
		if len(parts) == 0 {
			return ""
		}
		nums := strings.Split(parts[0], ".")
		if n, err := strconv.Atoi(nums[0]); err == nil && n < 10 && len(nums) > 1 {
			return nums[0] + "." + nums[1]
		}
		return nums[0]
	}
	return ""
}

// installCommands decides how missing binaries get installed: by apt-get when
// we are root and apt-get exists, otherwise not at all (ErrNoBinaries). It is
// separate from running the commands so the decision can be tested without
// installing anything.
func installCommands(euid int, lookPath func(string) (string, error)) ([][]string, error) {
	if euid != 0 {
		return nil, ErrNoBinaries
	}
	aptGet, err := lookPath("apt-get")
	if err != nil {
		return nil, ErrNoBinaries
	}
	return [][]string{
		{aptGet, "update"},
		{aptGet, "install", "-y", "--no-install-recommends", "postgresql"},
	}, nil
}

// ensureBinaries finds the server binaries, installing Debian's postgresql
// package first when they are missing and installCommands allows it.
func ensureBinaries(ctx context.Context, logf func(string, ...any)) (string, error) {
	binDir, err := FindBinaries()
	if err == nil {
		return binDir, nil
	}
	cmds, err := installCommands(os.Geteuid(), exec.LookPath)
	if err != nil {
		return "", err
	}
	logf("pgcluster: PostgreSQL server binaries not found; installing Debian's postgresql package")
	for _, args := range cmds {
		if err := runStreaming(ctx, logf, args); err != nil {
			return "", fmt.Errorf("pgcluster: %s failed: %w; %s", strings.Join(args, " "), err, ErrNoBinaries.Error())
		}
	}
	binDir, err = FindBinaries()
	if err != nil {
		return "", fmt.Errorf("pgcluster: installed postgresql, but still no initdb and pg_ctl on PATH or under %s/*/bin", debianLibRoot)
	}
	logf("pgcluster: installed PostgreSQL server binaries in %s", binDir)
	return binDir, nil
}

// runStreaming runs a command non-interactively and hands each output line to
// logf as it arrives, so a long apt-get is visibly alive.
func runStreaming(ctx context.Context, logf func(string, ...any), args []string) error {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	cmd.Stdin = nil
	w := &lineWriter{logf: logf, prefix: filepath.Base(args[0])}
	cmd.Stdout = w
	cmd.Stderr = w
	err := cmd.Run()
	w.flush()
	return err
}

// lineWriter turns a byte stream into logf calls, one per line.
type lineWriter struct {
	logf   func(string, ...any)
	prefix string
	buf    []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.emit(w.buf)
		w.buf = nil
	}
}

func (w *lineWriter) emit(line []byte) {
	if s := strings.TrimRight(string(line), "\r"); strings.TrimSpace(s) != "" {
		w.logf("%s: %s", w.prefix, s)
	}
}
