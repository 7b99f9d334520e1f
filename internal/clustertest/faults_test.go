package clustertest_test

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/clustertest"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/pgcluster"
	"github.com/rustbill/paymentd/internal/testdb"
)

// privatePostgres starts a PostgreSQL cluster of the test's own in a
// temporary directory (never the shared server on 5432, which a test must
// not stop) and returns its database URL and data directory.
func privatePostgres(t *testing.T) (dbURL, dir string) {
	t.Helper()
	return testdb.PrivateServer(t, "paymentd")
}

// storm sends the gateway's notification for random payments to node from
// several goroutines until ctx ends, counting every answer's code.
func storm(ctx context.Context, b *bundle, node *clustertest.Node, ids []string) map[connect.Code]int {
	codes := map[connect.Code]int{}
	for _, a := range notifyStorm(ctx, b, []*clustertest.Node{node}, 6, ids, false, nil) {
		codes[a.code]++
	}
	return codes
}

// In the middle of a callback storm PostgreSQL first loses every
// connection (pg_terminate_backend), then is restarted. Callers get
// Unavailable (or Internal) meanwhile — never another answer — the
// service recovers on its own (same process), and no payment is half
// written: every one ends settled once, the ledger clean.
func TestPostgresRestartedDuringACallbackStormLosesNothing(t *testing.T) {
	t.Parallel()
	dbURL, pgDir := privatePostgres(t)
	b := setup(t, 1, dbURL)
	node := b.c.Nodes[0]
	ctx := context.Background()

	// The gateway's own notifications are "lost": the storm alone settles.
	b.fake.DropNotify(true)
	ids, err := b.w.PaidPayments(ctx, 30)
	require.NoError(t, err)

	phase := func(name string, fault func()) map[connect.Code]int {
		stormCtx, stop := context.WithCancel(ctx)
		done := make(chan map[connect.Code]int, 1)
		go func() { done <- storm(stormCtx, b, node, ids) }()
		time.Sleep(700 * time.Millisecond)
		fault()
		time.Sleep(1500 * time.Millisecond)
		stop()
		codes := <-done
		t.Logf("%s: answers %v", name, codes)
		return codes
	}
	allowed := map[connect.Code]bool{
		0: true, connect.CodeAlreadyExists: true, // settled now, or before
		connect.CodeUnavailable: true, connect.CodeInternal: true,
	}
	check := func(codes map[connect.Code]int) {
		t.Helper()
		for code, n := range codes {
			require.True(t, allowed[code], "%d answers %v during the fault", n, code)
		}
	}

	check(phase("connections terminated", func() {
		var killed int
		require.NoError(t, b.c.Pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&killed))
		t.Logf("terminated %d backends", killed)
	}))
	codes := phase("restarted", func() {
		stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		require.NoError(t, pgcluster.Stop(stopCtx, pgDir))
		time.Sleep(500 * time.Millisecond) // the storm meets a database that is gone
		_, err := pgcluster.Ensure(stopCtx, pgDir, "paymentd", t.Logf)
		require.NoError(t, err)
	})
	check(codes)
	require.Positive(t, codes[connect.CodeUnavailable], "the storm met the outage, and a lost database answers Unavailable")

	// Recovered without a restart: the same process answers, and a last
	// round of notifications settles whatever the outage interrupted.
	require.True(t, node.Alive(), "the service survived the outage")
	require.NoError(t, node.WaitReady(ctx))
	require.Eventually(t, func() bool {
		for _, id := range ids {
			if err := b.w.Notify(ctx, node, id); codeOf(err) != 0 && codeOf(err) != connect.CodeAlreadyExists {
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond)
	b.requireClean(t, 30*time.Second)
}

// The gateway answers 500, answers too slowly, or is not there: after
// [outbound].failure_threshold failures the breaker opens and CreatePayment
// fails fast with Unavailable without calling out; after the cool-down one
// probe goes through and, the gateway being back, everything works again.
func TestGatewayFaultsOpenTheBreakerAndItClosesAfterTheCooldown(t *testing.T) {
	t.Parallel()
	// A 1.5 s attempt timeout and a 2 s cool-down (clustertest's defaults).
	b := setup(t, 1, testdb.URL(t))
	node := b.c.Nodes[0]
	ctx := context.Background()

	for _, tc := range []struct {
		name  string
		fault func()
		// least is how many failed creations open the breaker at least:
		// failure_threshold when only payment creation fails (the
		// reconciler's status queries to the same host may succeed in
		// between: the breaker counts consecutive failures per host), one
		// when the whole gateway is down (those queries fail too).
		least int
	}{
		{"500", func() { b.fake.InjectFault(fakeFault("/mapi.php", 0, 500)) }, 5},
		{"slow", func() { b.fake.InjectFault(fakeFault("", 1600*time.Millisecond, 0)) }, 1},
		{"no answer", func() { b.fake.InjectFault(fakeFault("/mapi.php", 0, -1)) }, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fault()
			var failures, fastUnavailable int
			for i := 0; i < 20 && fastUnavailable < 3; i++ {
				start := time.Now()
				_, err := b.w.CreatePayment(ctx, node)
				took := time.Since(start)
				switch codeOf(err) {
				case connect.CodeInternal:
					failures++
				case connect.CodeUnavailable:
					// Below the 1.5 s attempt timeout: no call went out.
					// (Typically a few ms; the margin is for a loaded CI.)
					require.Less(t, took, 1400*time.Millisecond, "an open breaker fails fast")
					require.ErrorContains(t, err, "unavailable")
					fastUnavailable++
				default:
					t.Fatalf("call %d: %v", i, err)
				}
			}
			t.Logf("%d failed creations, then %d fast Unavailable", failures, fastUnavailable)
			require.GreaterOrEqual(t, failures, tc.least, "the breaker opens after [outbound].failure_threshold failures")
			require.Equal(t, 3, fastUnavailable)

			b.fake.ClearFaults()
			// Unavailable is "not yet" (the breaker still open); the poll
			// stops at anything else, which must be a success.
			var err error
			require.Eventually(t, func() bool {
				_, err = b.w.CreatePayment(ctx, node)
				return codeOf(err) != connect.CodeUnavailable
			}, 10*time.Second, 250*time.Millisecond, "the breaker closes after the cool-down")
			require.NoError(t, err, "the first creation past the breaker")
			_, err = b.w.CreatePayment(ctx, node)
			require.NoError(t, err)
		})
	}
	// Nothing half-made: failed creations left no payment behind.
	b.requireClean(t, 30*time.Second)
}

// fakeFault is a fault of the merchant API at path: a delay, then status
// (0: answer normally after the delay; -1: hang up without an answer).
func fakeFault(path string, delay time.Duration, status int) epay.Fault {
	if status < 0 {
		return epay.Fault{Path: path, Delay: delay, Hangup: true}
	}
	return epay.Fault{Path: path, Delay: delay, Status: status}
}

// codeOf is err's code, 0 for success (connect.CodeOf(nil) is Unknown).
func codeOf(err error) connect.Code {
	if err == nil {
		return 0
	}
	return connect.CodeOf(err)
}

// mailbox is a plain SMTP server (no TLS, no auth) that counts what it
// receives. While down, it answers every session with SMTP's "421 service
// not available", as a real server does when it cannot take mail; its port
// stays bound (closing it and listening again later lets another test's
// listener or connection take the free port in between).
type mailbox struct {
	mu    sync.Mutex
	rcpts []string
	down  atomic.Bool
}

func (m *mailbox) NewSession(*smtp.Conn) (smtp.Session, error) {
	if m.down.Load() {
		return nil, &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 2}, Message: "Service not available"}
	}
	return &mailSession{m: m}, nil
}

