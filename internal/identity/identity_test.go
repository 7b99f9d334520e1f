package identity_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	"github.com/rustbill/paymentd/internal/config"
)

func TestRegisterLoginAndGetMeWithTheAccessToken(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()

	reg, err := e.identity.Register(ctx, req(&identitypb.RegisterRequest{Email: "Alice@Example.COM", Password: "alice-password", Name: " Alice "}))
	require.NoError(t, err)
	c := reg.Msg.GetCustomer()
	require.Equal(t, "alice@example.com", c.GetEmail(), "stored in lower case")
	require.Equal(t, "Alice", c.GetName())
	require.Equal(t, "CNY", c.GetCurrency(), "the first of [billing].currencies")
	require.Equal(t, "0.00", c.GetBalance())
	require.Equal(t, "0.00", c.GetCreditLimit())
	require.False(t, c.GetCanCreateApiKeys())
	require.Equal(t, e.clock.Now().Add(24*time.Hour).Format(time.RFC3339), reg.Msg.GetExpiresAt())
	require.Equal(t, "no-store", reg.Header().Get("Cache-Control"))

	me, err := e.me(bearer(reg.Msg.GetAccessToken()))
	require.NoError(t, err)
	require.Equal(t, "customer", me.GetRole())
	require.Equal(t, c.GetId(), me.GetId())
	require.Equal(t, "alice@example.com", me.GetEmail())
	require.Empty(t, me.GetUsername())
	require.Equal(t, "jwt", me.GetCredential())

	login, err := e.identity.Login(ctx, req(&identitypb.LoginRequest{Email: "ALICE@example.com", Password: "alice-password"}))
	require.NoError(t, err)
	require.Equal(t, c.GetId(), login.Msg.GetCustomer().GetId())
	me, err = e.me(bearer(login.Msg.GetAccessToken()))
	require.NoError(t, err)
	require.Equal(t, c.GetId(), me.GetId())

	var hash string
	require.NoError(t, e.app.Pool().QueryRow(ctx, `SELECT password_hash FROM customers WHERE id = $1`, c.GetId()).Scan(&hash))
	require.NotContains(t, hash, "alice-password")
	require.Contains(t, hash, "$argon2id$")
}

func TestRegisteringAnAddressTwiceInAnyCaseIsAlreadyExists(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.register(t, "bob@example.com")
	_, err := e.identity.Register(context.Background(), req(&identitypb.RegisterRequest{Email: "BOB@example.com", Password: "another-password"}))
	requireCode(t, connect.CodeAlreadyExists, err)
}

func TestRegistrationIsValidated(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, r := range []*identitypb.RegisterRequest{
		{Email: "not-an-email", Password: "long-enough-password"},
		{Email: "short@example.com", Password: "short"},
		{Email: "long@example.com", Password: string(make([]byte, 129))},
		{Email: "", Password: "long-enough-password"},
	} {
		_, err := e.identity.Register(context.Background(), req(r))
		requireCode(t, connect.CodeInvalidArgument, err)
	}
}

func TestWrongPasswordAndUnknownUserAnswerTheSame(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	c := e.register(t, "carol@example.com")

	_, wrong := e.identity.Login(ctx, req(&identitypb.LoginRequest{Email: c.email, Password: "wrong-password"}))
	_, unknown := e.identity.Login(ctx, req(&identitypb.LoginRequest{Email: "nobody@example.com", Password: "wrong-password"}))
	requireCode(t, connect.CodeUnauthenticated, wrong)
	requireCode(t, connect.CodeUnauthenticated, unknown)
	require.Equal(t, message(wrong), message(unknown))
	customerMessage := message(unknown)

	_, wrong = e.identity.AdminLogin(ctx, req(&identitypb.AdminLoginRequest{Username: "admin", Password: "wrong-password"}))
	_, unknown = e.identity.AdminLogin(ctx, req(&identitypb.AdminLoginRequest{Username: "root", Password: "wrong-password"}))
	requireCode(t, connect.CodeUnauthenticated, wrong)
	requireCode(t, connect.CodeUnauthenticated, unknown)
	require.Equal(t, message(wrong), message(unknown))

	// A disabled customer reads the same as a wrong password.
	_, err := e.app.Pool().Exec(ctx, `UPDATE customers SET disabled_at = now() WHERE id = $1`, c.id)
	require.NoError(t, err)
	_, disabled := e.identity.Login(ctx, req(&identitypb.LoginRequest{Email: c.email, Password: c.password}))
	requireCode(t, connect.CodeUnauthenticated, disabled)
	require.Equal(t, customerMessage, message(disabled))
}

