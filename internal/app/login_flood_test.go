package app_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// hashGate is the BeforeHash hook of a test that holds the hashing slots:
// while armed, each argon2id run on a caller's password announces itself
// on entered and waits for open; it counts every run either way.
type hashGate struct {
	armed   atomic.Bool
	runs    atomic.Int64
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newHashGate(t *testing.T) *hashGate {
	g := &hashGate{entered: make(chan struct{}, 64), release: make(chan struct{})}
	t.Cleanup(g.open) // a failed test must not leave calls blocked
	return g
}

func (g *hashGate) hook() {
	g.runs.Add(1)
	if g.armed.Load() {
		g.entered <- struct{}{}
		<-g.release
	}
}

func (g *hashGate) open() { g.once.Do(func() { close(g.release) }) }

// registered registers a customer and returns its access token.
func registered(t *testing.T, ids identitypbconnect.IdentityServiceClient, email, password string) string {
	t.Helper()
	res, err := ids.Register(context.Background(), connect.NewRequest(&identitypb.RegisterRequest{Email: email, Password: password, Name: "Flood"}))
	require.NoError(t, err)
	return res.Msg.GetAccessToken()
}

// wrongLogin logs in with a wrong password. Its deadline is a hang guard,
// not a speed target: a call the queue should refuse at once would
// otherwise wait for the gate.
func wrongLogin(ids identitypbconnect.IdentityServiceClient, email string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := ids.Login(ctx, connect.NewRequest(&identitypb.LoginRequest{Email: email, Password: "a wrong password"}))
	return err
}

// requireRetryLater asserts a refusal that tells the client when to try
// again, as the per-address limit's does: ResourceExhausted, a RetryInfo
// detail and a Retry-After header.
func requireRetryLater(t *testing.T, err error) {
	t.Helper()
	require.Equal(t, connect.CodeResourceExhausted, connect.CodeOf(err), "%v", err)
	var ce *connect.Error
	require.ErrorAs(t, err, &ce)
	require.NotEmpty(t, ce.Meta().Get("Retry-After"), "a Retry-After header")
	var delay *errdetails.RetryInfo
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if ri, ok := v.(*errdetails.RetryInfo); ok {
				delay = ri
			}
		}
	}
	require.NotNil(t, delay, "a RetryInfo detail")
	require.Positive(t, delay.GetRetryDelay().AsDuration())
}

// A login flood used to fill [server].max_concurrency with calls that only
// waited for argon2id, and every other call queued behind them (issue 35).
// With one hashing slot held and a second login waiting for it, and two
// slots of the concurrency limit, GetMe still answers: neither login holds
// a slot of the limit while it waits or hashes.
func TestACallWaitingForAPasswordHashHoldsNoConcurrencySlot(t *testing.T) {
	t.Parallel()
	cfg := testConfig(testdb.URL(t))
	cfg.Server.MaxConcurrency = 2
	gate := newHashGate(t)
	r := start(t, cfg, app.WithSignals(app.Signals{BeforeHash: gate.hook}), app.WithPasswordHashing(1, 4, time.Hour))
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, r.baseURL)
	token := registered(t, ids, "flood-slot@example.com", "the right password")

	gate.armed.Store(true)
	answers := make(chan error, 2)
	go func() { answers <- wrongLogin(ids, "nobody@example.com") }()
	<-gate.entered // the first holds the hashing slot
	go func() { answers <- wrongLogin(ids, "nobody@example.com") }()
	require.Eventually(t, func() bool { return r.app.PasswordChecksWaiting() == 1 }, 10*time.Second, 5*time.Millisecond,
		"the second login waits for the hashing slot")

	// A hang guard, not a speed target: with the old behaviour both slots
	// are held until the gate opens, and GetMe never answers.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := connect.NewRequest(&identitypb.GetMeRequest{})
	req.Header().Set("Authorization", "Bearer "+token)
	me, err := ids.GetMe(ctx, req)
	require.NoError(t, err, "GetMe answers while the password calls wait for argon2id")
	require.Equal(t, "flood-slot@example.com", me.Msg.GetEmail())

	gate.armed.Store(false)
	gate.open()
	for range 2 {
		require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(<-answers), "each waiting login is judged once the slot frees")
	}
}

