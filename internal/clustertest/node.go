package clustertest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Node is one paymentd process of a Cluster.
type Node struct {
	// Name is the harness's name ("node-1"); ID the cluster node id the
	// process chose (host name + random suffix), known once it logged it.
	Name string
	Port int
	// URL is http://127.0.0.1:port, also its [server].public_url.
	URL string

	bin     string
	env     []string
	logPath string
	logf    func(string, ...any)

	mu      sync.Mutex
	cmd     *exec.Cmd
	id      string
	ids     []string // every node id this Node had (one per process life)
	exited  chan struct{}
	exitErr error
	tail    []string
	lead    []LeadershipChange
	counts  map[string]int
	killed  bool
	// ends maps each life's node id to when its process ended (the kill's
	// time for a kill).
	ends map[string]time.Time
}

// LeadershipChange is a node's own word (its log) that it began or stopped
// acting as a role's leader. A killed process says nothing: its last
// interval ends at the kill.
type LeadershipChange struct {
	Node    string // cluster node id
	Role    string
	Leading bool
	At      time.Time
}

const tailLines = 300

// Start runs the process (again, after Kill or Stop: a new node id, the same
// port). It returns once the process runs; WaitReady waits for /ready.
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		select {
		case <-n.exited:
		default:
			return fmt.Errorf("clustertest: %s is already running", n.Name)
		}
	}
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(n.bin, "serve")
	cmd.Env = n.env
	cmd.Dir = filepath.Dir(n.logPath)
	cmd.Stdout = f
	stderr, err := cmd.StderrPipe()
	if err != nil {
		f.Close()
		return err
	}
	// Its own process group: a Ctrl-C of the test does not reach it first,
	// and Kill takes exactly this process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("clustertest: start %s: %w", n.Name, err)
	}
	n.cmd, n.id, n.killed = cmd, "", false
	exited := make(chan struct{})
	n.exited = exited
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		n.scan(io.TeeReader(stderr, f))
	}()
	go func() {
		<-scanned
		err := cmd.Wait()
		f.Close()
		n.mu.Lock()
		n.exitErr = err
		if n.ends == nil {
			n.ends = map[string]time.Time{}
		}
		if _, ok := n.ends[n.id]; !ok && n.id != "" {
			n.ends[n.id] = time.Now()
		}
		n.mu.Unlock()
		close(exited)
	}()
	return nil
}

// scan reads the process's JSON log lines: it keeps a tail for failure
// reports, learns the node id, and records leadership changes.
func (n *Node) scan(r io.Reader) {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		line := s.Text()
		var m map[string]any
		_ = json.Unmarshal([]byte(line), &m)
		msg, _ := m["msg"].(string)
		at := time.Now()
		if ts, ok := m["time"].(string); ok {
			if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
				at = t
			}
		}
		n.mu.Lock()
		n.tail = append(n.tail, line)
		if len(n.tail) > tailLines {
			n.tail = n.tail[len(n.tail)-tailLines:]
		}
		if msg != "" {
			if n.counts == nil {
				n.counts = map[string]int{}
			}
			n.counts[msg]++
		}
		node, _ := m["node"].(string)
		role, _ := m["role"].(string)
		if node != "" && n.id == "" && role != "" {
			n.id = node
			n.ids = append(n.ids, node)
		}
		if role != "" && node != "" {
			switch {
			case msg == "leadership gained":
				n.lead = append(n.lead, LeadershipChange{Node: node, Role: role, Leading: true, At: at})
			case strings.HasPrefix(msg, "leadership lost"), strings.HasPrefix(msg, "leadership given up"), msg == "leadership resigned":
				n.lead = append(n.lead, LeadershipChange{Node: node, Role: role, Leading: false, At: at})
			}
		}
		n.mu.Unlock()
	}
}

// ID is the cluster node id of the current process, "" until it logged it.
func (n *Node) ID() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.id
}

// HadID reports whether id was this Node's id in any of its lives.
func (n *Node) HadID(id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, x := range n.ids {
		if x == id {
			return true
		}
	}
	return false
}

// Alive reports whether the process runs.
func (n *Node) Alive() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// WaitReady polls GET /ready until it answers 200.
func (n *Node) WaitReady(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get(n.URL + "/ready")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		n.mu.Lock()
		exited := n.exited
		n.mu.Unlock()
		select {
		case <-exited:
			return fmt.Errorf("clustertest: %s exited before it was ready: %v\n%s", n.Name, n.exitErr, n.Tail(40))
		case <-ctx.Done():
			return fmt.Errorf("clustertest: %s not ready: %w\n%s", n.Name, ctx.Err(), n.Tail(40))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Kill ends the process with SIGKILL — a crash: no lease resigned, no
// request finished, no event handed back — and waits until it is gone. It
// returns the time of the kill.
func (n *Node) Kill() (time.Time, error) {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.killed = true
	n.mu.Unlock()
	if cmd == nil {
		return time.Time{}, errors.New("clustertest: not started")
	}
	at := time.Now()
	n.mu.Lock()
	if n.ends == nil {
		n.ends = map[string]time.Time{}
	}
	if n.id != "" {
		n.ends[n.id] = at
	}
	n.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return at, err
	}
	<-exited
	n.logf("clustertest: %s (%s) killed with SIGKILL", n.Name, n.ID())
	return at, nil
}

// Stop sends SIGTERM (the graceful stop: requests finished, leases
// resigned) and waits up to timeout, then kills.
func (n *Node) Stop(timeout time.Duration) error {
	n.mu.Lock()
	cmd, exited := n.cmd, n.exited
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-exited:
		return nil
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		n.mu.Lock()
		err := n.exitErr
		n.mu.Unlock()
		if err != nil {
			return fmt.Errorf("clustertest: %s stopped with %v\n%s", n.Name, err, n.Tail(30))
		}
		return nil
	case <-time.After(timeout):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-exited
		return fmt.Errorf("clustertest: %s did not stop within %s; killed", n.Name, timeout)
	}
}

// Use makes the node's next Start run bin with plugins as [plugins].dir
// (empty: the repository's plugins/): an operator replacing an instance's
// binary, for an upgrade or a rollback. The configuration stays the same,
// so it must hold only keys both builds know.
func (n *Node) Use(bin, plugins string) {
	if plugins == "" {
		plugins = PluginsDir()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.bin = bin
	// The last of a duplicated variable wins (os/exec).
	n.env = append(n.env[:len(n.env):len(n.env)], "PAYMENTD_PLUGINS__DIR="+plugins)
}

// Binary is the paymentd the node runs (or runs at its next Start).
func (n *Node) Binary() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.bin
}

// Tail is the last lines the process logged, for failure messages.
func (n *Node) Tail(lines int) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := n.tail
	if len(t) > lines {
		t = t[len(t)-lines:]
	}
	return "--- " + n.Name + " (" + strconv.Itoa(len(t)) + " lines) ---\n" + strings.Join(t, "\n")
}

// Leadership is what the node said about its roles so far.
func (n *Node) Leadership() []LeadershipChange {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]LeadershipChange(nil), n.lead...)
}

// Logged counts the log lines whose msg is msg (of every life of the node).
func (n *Node) Logged(msg string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.counts[msg]
}

// LogText is everything the node logged (every life), for greps.
func (n *Node) LogText() (string, error) {
	b, err := os.ReadFile(n.logPath)
	return string(b), err
}

// endOf is when the process life with node id id ended (zero: it runs).
func (n *Node) endOf(id string) time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ends[id]
}