func TestAdminLoginSetsTheSessionCookieAndLogoutEndsIt(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()

	res, err := e.identity.AdminLogin(ctx, req(&identitypb.AdminLoginRequest{Username: "admin", Password: bootstrapPassword}, func(h http.Header) {
		h.Set("User-Agent", "identity-test")
	}))
	require.NoError(t, err)
	require.Equal(t, "admin", res.Msg.GetAdmin().GetUsername())
	require.Equal(t, e.clock.Now().Add(168*time.Hour).Format(time.RFC3339), res.Msg.GetExpiresAt())
	c := sessionCookie(t, res.Header())
	require.True(t, c.HttpOnly)
	require.False(t, c.Secure, "[session].cookie_secure defaults to false")
	require.Equal(t, http.SameSiteLaxMode, c.SameSite)
	require.Equal(t, "/", c.Path)
	require.Equal(t, 168*3600, c.MaxAge, "the absolute timeout")
	require.Len(t, c.Value, 43, "32 random bytes, base64url")

	// Only the token's hash is stored.
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM sessions WHERE id = sha256(decode(translate($1, '-_', '+/') || '=', 'base64'))`, c.Value))
	require.Equal(t, 0, e.count(t, `SELECT count(*) FROM sessions WHERE encode(id, 'escape') LIKE '%' || $1 || '%'`, c.Value))
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM sessions WHERE user_agent = 'identity-test' AND remote_addr LIKE '127.0.0.1:%'`))

	me, err := e.me(cookie(c.Value))
	require.NoError(t, err)
	require.Equal(t, "admin", me.GetRole())
	require.Equal(t, "admin", me.GetUsername())
	require.Equal(t, "session", me.GetCredential())
	require.Empty(t, me.GetEmail())

	out, err := e.identity.Logout(ctx, req(&identitypb.LogoutRequest{}, cookie(c.Value)))
	require.NoError(t, err)
	cleared := sessionCookie(t, out.Header())
	require.Empty(t, cleared.Value)
	require.Less(t, cleared.MaxAge, 0, "Max-Age<0 deletes the cookie")
	require.True(t, cleared.HttpOnly)
	require.Equal(t, "/", cleared.Path)

	_, err = e.me(cookie(c.Value))
	requireCode(t, connect.CodeUnauthenticated, err)
	require.Equal(t, 0, e.count(t, `SELECT count(*) FROM sessions`))
	_, err = e.identity.Logout(ctx, req(&identitypb.LogoutRequest{}, cookie(c.Value)))
	requireCode(t, connect.CodeUnauthenticated, err)

	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'admin.login' AND actor_kind = 'admin' AND entity_id = $1`, me.GetId()))
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'admin.logout' AND actor_kind = 'admin' AND entity_id = $1`, me.GetId()))
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM admin_users WHERE last_login_at = $1`, e.clock.Now()))
}

func TestSessionCookieAttributesFollowTheConfiguration(t *testing.T) {
	t.Parallel()
	for _, sameSite := range []string{"Strict", "None"} {
		t.Run(sameSite, func(t *testing.T) {
			t.Parallel()
			e := setup(t, withConfig(func(c *config.Config) {
				c.Session.CookieSecure = true
				c.Session.CookieSameSite = sameSite
				c.Session.AbsoluteTimeoutHours = 12
			}))
			c := e.adminLogin(t)
			require.True(t, c.Secure)
			require.True(t, c.HttpOnly)
			require.Equal(t, map[string]http.SameSite{"Strict": http.SameSiteStrictMode, "None": http.SameSiteNoneMode}[sameSite], c.SameSite)
			require.Equal(t, 12*3600, c.MaxAge)
		})
	}
}

func TestLoggingInAgainReplacesThePresentedSession(t *testing.T) {
	t.Parallel()
	e := setup(t)
	first := e.adminLogin(t)
	res, err := e.identity.AdminLogin(context.Background(), req(&identitypb.AdminLoginRequest{Username: "admin", Password: bootstrapPassword}, cookie(first.Value)))
	require.NoError(t, err)
	second := sessionCookie(t, res.Header())
	require.NotEqual(t, first.Value, second.Value)
	_, err = e.me(cookie(first.Value))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.me(cookie(second.Value))
	require.NoError(t, err)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM sessions`))
}

