package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testredis"
)

func TestRedisStoppedMidTestLeavesLoginAndSessionsWorking(t *testing.T) {
	t.Parallel()
	redis := testredis.Start(t)
	cfg := testConfig(testdb.URL(t))
	cfg.Redis.Enabled = true
	cfg.Redis.URL = redis.URL()
	cfg.RateLimit.Enabled = true // counters in Redis, then in memory
	r := start(t, cfg)
	ctx := context.Background()
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, r.baseURL)

	adminLogin := func() credential {
		t.Helper()
		res, err := ids.AdminLogin(ctx, connect.NewRequest(&identitypb.AdminLoginRequest{Username: "admin", Password: "bootstrap-password"}))
		require.NoError(t, err)
		return cookie(strings.SplitN(res.Header().Get("Set-Cookie"), ";", 2)[0])
	}
	me := func(c credential) error {
		_, err := ids.GetMe(ctx, with(&identitypb.GetMeRequest{}, c))
		return err
	}

	session := adminLogin()
	require.NoError(t, me(session))
	reg, err := ids.Register(ctx, connect.NewRequest(&identitypb.RegisterRequest{Email: "carol@example.com", Password: "long enough password", Name: "Carol"}))
	require.NoError(t, err)

	redis.Stop(t)

	require.NoError(t, me(session), "a session created while Redis was up still works from the database")
	fresh := adminLogin()
	require.NoError(t, me(fresh), "a new session works while Redis is down")
	_, err = ids.Login(ctx, connect.NewRequest(&identitypb.LoginRequest{Email: "carol@example.com", Password: "long enough password"}))
	require.NoError(t, err, "customer login works while Redis is down")
	require.NoError(t, me(bearer(reg.Msg.GetAccessToken())))

	_, err = ids.Logout(ctx, with(&identitypb.LogoutRequest{}, fresh))
	require.NoError(t, err)
	redis.Start(t)
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(me(fresh)), "a logout during the outage holds after Redis returns")
	require.NoError(t, me(session))
}
