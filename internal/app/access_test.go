package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testredis"
)

// instance is one of several paymentd processes on one database, with its
// clients.
type instance struct {
	name   string
	ids    identitypbconnect.IdentityServiceClient
	admins identitypbconnect.CustomerAdminServiceClient
}

func newInstance(t *testing.T, name string, cfg config.Config) instance {
	t.Helper()
	r := start(t, cfg)
	return instance{
		name:   name,
		ids:    identitypbconnect.NewIdentityServiceClient(http.DefaultClient, r.baseURL),
		admins: identitypbconnect.NewCustomerAdminServiceClient(http.DefaultClient, r.baseURL),
	}
}

func (in instance) me(cr credential) error {
	_, err := in.ids.GetMe(context.Background(), with(&identitypb.GetMeRequest{}, cr))
	return err
}

// revocationBound is what the tests allow for an ending to reach another
// instance: the access cache's second of memory, and slack for a machine
// busy with other tests. The measured figure is logged.
const revocationBound = 5 * time.Second

// refusedWithin polls in with cr until it answers Unauthenticated and
// returns how long that took; any other failure, or no refusal within
// revocationBound, fails the test.
func refusedWithin(t *testing.T, in instance, cr credential, what string) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := in.me(cr)
		if connect.CodeOf(err) == connect.CodeUnauthenticated {
			d := time.Since(start)
			t.Logf("%s: refused by %s after %s", what, in.name, d.Round(time.Millisecond))
			return d
		}
		require.NoError(t, err, "%s on %s", what, in.name)
		require.Less(t, time.Since(start), revocationBound, "%s: %s still accepts it", what, in.name)
		time.Sleep(5 * time.Millisecond)
	}
}

// Two instances on one database, with Redis shared and without: a sign-out
// everywhere, a password change and disabling made on one instance end the
// customer's earlier tokens on the other within seconds (the access
// cache's second), a token issued by the change works on the other at
// once, enabling brings back the login and the unrevoked API key on the
// other but none of the tokens from before, and an admin's password change
// ends their sessions on both at once.
func TestEndingAccessOnOneInstanceIsSeenByTheOtherWithinSeconds(t *testing.T) {
	t.Parallel()
	for _, shared := range []bool{true, false} {
		name := "database only"
		if shared {
			name = "redis shared"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(testdb.URL(t))
			if shared {
				cfg.Redis.Enabled = true
				cfg.Redis.URL = testredis.Start(t).URL()
			}
			a := newInstance(t, "instance A", cfg)
			b := newInstance(t, "instance B", cfg)
			ctx := context.Background()

			reg, err := a.ids.Register(ctx, connect.NewRequest(&identitypb.RegisterRequest{Email: "hana@example.com", Password: "long enough password", Name: "Hana"}))
			require.NoError(t, err)
			customerID := reg.Msg.GetCustomer().GetId()
			t0 := bearer(reg.Msg.GetAccessToken())
			adminRes, err := a.ids.AdminLogin(ctx, connect.NewRequest(&identitypb.AdminLoginRequest{Username: "admin", Password: "bootstrap-password"}))
			require.NoError(t, err)
			admin := cookie(strings.SplitN(adminRes.Header().Get("Set-Cookie"), ";", 2)[0])
			_, err = a.admins.SetCanCreateApiKeys(ctx, with(&identitypb.SetCanCreateApiKeysRequest{CustomerId: customerID, Allowed: true}, admin))
			require.NoError(t, err)
			keyRes, err := b.ids.CreateApiKey(ctx, with(&identitypb.CreateApiKeyRequest{Name: "ci"}, t0))
			require.NoError(t, err)
			key := apiKey(keyRes.Msg.GetKey())

			// Both instances have the customer's state in memory.
			require.NoError(t, a.me(t0))
			require.NoError(t, b.me(t0))

			// Signed out everywhere on A.
			_, err = a.admins.SignOutEverywhere(ctx, with(&identitypb.SignOutEverywhereRequest{CustomerId: customerID}, admin))
			require.NoError(t, err)
			require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(a.me(t0)), "the instance of the change refuses at once")
			refusedWithin(t, b, t0, "sign-out everywhere on A")

			// A login on B, then a password change on B: the new token
			// works on A at once; the one before it is refused there.
			login, err := b.ids.Login(ctx, connect.NewRequest(&identitypb.LoginRequest{Email: "hana@example.com", Password: "long enough password"}))
			require.NoError(t, err)
			t1 := bearer(login.Msg.GetAccessToken())
			require.NoError(t, a.me(t1))
			changed, err := b.ids.ChangePassword(ctx, with(&identitypb.ChangePasswordRequest{CurrentPassword: "long enough password", NewPassword: "another long password"}, t1))
			require.NoError(t, err)
			t2 := bearer(changed.Msg.GetAccessToken())
			require.NoError(t, a.me(t2), "a token of the new generation is taken by the other instance at once")
			require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(a.me(t1)))
			require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(b.me(t1)))

			// Disabled on A: B refuses the token within seconds, and the
			// API key (read from the database on every call) at once.
			require.NoError(t, b.me(t2))
			require.NoError(t, b.me(key))
			_, err = a.admins.DisableCustomer(ctx, with(&identitypb.DisableCustomerRequest{CustomerId: customerID}, admin))
			require.NoError(t, err)
			require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(b.me(key)))
			refusedWithin(t, b, t2, "disabling on A")
			_, err = b.ids.Login(ctx, connect.NewRequest(&identitypb.LoginRequest{Email: "hana@example.com", Password: "another long password"}))
			require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err))

			// Enabled on A: the API key, never revoked, works on B (and
			// A) at once; the customer logs in on B and the new token
			// works on both at once; every token issued before the
			// disabling stays refused on both.
			_, err = a.admins.EnableCustomer(ctx, with(&identitypb.EnableCustomerRequest{CustomerId: customerID}, admin))
			require.NoError(t, err)
			require.NoError(t, b.me(key), "the API key is read from the database on every call")
			require.NoError(t, a.me(key))
			relogin, err := b.ids.Login(ctx, connect.NewRequest(&identitypb.LoginRequest{Email: "hana@example.com", Password: "another long password"}))
			require.NoError(t, err)
			t3 := bearer(relogin.Msg.GetAccessToken())
			require.NoError(t, b.me(t3))
			require.NoError(t, a.me(t3), "a token of the new generation is taken by the other instance at once")
			for _, in := range []instance{a, b} {
				for i, old := range []credential{t0, t1, t2} {
					require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(in.me(old)), "token %d on %s after enabling", i, in.name)
				}
			}

			// An admin's password change on A ends the admin's sessions on
			// B at once (the rows are gone and the shared copies dropped),
			// and the new session works on both.
			other, err := b.ids.AdminLogin(ctx, connect.NewRequest(&identitypb.AdminLoginRequest{Username: "admin", Password: "bootstrap-password"}))
			require.NoError(t, err)
			otherSession := cookie(strings.SplitN(other.Header().Get("Set-Cookie"), ";", 2)[0])
			require.NoError(t, b.me(otherSession))
			pw, err := a.ids.ChangePassword(ctx, with(&identitypb.ChangePasswordRequest{CurrentPassword: "bootstrap-password", NewPassword: "the admin's new password"}, admin))
			require.NoError(t, err)
			fresh := cookie(strings.SplitN(pw.Header().Get("Set-Cookie"), ";", 2)[0])
			for _, in := range []instance{a, b} {
				require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(in.me(admin)), in.name)
				require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(in.me(otherSession)), in.name)
				require.NoError(t, in.me(fresh), in.name)
			}
		})
	}
}
