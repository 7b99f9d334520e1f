package app_test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/internal/cache"
	"github.com/rustbill/paymentd/internal/identity"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testredis"
)

// The operator's commands (`paymentd admin disable`, `reset-password`),
// run beside two instances that share Redis, cut an admin off on both at
// once: their sessions, cached in Redis, and their API keys answer
// Unauthenticated from the very next request on either instance.
func TestOperatorCommandsCutAnAdminOffOnEveryInstanceAtOnce(t *testing.T) {
	t.Parallel()
	cfg := testConfig(testdb.URL(t))
	cfg.Redis.Enabled = true
	cfg.Redis.URL = testredis.Start(t).URL()
	a := newInstance(t, "instance A", cfg)
	b := newInstance(t, "instance B", cfg)
	ctx := context.Background()

	pool, err := pgxpool.New(ctx, cfg.DB.URL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	redis, err := cache.New(cfg.Redis.Options(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = redis.Close() })
	op := identity.Operator{DB: pool, Cache: identity.NewRedisSessionCache(redis, nil), By: "cli:test@host"}

	const password = "ops password, long enough"
	_, err = op.CreateAdmin(ctx, "ops", password)
	require.NoError(t, err)
	signIn := func() (credential, credential) {
		t.Helper()
		res, err := a.ids.AdminLogin(ctx, connect.NewRequest(&identitypb.AdminLoginRequest{Username: "ops", Password: password}))
		require.NoError(t, err)
		session := cookie(strings.SplitN(res.Header().Get("Set-Cookie"), ";", 2)[0])
		key, err := a.ids.CreateAdminApiKey(ctx, with(&identitypb.CreateAdminApiKeyRequest{Name: "automation", Scope: "read"}, session))
		require.NoError(t, err)
		for _, in := range []instance{a, b} {
			require.NoError(t, in.me(session), in.name)
			require.NoError(t, in.me(apiKey(key.Msg.GetKey())), in.name)
		}
		return session, apiKey(key.Msg.GetKey())
	}

	session, key := signIn()
	_, err = op.ResetPassword(ctx, "ops", password, false)
	require.NoError(t, err)
	for _, in := range []instance{a, b} {
		require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(in.me(session)), "session after reset-password on %s", in.name)
		require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(in.me(key)), "key after reset-password on %s", in.name)
	}

	session, key = signIn()
	_, err = op.Disable(ctx, "ops", "", true)
	require.NoError(t, err)
	for _, in := range []instance{a, b} {
		require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(in.me(session)), "session after disable on %s", in.name)
		require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(in.me(key)), "kept key after disable on %s", in.name)
	}
	_, err = b.ids.AdminLogin(ctx, connect.NewRequest(&identitypb.AdminLoginRequest{Username: "ops", Password: password}))
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err))
	_, err = op.Enable(ctx, "ops")
	require.NoError(t, err)
	require.NoError(t, b.me(key), "a kept key works again once enabled")
}
