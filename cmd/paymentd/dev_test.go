package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/localport"
	"github.com/rustbill/paymentd/internal/pgcluster"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// devProcess is one `paymentd dev` running as a separate process in a
// directory of its own (its .data/postgres cluster included).
type devProcess struct {
	dir      string
	cmd      *exec.Cmd
	pid      int           // paymentd's own pid (cmd's, or its child's under a wrapper)
	exited   chan struct{} // closed when cmd has exited and its output is read
	waitErr  error         // cmd.Wait's answer, once exited is closed
	out      *testkit.Logs // stdout and stderr
	httpPort int
}

// newDevDir is a working directory for paymentd dev, reachable by the
// postgres user (the cluster runs as it when we are root); its cluster is
// stopped and the directory removed at the end. Its .data/postgres holds
// no cluster: paymentd dev makes one with initdb.
func newDevDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "paymentd-dev-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = pgcluster.Stop(ctx, filepath.Join(dir, devPGDir))
		_ = os.RemoveAll(dir)
	})
	return dir
}

// newDevDirWithCluster is newDevDir with a stopped cluster already in its
// .data/postgres (a copy of the process's template, testdb), as a second
// run of paymentd dev finds it: for the tests of how paymentd dev stops,
// which do not need an initdb each (TestDevKeepDBLeavesThePrivateDatabaseRunning
// starts in an empty directory).
func newDevDirWithCluster(t *testing.T) string {
	t.Helper()
	dir := newDevDir(t)
	testdb.StoppedPrivateCluster(t, filepath.Join(dir, devPGDir))
	return dir
}

// startDev starts `paymentd dev args...` in dir; with wrapped, under `sh -c`
// that does not pass signals on (as `go run` and task wrappers do not), and
// waits until the service answers /health.
func startDev(t *testing.T, dir string, wrapped bool, args ...string) *devProcess {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	d := &devProcess{dir: dir, httpPort: testkit.FreePort(t), exited: make(chan struct{}), out: &testkit.Logs{}}
	argv := append([]string{exe, "dev"}, args...)
	if wrapped {
		// "; exit" keeps sh from exec'ing paymentd: sh stays the parent.
		argv = append([]string{"sh", "-c", `"$@"; exit $?`, "sh"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PAYMENTD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, runMainEnv+"=1",
		"PAYMENTD_SERVER__PORT="+strconv.Itoa(d.httpPort),
		"PAYMENTD_SERVER__PUBLIC_URL=http://127.0.0.1:"+strconv.Itoa(d.httpPort),
		"PAYMENTD_METRICS__PORT=0",
		"PAYMENTD_PLUGINS__DIR="+repoPlugins(t))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // no signal meant for the test reaches it
	cmd.Stdout, cmd.Stderr = d.out, d.out
	require.NoError(t, cmd.Start())
	d.cmd = cmd
	go func() { d.waitErr = cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-d.exited })

	d.pid = cmd.Process.Pid
	if wrapped {
		require.Eventually(t, func() bool {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
			if err != nil {
				return false
			}
			d.pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
			return err == nil
		}, 10*time.Second, 20*time.Millisecond, "sh started no paymentd")
	}
	deadline := time.After(3 * time.Minute)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health", d.httpPort))
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d
			}
		}
		select {
		case <-d.exited:
			t.Fatalf("paymentd dev exited before it answered:\n%s", d.out)
		case <-deadline:
			t.Fatalf("paymentd dev did not answer /health within 3 minutes:\n%s", d.out)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// postgresPid is the private cluster's postmaster pid and port.
func (d *devProcess) postgres(t *testing.T) (pid, port int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(d.dir, devPGDir, "postmaster.pid"))
	require.NoError(t, err, "the private cluster runs")
	lines := strings.Split(string(b), "\n")
	require.GreaterOrEqual(t, len(lines), 4)
	pid, err = strconv.Atoi(strings.TrimSpace(lines[0]))
	require.NoError(t, err)
	port, err = strconv.Atoi(strings.TrimSpace(lines[3]))
	require.NoError(t, err)
	return pid, port
}

// waitExited waits until cmd and paymentd (its child, under a wrapper) have
// exited, and answers cmd's exit error.
func (d *devProcess) waitExited(t *testing.T) error {
	t.Helper()
	select {
	case <-d.exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("paymentd dev did not exit within 2 minutes:\n%s", d.out)
	}
	require.Eventually(t, func() bool { return !alive(d.pid) }, time.Minute, 50*time.Millisecond,
		"paymentd (pid %d) is gone", d.pid)
	return d.waitErr
}