// Past the hash queue's bound a password call is refused at once, with a
// retry delay: it is answered while the hashing slot is still held.
func TestAPasswordCallPastTheHashQueueIsRefusedAtOnceWithARetryDelay(t *testing.T) {
	t.Parallel()
	cfg := testConfig(testdb.URL(t))
	gate := newHashGate(t)
	r := start(t, cfg, app.WithSignals(app.Signals{BeforeHash: gate.hook}), app.WithPasswordHashing(1, 2, time.Hour))
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, r.baseURL)

	gate.armed.Store(true)
	answers := make(chan error, 3)
	go func() { answers <- wrongLogin(ids, "nobody@example.com") }()
	<-gate.entered
	for range 2 {
		go func() { answers <- wrongLogin(ids, "nobody@example.com") }()
	}
	require.Eventually(t, func() bool { return r.app.PasswordChecksWaiting() == 2 }, 10*time.Second, 5*time.Millisecond,
		"two logins fill the queue")

	requireRetryLater(t, wrongLogin(ids, "nobody@example.com"))
	// Registration and the password change hash too, and meet the same bound.
	_, err := ids.Register(context.Background(), connect.NewRequest(&identitypb.RegisterRequest{Email: "late@example.com", Password: "a long password", Name: "Late"}))
	requireRetryLater(t, err)
	require.Len(t, answers, 0, "the queued logins still wait: the refusals came at once")

	gate.armed.Store(false)
	gate.open()
	for range 3 {
		require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(<-answers))
	}
}

// The per-account budget counts the attempts on one account from every
// address together, whether or not it exists, and refuses the next with a
// retry delay before any hash: even the right password is not judged.
// Another account is not touched.
func TestThePerAccountPasswordBudgetRefusesBeforeAnyHash(t *testing.T) {
	t.Parallel()
	cfg := testConfig(testdb.URL(t))
	cfg.RateLimit.Enabled = true
	cfg.RateLimit.LoginPerSec = 100
	cfg.RateLimit.PasswordPerSec = 100
	cfg.RateLimit.PasswordPerAccountPerMin = 3
	gate := newHashGate(t)
	clock := testkit.NewClock()
	r := start(t, cfg, app.WithSignals(app.Signals{BeforeHash: gate.hook}), app.WithRateLimitClock(clock.Now))
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, r.baseURL)

	registered(t, ids, "victim@example.com", "the right password") // the account's first attempt
	for range 2 {
		require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(wrongLogin(ids, "Victim@Example.com")))
	}
	runs := gate.runs.Load()
	_, err := ids.Login(context.Background(), connect.NewRequest(&identitypb.LoginRequest{Email: "victim@example.com", Password: "the right password"}))
	requireRetryLater(t, err)
	require.Equal(t, runs, gate.runs.Load(), "a refused attempt runs no hash")

	// An account that does not exist is answered alike: its budget is spent
	// the same way, so the refusal tells nothing.
	for range 3 {
		require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(wrongLogin(ids, "ghost@example.com")))
	}
	requireRetryLater(t, wrongLogin(ids, "ghost@example.com"))

	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(wrongLogin(ids, "someone-else@example.com")), "another account has its own budget")

	clock.Advance(20 * time.Second) // one attempt every 20 s
	_, err = ids.Login(context.Background(), connect.NewRequest(&identitypb.LoginRequest{Email: "victim@example.com", Password: "the right password"}))
	require.NoError(t, err, "the budget refills")
}

// The global budget counts the attempts of every address and account
// together and refuses the next with a retry delay before any hash.
func TestTheGlobalPasswordBudgetRefusesBeforeAnyHash(t *testing.T) {
	t.Parallel()
	cfg := testConfig(testdb.URL(t))
	cfg.RateLimit.Enabled = true
	cfg.RateLimit.LoginPerSec = 100
	cfg.RateLimit.PasswordPerSec = 3
	cfg.RateLimit.PasswordPerAccountPerMin = 100
	gate := newHashGate(t)
	clock := testkit.NewClock()
	r := start(t, cfg, app.WithSignals(app.Signals{BeforeHash: gate.hook}), app.WithRateLimitClock(clock.Now))
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, r.baseURL)

	for _, email := range []string{"a@example.com", "b@example.com", "c@example.com"} {
		require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(wrongLogin(ids, email)))
	}
	runs := gate.runs.Load()
	requireRetryLater(t, wrongLogin(ids, "d@example.com"))
	_, err := ids.AdminLogin(context.Background(), connect.NewRequest(&identitypb.AdminLoginRequest{Username: "admin", Password: "bootstrap-password"}))
	requireRetryLater(t, err)
	require.Equal(t, runs, gate.runs.Load(), "a refused attempt runs no hash")

	clock.Advance(time.Second)
	_, err = ids.AdminLogin(context.Background(), connect.NewRequest(&identitypb.AdminLoginRequest{Username: "admin", Password: "bootstrap-password"}))
	require.NoError(t, err, "the budget refills")
}
