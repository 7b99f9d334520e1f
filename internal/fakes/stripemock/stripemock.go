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
	out := &testkit.Logs{} // the process output, read for the line naming its address
	cmd := exec.Command(build(t), "-http-addr", "127.0.0.1:", "-https-addr", "127.0.0.1:")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("stripemock: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Loading Stripe's OpenAPI description takes a few seconds.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			return &Server{url: "http://" + m[1]}
		}
		if cmd.ProcessState != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("stripemock: stripe-mock did not start:\n%s", out.String())
	return nil
}
