package clustertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

// RepoRoot is the repository's root directory (where go.mod is).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// PluginsDir is the repository's plugins/ directory.
func PluginsDir() string { return filepath.Join(RepoRoot(), "plugins") }

var built struct {
	sync.Mutex
	path string
}

// Build compiles cmd/paymentd into a directory of its own under os.TempDir
// once per process and returns the binary's path. The binary is the one
// production runs: no test hooks.
func Build(ctx context.Context) (string, error) {
	built.Lock()
	defer built.Unlock()
	if built.path != "" {
		if _, err := os.Stat(built.path); err == nil {
			return built.path, nil
		}
	}
	dir, err := os.MkdirTemp("", "paymentd-bin-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "paymentd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./cmd/paymentd")
	cmd.Dir = RepoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("clustertest: go build ./cmd/paymentd: %w\n%s", err, b)
	}
	built.path = out
	return out, nil
}

// RemoveBuilt deletes the binary Build made (TestMain calls it at the end).
func RemoveBuilt() {
	built.Lock()
	defer built.Unlock()
	if built.path != "" {
		_ = os.RemoveAll(filepath.Dir(built.path))
		built.path = ""
	}
}