func TestIdleSessionExpiresAndActivityKeepsItAlive(t *testing.T) {
	t.Parallel()
	e := setup(t, withConfig(func(c *config.Config) {
		c.Session.IdleTimeoutMinutes = 30
		c.Session.AbsoluteTimeoutHours = 2
	}))
	c := e.adminLogin(t)

	for range 3 { // 87 minutes of activity, never 30 idle
		e.clock.Advance(29 * time.Minute)
		_, err := e.me(cookie(c.Value))
		require.NoError(t, err)
	}
	e.clock.Advance(30 * time.Minute)
	_, err := e.me(cookie(c.Value))
	requireCode(t, connect.CodeUnauthenticated, err)
	require.Equal(t, 0, e.count(t, `SELECT count(*) FROM sessions`), "the expired session is deleted")
}

func TestAbsoluteTimeoutEndsAnActiveSession(t *testing.T) {
	t.Parallel()
	e := setup(t, withConfig(func(c *config.Config) {
		c.Session.IdleTimeoutMinutes = 30
		c.Session.AbsoluteTimeoutHours = 1
	}))
	c := e.adminLogin(t)
	for range 3 {
		e.clock.Advance(19 * time.Minute)
		_, err := e.me(cookie(c.Value))
		require.NoError(t, err)
	}
	e.clock.Advance(3 * time.Minute) // 60 minutes after login, 3 after the last request
	_, err := e.me(cookie(c.Value))
	requireCode(t, connect.CodeUnauthenticated, err)
	require.Equal(t, 0, e.count(t, `SELECT count(*) FROM sessions`))
}

func TestLastSeenIsWrittenAtMostOnceAMinute(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.adminLogin(t)
	login := e.clock.Now()
	lastSeen := func() time.Time {
		var ts time.Time
		require.NoError(t, e.app.Pool().QueryRow(context.Background(), `SELECT last_seen_at FROM sessions`).Scan(&ts))
		return ts.UTC()
	}
	for range 5 {
		e.clock.Advance(10 * time.Second)
		_, err := e.me(cookie(c.Value))
		require.NoError(t, err)
	}
	require.Equal(t, login, lastSeen(), "no write within the first minute")
	e.clock.Advance(15 * time.Second)
	_, err := e.me(cookie(c.Value))
	require.NoError(t, err)
	require.Equal(t, e.clock.Now(), lastSeen())
}

func TestDisabledAdminIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := e.adminLogin(t)
	_, err := e.app.Pool().Exec(context.Background(), `UPDATE admin_users SET disabled_at = now()`)
	require.NoError(t, err)
	_, err = e.me(cookie(c.Value))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.identity.AdminLogin(context.Background(), req(&identitypb.AdminLoginRequest{Username: "admin", Password: bootstrapPassword}))
	requireCode(t, connect.CodeUnauthenticated, err)
}

