package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockPath is the lock file guarding dir. It lives beside dir, not inside it,
// because dir may not exist yet and is renamed into place on first init.
func lockPath(dir string) string {
	return filepath.Join(filepath.Dir(dir), "."+filepath.Base(dir)+".lock")
}

// lockDir takes an exclusive flock for dir (LockFile of its lockPath),
// waiting until ctx is done.
func lockDir(ctx context.Context, dir string) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	return LockFile(ctx, lockPath(dir))
}

// LockFile takes an exclusive flock of the file at path (made when
// missing), waiting until ctx is done. Each call opens the file anew, so
// goroutines of one process exclude each other just as separate processes
// do. The kernel drops the lock if we die.
func LockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o644) // flock needs no write access
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	// Poll with LOCK_NB rather than block in flock, so a cancelled context
	// (Ctrl-C, a test timeout) is honoured while another process holds it.
	const poll = 50 * time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			_ = f.Close()
			return nil, fmt.Errorf("pgcluster: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("pgcluster: waiting for lock %s: %w", path, context.Cause(ctx))
		case <-time.After(poll):
		}
	}
}
