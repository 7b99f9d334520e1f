package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/rustbill/paymentd/internal/localport"
)

// StartCopy makes dir a copy of the stopped cluster in from (Copy) and
// starts it. Ensure on dir then reuses the running copy and creates the
// database asked for. A service never uses it.
func StartCopy(ctx context.Context, from, dir string, logf func(format string, args ...any)) (*Cluster, error) {
	c, unlock, err := copyLocked(ctx, from, dir, logf)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := c.start(ctx, true); err != nil {
		return nil, err
	}
	return c, nil
}

// Copy makes dir a copy of the stopped cluster in from, with a port of its
// own, and leaves it stopped: a private cluster for a test in a fraction of
// initdb's time (internal/testdb makes one cluster per test process with
// Ensure and Stop, and copies it for each test that needs a cluster of its
// own). The copy is written into a temporary sibling of dir and renamed
// into place once complete, as initdb's is; dir must not exist. The
// server log and the port of from are not copied. Ensure starts the copy
// as any stopped cluster. A service never uses it.
func Copy(ctx context.Context, from, dir string, logf func(format string, args ...any)) error {
	_, unlock, err := copyLocked(ctx, from, dir, logf)
	if err != nil {
		return err
	}
	unlock()
	return nil
}

// copyLocked is Copy, returning with dir's lock still held.
func copyLocked(ctx context.Context, from, dir string, logf func(format string, args ...any)) (c *Cluster, unlock func(), err error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if from, err = filepath.Abs(from); err != nil {
		return nil, nil, fmt.Errorf("pgcluster: %w", err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, nil, fmt.Errorf("pgcluster: %w", err)
	}
	if _, err := os.Stat(filepath.Join(from, "PG_VERSION")); err != nil {
		return nil, nil, fmt.Errorf("pgcluster: %s holds no cluster to copy: %w", from, err)
	}
	// Nobody starts from while it is read, nor dir while it is written.
	unlockFrom, err := lockDir(ctx, from)
	if err != nil {
		return nil, nil, err
	}
	defer unlockFrom()
	if unlock, err = lockDir(ctx, dir); err != nil {
		return nil, nil, err
	}
	if c, err = copyTo(ctx, from, dir, logf); err != nil {
		unlock()
		return nil, nil, err
	}
	return c, unlock, nil
}

// copyTo copies with both locks held.
func copyTo(ctx context.Context, from, dir string, logf func(format string, args ...any)) (*Cluster, error) {
	if _, state := (&Cluster{Dir: from}).state(); state == stateRunning {
		return nil, fmt.Errorf("pgcluster: the cluster in %s is running; only a stopped cluster can be copied", from)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("pgcluster: %s exists already; a copy goes into a new directory", dir)
	}

	binDir, runAs, err := serverOf(ctx, from, logf)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, BinDir: binDir, runAs: runAs, logf: logf}
	if err := checkTraversable(dir, runAs); err != nil {
		return nil, err
	}

	start := time.Now()
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".copy-")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	defer os.RemoveAll(tmp) // nothing left to remove once renamed
	skip := map[string]bool{pidFileName: true, logFileName: true, portFileName: true}
	if err := copyTree(from, tmp, skip); err != nil {
		return nil, err
	}
	port, err := localport.Free()
	if err != nil {
		return nil, err
	}
	if err := c.writeFile(filepath.Join(tmp, portFileName), strconv.Itoa(port)+"\n"); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c.Port = port
	logf("pgcluster: copied the cluster in %s into %s in %s; port %d", from, dir, time.Since(start).Round(time.Millisecond), port)
	return c, nil
}

// copyTree copies the directory tree from into the existing directory to:
// directories, regular files and symbolic links, with their modes and,
// when we are root, their owners. Top-level names in skip are left out.
func copyTree(from, to string, skip map[string]bool) error {
	root := true
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("pgcluster: copy %s: %w", from, err)
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		if filepath.Dir(rel) == "." && skip[rel] {
			return nil
		}
		target := filepath.Join(to, rel)
		fi, err := os.Lstat(path)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		switch {
		case root:
			root = false
			err = os.Chmod(target, fi.Mode().Perm())
		case fi.IsDir():
			err = os.Mkdir(target, fi.Mode().Perm())
		case fi.Mode()&fs.ModeSymlink != 0:
			var link string
			if link, err = os.Readlink(path); err == nil {
				err = os.Symlink(link, target)
			}
		case fi.Mode().IsRegular():
			err = copyFile(path, target, fi.Mode().Perm())
		default:
			return fmt.Errorf("pgcluster: copy %s: %s is neither a file, a directory nor a link", from, path)
		}
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
			if err := os.Lchown(target, int(st.Uid), int(st.Gid)); err != nil {
				return fmt.Errorf("pgcluster: %w", err)
			}
		}
		return nil
	})
}

func copyFile(from, to string, perm fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