type mailSession struct {
	m  *mailbox
	to []string
}

func (s *mailSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}
func (s *mailSession) Data(r io.Reader) error {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	s.m.mu.Lock()
	s.m.rcpts = append(s.m.rcpts, s.to...)
	s.m.mu.Unlock()
	return nil
}
func (s *mailSession) Reset()        { s.to = nil }
func (s *mailSession) Logout() error { return nil }

func (m *mailbox) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.rcpts)
}

// The SMTP server is down: notifications are retried with backoff while
// the events that queued them complete and orders reach active; once the
// server is back, every notification goes out, once.
func TestSMTPDownDelaysNotificationsButNotEvents(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	box := &mailbox{}
	box.down.Store(true)
	srv := smtp.NewServer(box)
	srv.Domain = "localhost"
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); <-served })
	port := l.Addr().(*net.TCPAddr).Port
	b := setup(t, 1, testdb.URL(t),
		"PAYMENTD_NOTIFY__SMTP__HOST=127.0.0.1", "PAYMENTD_NOTIFY__SMTP__PORT="+strconv.Itoa(port),
		"PAYMENTD_NOTIFY__SMTP__FROM=billing@example.com", "PAYMENTD_NOTIFY__SMTP__TLS_POLICY=none",
		"PAYMENTD_NOTIFY__SMTP__TIMEOUT=1s", "PAYMENTD_NOTIFY__SEND_TIMEOUT=2s",
		"PAYMENTD_NOTIFY__RETRY_BASE=300ms", "PAYMENTD_NOTIFY__RETRY_MAX=1s", "PAYMENTD_NOTIFY__MAX_ATTEMPTS=100")
	ctx := context.Background()

	_, err = b.w.PaidPayments(ctx, 5)
	require.NoError(t, err)
	// Events complete and orders go active although no mail can leave.
	require.NoError(t, b.w.Settle(ctx, 30*time.Second))
	var queued, sent, retried int
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, b.c.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'sent'),
			count(*) FILTER (WHERE attempts >= 2 AND last_error <> '') FROM notifications WHERE channel = 'email'`).Scan(&queued, &sent, &retried))
		assert.Positive(c, queued, "e-mails queued")
		assert.Equal(c, queued, retried, "every e-mail is retried")
	}, 20*time.Second, 200*time.Millisecond)
	require.Zero(t, sent)
	require.Zero(t, box.count(), "nothing delivered while the server is down")
	var eventsOpen int
	require.NoError(t, b.c.Pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE status <> 'done'`).Scan(&eventsOpen))
	require.Zero(t, eventsOpen, "events completed without the mail server")

	// The server comes back: everything goes out, once.
	box.down.Store(false)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		require.NoError(c, b.c.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'sent') FROM notifications WHERE channel = 'email'`).Scan(&sent))
		assert.Equal(c, queued, sent, "e-mails sent of those queued")
	}, 30*time.Second, 200*time.Millisecond)
	require.Equal(t, queued, box.count(), "each notification delivered once")
	b.requireClean(t, 10*time.Second)
}