// alive reports whether pid is a process that has not exited (a zombie
// waiting for its parent has exited).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// requireAllStopped waits until the private PostgreSQL is gone and both
// ports are free. When the wrapper was killed, paymentd notices its
// parent's death and stops on its own, after the wrapper's exit: on a busy
// machine that takes a few seconds, so the test polls rather than looks once.
func requireAllStopped(t *testing.T, d *devProcess, pgPid, pgPort int) {
	t.Helper()
	require.Eventually(t, func() bool { return !alive(pgPid) }, 60*time.Second, 50*time.Millisecond,
		"the private PostgreSQL (pid %d) is stopped:\n%s", pgPid, d.out)
	require.Eventually(t, func() bool { return localport.IsFree(pgPort) && localport.IsFree(d.httpPort) }, 10*time.Second, 50*time.Millisecond,
		"the database port %d and the service port %d are free", pgPort, d.httpPort)
	require.Eventually(t, func() bool {
		return strings.Contains(d.out.String(), "the private PostgreSQL in .data/postgres is stopped")
	},
		10*time.Second, 50*time.Millisecond, "%s", d.out)
}

func TestDevSignalStopsTheServiceThenItsPrivateDatabase(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			d := startDev(t, newDevDirWithCluster(t), false)
			pgPid, pgPort := d.postgres(t)
			require.NoError(t, d.cmd.Process.Signal(sig))
			require.NoError(t, d.waitExited(t), "a signal is a graceful stop, exit status 0:\n%s", d.out)
			requireAllStopped(t, d, pgPid, pgPort)
		})
	}
}

func TestDevStopsWhenTheWrapperThatStartedItIsKilled(t *testing.T) {
	t.Parallel()
	d := startDev(t, newDevDirWithCluster(t), true)
	pgPid, pgPort := d.postgres(t)
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM)) // sh dies and passes nothing on
	var exit *exec.ExitError
	require.True(t, errors.As(d.waitExited(t), &exit), "sh died of the signal")
	requireAllStopped(t, d, pgPid, pgPort)
}

func TestDevKeepDBLeavesThePrivateDatabaseRunning(t *testing.T) {
	t.Parallel()
	d := startDev(t, newDevDir(t), false, "--keep-db")
	pgPid, pgPort := d.postgres(t)
	require.NoError(t, d.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, d.waitExited(t))
	require.True(t, alive(pgPid), "--keep-db: PostgreSQL (pid %d) still runs", pgPid)
	require.False(t, localport.IsFree(pgPort))

	// The next run reuses it, and (without --keep-db) stops it.
	again := startDev(t, d.dir, false)
	require.Equal(t, pgPid, func() int { p, _ := again.postgres(t); return p }(), "the running cluster is reused")
	require.NoError(t, again.cmd.Process.Signal(syscall.SIGINT))
	require.NoError(t, again.waitExited(t))
	requireAllStopped(t, again, pgPid, pgPort)
}

func TestDevFakesStopWhenTheWrapperThatStartedThemIsKilled(t *testing.T) {
	// `go run ./cmd/paymentd dev fake-epay` left its child running after a
	// SIGTERM to go run: go run dies without passing the signal on.
	for _, fake := range []string{"fake-epay", "fake-alipay", "fake-wechatpay", "fake-provider"} {
		t.Run(fake, func(t *testing.T) {
			t.Parallel()
			exe, err := os.Executable()
			require.NoError(t, err)
			dir := t.TempDir()
			// "; exit" keeps sh from exec'ing paymentd: sh stays the parent.
			cmd := exec.Command("sh", "-c", `"$@"; exit $?`, "sh", exe, "dev", fake, "--addr", "127.0.0.1:0")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), runMainEnv+"=1")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			out := &testkit.Logs{}
			cmd.Stdout, cmd.Stderr = out, out
			require.NoError(t, cmd.Start())
			exited := make(chan struct{})
			go func() { _ = cmd.Wait(); close(exited) }()
			t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-exited })

			var child int
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
				if err != nil {
					return false
				}
				child, err = strconv.Atoi(strings.TrimSpace(string(b)))
				return err == nil
			}, 10*time.Second, 20*time.Millisecond, "sh started no paymentd")
			require.Eventually(t, func() bool { return strings.Contains(out.String(), "Ctrl-C") }, time.Minute, 20*time.Millisecond,
				"the fake serves:\n%s", out)

			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM)) // sh dies and passes nothing on
			// Not <-exited: Wait also waits for the output pipes, which a
			// fake left running would hold open.
			require.Eventually(t, func() bool { return !alive(cmd.Process.Pid) }, time.Minute, 20*time.Millisecond, "sh died")
			require.Eventually(t, func() bool { return !alive(child) }, time.Minute, 50*time.Millisecond,
				"the fake (pid %d) stops with its wrapper:\n%s", child, out)
			require.Contains(t, out.String(), "is gone; stopping")
		})
	}
}
