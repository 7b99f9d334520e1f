package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Proc is a child process the harness started: paymentd, the fakes, the
// empty server.
type Proc struct {
	Name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error
}

// StartProc starts bin with args in dir, with the environment env (added to
// a copy of ours without PAYMENTD_* variables), writing its stdout and
// stderr to logPath.
func StartProc(name, bin string, args []string, dir string, env []string, logPath string) (*Proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a Ctrl-C of the harness reaches the harness,
	// which stops its children in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// StartProcLine is StartProc for a process that announces itself with one
// line on stdout (the fakes print their URLs): it returns that line.
func StartProcLine(name, bin string, args []string, dir string, env []string, logPath string, timeout time.Duration) (*Proc, string, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	cmd.Stderr = f
	out, err := cmd.StdoutPipe()
	if err != nil {
		f.Close()
		return nil, "", err
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, "", fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, cmd: cmd, log: f, done: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(out)
		line, _ := r.ReadString('\n')
		lines <- strings.TrimSpace(line)
		_, _ = io.Copy(f, r)
		p.err = cmd.Wait()
		close(p.done)
	}()
	select {
	case line := <-lines:
		if line == "" {
			p.Stop(5 * time.Second)
			return nil, "", fmt.Errorf("%s exited without announcing itself (log %s)", name, logPath)
		}
		return p, line, nil
	case <-time.After(timeout):
		p.Stop(5 * time.Second)
		return nil, "", fmt.Errorf("%s did not announce itself within %s (log %s)", name, timeout, logPath)
	}
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PAYMENTD_") {
			env = append(env, kv)
		}
	}
	return env
}

// PID is the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits up to timeout for a graceful exit, then
// kills. It returns the exit error of a process that did not stop cleanly.
func (p *Proc) Stop(timeout time.Duration) error {
	defer p.log.Close()
	if p.Exited() {
		return p.err
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not stop within %s; killed", p.Name, timeout)
	}
}

// WaitReady polls url (a /ready endpoint) every millisecond until it
// answers 200, and returns how long that took from since. It fails when
// the process exits first or timeout passes.
func WaitReady(p *Proc, url string, since time.Time, timeout time.Duration) (time.Duration, error) {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	deadline := since.Add(timeout)
	for time.Now().Before(deadline) {
		if p != nil && p.Exited() {
			return 0, fmt.Errorf("%s exited before it was ready: %v", p.Name, p.err)
		}
		resp, err := client.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(since), nil
			}
		}
		time.Sleep(time.Millisecond)
	}
	return 0, fmt.Errorf("%s not ready within %s", url, timeout)
}

// releaseTags are the build tags of deploy/build.sh, which builds the
// release (and ./run.sh's binary) and which the benchmark runs: the
// grpcnotrace tag leaves out golang.org/x/net/trace, whose init reaches
// html/template's Execute and so makes the linker keep every exported
// method of every type (a binary 17 MB larger, idle RSS +5 MiB).
// TestReleaseBuildLeavesOutTemplateExecution checks the script uses them.
const releaseTags = "grpcnotrace"

// runCmd runs a command to completion, with its output in the error.
func runCmd(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, lastLinesOf(string(out), 10))
	}
	return nil
}