func TestAnInvalidCredentialNeverFallsThroughToALaterLayer(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cust := e.register(t, "dave@example.com")
	admin := e.adminLogin(t)
	e.allowAPIKeys(t, admin.Value, cust, true)
	created, err := e.identity.CreateApiKey(context.Background(), req(&identitypb.CreateApiKeyRequest{Name: "ci"}, bearer(cust.token)))
	require.NoError(t, err)
	key := created.Msg.GetKey()

	// Each alone works.
	_, err = e.me(bearer(cust.token))
	require.NoError(t, err)
	_, err = e.me(apiKey(key))
	require.NoError(t, err)

	// Logged-out (well-formed, unknown) session cookie.
	stale := e.adminLogin(t)
	_, err = e.identity.Logout(context.Background(), req(&identitypb.LogoutRequest{}, cookie(stale.Value)))
	require.NoError(t, err)

	for name, creds := range map[string][]cred{
		"garbage cookie + valid JWT":      {cookie("garbage"), bearer(cust.token)},
		"logged-out cookie + valid JWT":   {cookie(stale.Value), bearer(cust.token)},
		"garbage cookie + valid API key":  {cookie("garbage"), apiKey(key)},
		"forged JWT + valid API key":      {bearer(cust.token + "x"), apiKey(key)},
		"garbage bearer + valid API key":  {bearer("garbage"), apiKey(key)},
		"two bearer headers, one valid":   {bearer(cust.token), func(h http.Header) { h.Add("Authorization", "Bearer garbage") }},
		"two API keys, one valid":         {apiKey(key), func(h http.Header) { h.Add("X-Api-Key", "pk_garbage") }},
		"malformed API key + valid admin": {cookie(admin.Value), apiKey("nonsense")},
	} {
		_, err := e.me(creds...)
		if name == "malformed API key + valid admin" {
			// The session layer decides first; later layers are not consulted.
			require.NoError(t, err, name)
			continue
		}
		requireCode(t, connect.CodeUnauthenticated, err)
	}
}

func TestAnonymousCallsOfAuthenticatedOperationsAreUnauthenticated(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	_, err := e.me()
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.identity.Logout(ctx, req(&identitypb.LogoutRequest{}))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.identity.CreateApiKey(ctx, req(&identitypb.CreateApiKeyRequest{Name: "x"}))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.identity.ListApiKeys(ctx, req(&identitypb.ListApiKeysRequest{Pagination: &identitypb.PageRequest{}}))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.identity.RevokeApiKey(ctx, req(&identitypb.RevokeApiKeyRequest{Id: "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"}))
	requireCode(t, connect.CodeUnauthenticated, err)
}

func TestCustomersCannotLogOutOrActAsAdmins(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cust := e.register(t, "erin@example.com")
	_, err := e.identity.Logout(context.Background(), req(&identitypb.LogoutRequest{}, bearer(cust.token)))
	requireCode(t, connect.CodePermissionDenied, err)

	// An admin cannot manage API keys (they belong to customers).
	admin := e.adminLogin(t)
	_, err = e.identity.CreateApiKey(context.Background(), req(&identitypb.CreateApiKeyRequest{Name: "x"}, cookie(admin.Value)))
	requireCode(t, connect.CodePermissionDenied, err)
}

func TestSessionCookieWorksOverGRPCAndGRPCWeb(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	for name, client := range map[string]identitypbconnect.IdentityServiceClient{
		"grpc":     identitypbconnect.NewIdentityServiceClient(e.h2c, e.baseURL, connect.WithGRPC()),
		"grpc-web": identitypbconnect.NewIdentityServiceClient(e.http, e.baseURL, connect.WithGRPCWeb()),
	} {
		res, err := client.AdminLogin(ctx, req(&identitypb.AdminLoginRequest{Username: "admin", Password: bootstrapPassword}))
		require.NoError(t, err, name)
		c := sessionCookie(t, res.Header())
		me, err := client.GetMe(ctx, req(&identitypb.GetMeRequest{}, cookie(c.Value)))
		require.NoError(t, err, name)
		require.Equal(t, "admin", me.Msg.GetRole(), name)
		out, err := client.Logout(ctx, req(&identitypb.LogoutRequest{}, cookie(c.Value)))
		require.NoError(t, err, name)
		require.Less(t, sessionCookie(t, out.Header()).MaxAge, 0, name)
		_, err = client.GetMe(ctx, req(&identitypb.GetMeRequest{}, cookie(c.Value)))
		requireCode(t, connect.CodeUnauthenticated, err)
	}
}
