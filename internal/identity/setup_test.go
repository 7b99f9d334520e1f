package identity_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testdb.Main(m)) }

const (
	jwtSecret         = "identity-test-secret-identity-test-secret"
	bootstrapPassword = "bootstrap-password"
	cookieName        = "pd_admin"
)

// bundle is one running paymentd on its own database.
type bundle struct {
	app      *app.App
	cfg      config.Config
	baseURL  string
	clock    *testkit.Clock
	logs     *testkit.Logs
	http     *http.Client
	h2c      *http.Client
	identity identitypbconnect.IdentityServiceClient
	admin    identitypbconnect.CustomerAdminServiceClient
}

type setupOption struct {
	mutate func(*config.Config)
	opts   []app.Option
}

func withConfig(f func(*config.Config)) setupOption { return setupOption{mutate: f} }

func withAppOption(o app.Option) setupOption { return setupOption{opts: []app.Option{o}} }

func setup(t *testing.T, options ...setupOption) *bundle {
	t.Helper()
	cfg := config.Default()
	cfg.DB.URL = testdb.URL(t)
	cfg.JWT.Secret = jwtSecret
	cfg.Bootstrap.AdminPassword = bootstrapPassword
	cfg.Session.CookieName = cookieName
	cfg.Server.ShutdownTimeout = 5 * time.Second
	// All test clients share 127.0.0.1; the limit itself is tested in
	// internal/ratelimit and internal/app.
	cfg.RateLimit.Enabled = false
	clock := testkit.NewClockAt(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	appOpts := []app.Option{app.WithClock(clock.Now)}
	for _, o := range options {
		if o.mutate != nil {
			o.mutate(&cfg)
		}
		appOpts = append(appOpts, o.opts...)
	}
	require.NoError(t, cfg.Validate())

	logs := &testkit.Logs{}
	log := logs.JSON()
	a, err := app.New(context.Background(), cfg, log, appOpts...)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()

	transport := &http.Transport{}
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	h2cTransport := &http.Transport{Protocols: &protocols, TLSClientConfig: &tls.Config{}}
	t.Cleanup(func() {
		transport.CloseIdleConnections()
		h2cTransport.CloseIdleConnections()
		cancel()
		require.NoError(t, <-done)
		a.Close()
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	e := &bundle{
		app:     a,
		cfg:     cfg,
		baseURL: "http://" + ln.Addr().String(),
		clock:   clock,
		logs:    logs,
		http:    &http.Client{Transport: transport},
		h2c:     &http.Client{Transport: h2cTransport},
	}
	e.identity = identitypbconnect.NewIdentityServiceClient(e.http, e.baseURL)
	e.admin = identitypbconnect.NewCustomerAdminServiceClient(e.http, e.baseURL)
	return e
}

// cred is a credential to put on a request.
type cred func(http.Header)

func bearer(token string) cred {
	return func(h http.Header) { h.Set("Authorization", "Bearer "+token) }
}

func cookie(value string) cred {
	return func(h http.Header) { h.Add("Cookie", cookieName+"="+value) }
}

func apiKey(key string) cred {
	return func(h http.Header) { h.Set("X-Api-Key", key) }
}

func req[T any](msg *T, creds ...cred) *connect.Request[T] {
	r := connect.NewRequest(msg)
	for _, c := range creds {
		c(r.Header())
	}
	return r
}

// customer is a registered customer and its access token.
type customer struct {
	id, email, password, token string
}

func (e *bundle) register(t *testing.T, email string) customer {
	t.Helper()
	const password = "customer-password-1"
	res, err := e.identity.Register(context.Background(), req(&identitypb.RegisterRequest{Email: email, Password: password, Name: "Test Customer"}))
	require.NoError(t, err)
	require.NotEmpty(t, res.Msg.GetAccessToken())
	return customer{id: res.Msg.GetCustomer().GetId(), email: res.Msg.GetCustomer().GetEmail(), password: password, token: res.Msg.GetAccessToken()}
}

// adminLogin logs the bootstrap admin in and returns the session cookie.
func (e *bundle) adminLogin(t *testing.T) *http.Cookie {
	t.Helper()
	res, err := e.identity.AdminLogin(context.Background(), req(&identitypb.AdminLoginRequest{Username: "admin", Password: bootstrapPassword}))
	require.NoError(t, err)
	return sessionCookie(t, res.Header())
}

// sessionCookie returns the session cookie a response sets.
func sessionCookie(t *testing.T, h http.Header) *http.Cookie {
	t.Helper()
	var found *http.Cookie
	for _, line := range h.Values("Set-Cookie") {
		c, err := http.ParseSetCookie(line)
		require.NoError(t, err)
		if c.Name == cookieName {
			require.Nil(t, found, "one session cookie")
			found = c
		}
	}
	require.NotNil(t, found, "Set-Cookie %s in %v", cookieName, h.Values("Set-Cookie"))
	return found
}

// allowAPIKeys lets the customer create API keys.
func (e *bundle) allowAPIKeys(t *testing.T, adminCookie string, c customer, allowed bool) {
	t.Helper()
	_, err := e.admin.SetCanCreateApiKeys(context.Background(), req(&identitypb.SetCanCreateApiKeysRequest{CustomerId: c.id, Allowed: allowed}, cookie(adminCookie)))
	require.NoError(t, err)
}

func (e *bundle) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, e.app.Pool().QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

func requireCode(t *testing.T, want connect.Code, err error) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, want, connect.CodeOf(err), "%v", err)
}

func message(err error) string {
	if ce, ok := err.(*connect.Error); ok {
		return ce.Message()
	}
	return err.Error()
}

// me calls GetMe with creds.
func (e *bundle) me(creds ...cred) (*identitypb.GetMeResponse, error) {
	res, err := e.identity.GetMe(context.Background(), req(&identitypb.GetMeRequest{}, creds...))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}
