// Package testredis runs private redis-server processes for tests: on a free
// port in a temporary directory, never the shared one on 6379, and able to be
// stopped and started again on the same port to play an outage. When
// redis-server is missing it installs Debian's redis-server package if it can
// (root with apt-get), so the tests run on a bare machine, and fails otherwise.
package testredis

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rustbill/paymentd/internal/testkit"
	"go.uber.org/goleak"
)

// redisServer is a private redis-server on a free port in a temporary
// directory, never the shared one on 6379. It can be stopped and started
// again on the same port to play an outage.
type Server struct {
	bin  string
	port int
	dir  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start runs a redis-server for the test and stops it in t.Cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{bin: bin, dir: t.TempDir()}
	// A free port can be taken by another process between testkit.FreePort's
	// check and redis-server binding it; the first start then tries another.
	for attempt := 1; ; attempt++ {
		s.port = testkit.FreePort(t)
		err := s.launch()
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || attempt == 5 {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { s.Stop(t) })
	return s
}

var errPortTaken = errors.New("port taken")

var installOnce struct {
	sync.Once
	bin string
	err error
}

// binary finds redis-server, installing Debian's package once when it is
// missing and we are root with apt-get.
func binary() (string, error) {
	installOnce.Do(func() {
		if bin, err := exec.LookPath("redis-server"); err == nil {
			installOnce.bin = bin
			return
		}
		if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
			installOnce.err = fmt.Errorf("redis-server not found: install Debian's redis-server package (sudo apt-get install redis-server)")
			return
		}
		for _, args := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", "redis-server"}} {
			cmd := exec.Command("apt-get", args...)
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			if out, err := cmd.CombinedOutput(); err != nil {
				installOnce.err = fmt.Errorf("apt-get %s: %v: %s", strings.Join(args, " "), err, tail(out))
				return
			}
		}
		installOnce.bin, installOnce.err = exec.LookPath("redis-server")
	})
	return installOnce.bin, installOnce.err
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// URL is the server's redis:// URL.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// Start starts the server (again, on the same port).
func (s *Server) Start(t testing.TB) {
	t.Helper()
	if err := s.launch(); err != nil {
		t.Fatal(err)
	}
}

// launch runs redis-server on s.port and waits for its PONG. It answers
// errPortTaken when another process holds the port.
func (s *Server) launch() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("redis-server already running")
	}
	out := &testkit.Logs{}
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no",
		"--dir", s.dir, "--loglevel", "warning")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}

	deadline := time.Now().Add(5 * time.Second)
	for {
		select {
		case <-exited:
			if strings.Contains(out.String(), "Address already in use") {
				return fmt.Errorf("redis-server on port %d: %w", s.port, errPortTaken)
			}
			return fmt.Errorf("redis-server on port %d exited: %s", s.port, out.String())
		default:
		}
		if pong(s.port) {
			s.cmd, s.exited = cmd, exited
			return nil
		}
		if time.Now().After(deadline) {
			stop()
			return fmt.Errorf("redis-server on port %d did not answer PING: %s", s.port, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop kills the server, as an outage would.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd, s.exited = nil, nil
}

func pong(port int) bool {
	conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 100*time.Millisecond)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// IgnoreRedial is the goleak option for go-redis's redial loop: after a
// failed dial (a test that stops its server, or points at a free port) the
// pool retries in a goroutine that sleeps a second before it sees the pool
// closed, so it may outlive the test run by up to that second. It is not a
// leak of ours.
var IgnoreRedial = goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial")
