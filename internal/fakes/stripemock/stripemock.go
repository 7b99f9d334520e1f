// Package stripemock starts Stripe's own API simulator, stripe-mock
// (github.com/stripe/stripe-mock, pinned in tools/go.mod), for tests of the
// Stripe gateway plugin. stripe-mock validates every request against
// Stripe's OpenAPI description — a parameter Stripe does not know, a
// missing required one or a missing secret key is refused as Stripe would
// refuse it — and answers with fixture objects. It keeps no state: a
// session it returns does not carry the amount, metadata or status the
// plugin sent or expects, so what depends on state (a paid session, an
// expired one, amounts coming back) is tested against httptest servers
// instead (see internal/plugintest/stripe_test.go).
//
// Test support: imported from _test files only.
package stripemock

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rustbill/paymentd/internal/testkit"
)

// Server is a running stripe-mock.
type Server struct {
	url string
}

// URL is the HTTP base URL, the plugin's api_base.
func (s *Server) URL() string { return s.url }

// Key is a secret key stripe-mock accepts (any sk_test_ key is).
const Key = "sk_test_paymentd"

var binary struct {
	sync.Mutex
	path string
}

// repoRoot is the repository's root directory (where tools/go.mod is).
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// build returns the path of the stripe-mock binary: `go tool -n` builds
// the pinned version into the Go build cache, once per test process.
func build(t testing.TB) string {
	t.Helper()
	binary.Lock()
	defer binary.Unlock()
	if binary.path != "" {
		return binary.path
	}
	c := exec.Command("go", "tool", "-n", "-modfile=tools/go.mod", "stripe-mock")
	c.Dir = repoRoot()
	var stderr bytes.Buffer
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("stripemock: building stripe-mock: %v\n%s", err, stderr.String())
	}
	binary.path = strings.TrimSpace(string(out))
	return binary.path
}

var listening = regexp.MustCompile(`Listening for HTTP at address: (127\.0\.0\.1:\d+)`)

// Start runs stripe-mock on free loopback ports (HTTP and the HTTPS it
// always opens) and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s, stop, err := launch(build(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return s
}

// launch starts a stripe-mock process and waits until it listens; stop
// kills it.
func launch(path string) (s *Server, stop func(), err error) {
	out := &testkit.Logs{} // the process output, read for the line naming its address
	cmd := exec.Command(path, "-http-addr", "127.0.0.1:", "-https-addr", "127.0.0.1:")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("stripemock: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	stop = func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	// Loading Stripe's OpenAPI description takes a few seconds.
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			return &Server{url: "http://" + m[1]}, stop, nil
		}
		select {
		case <-tick.C:
		case <-exited:
			if m := listening.FindStringSubmatch(out.String()); m == nil {
				return nil, nil, fmt.Errorf("stripemock: stripe-mock exited before it listened:\n%s", out.String())
			}
		case <-deadline.C:
			stop()
			return nil, nil, fmt.Errorf("stripemock: stripe-mock did not start in 60 s:\n%s", out.String())
		}
	}
}

// shared is the one stripe-mock of a package's tests that call Shared:
// started by the first, stopped by Main when the tests have run.
var shared struct {
	sync.Mutex
	managed bool
	server  *Server
	stop    func()
	err     error
}

// Shared is one stripe-mock for every test of the package that asks for
// it, started by the first and stopped when the run ends. stripe-mock keeps
// no state (see the package doc), so tests cannot see each other through
// it; each one saves the seconds a process takes to load Stripe's OpenAPI
// description. The package's TestMain must run the tests through Main.
func Shared(t testing.TB) *Server {
	t.Helper()
	path := build(t)
	shared.Lock()
	defer shared.Unlock()
	if !shared.managed {
		t.Fatal("stripemock.Shared needs the package's TestMain to run the tests through stripemock.Main: " +
			"func TestMain(m *testing.M) { goleak.VerifyTestMain(stripemock.Main(m)) }")
	}
	if shared.server == nil && shared.err == nil {
		shared.server, shared.stop, shared.err = launch(path)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.server
}

// Main runs a package's tests (m: a *testing.M, or a runner wrapping one
// such as testdb.Main's) so that Shared may be called, and stops the shared
// stripe-mock once they have run.
func Main(m interface{ Run() int }) interface{ Run() int } {
	return mainRunner{m: m}
}

type mainRunner struct{ m interface{ Run() int } }

func (r mainRunner) Run() int {
	shared.Lock()
	shared.managed = true
	shared.Unlock()

	code := r.m.Run()

	shared.Lock()
	defer shared.Unlock()
	shared.managed = false
	if shared.stop != nil {
		shared.stop()
	}
	shared.server, shared.stop, shared.err = nil, nil, nil
	return code
}
