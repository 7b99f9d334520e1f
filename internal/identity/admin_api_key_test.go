package identity_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/internal/config"
)

func (e *bundle) createAdminKey(session string, name, scope string) (*identitypb.CreateAdminApiKeyResponse, error) {
	res, err := e.identity.CreateAdminApiKey(context.Background(), req(&identitypb.CreateAdminApiKeyRequest{Name: name, Scope: scope}, cookie(session)))
	if err != nil {
		return nil, err
	}
	return res.Msg, nil
}

// An admin API key is created with a session, shown once, stored as a hash,
// acts as its admin within its scope, and is refused from the request after
// its revocation, or while its admin is disabled. Keys never manage keys.
func TestAdminAPIKeyLifecycle(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	session := e.adminLogin(t).Value
	c := e.register(t, "ivy@example.com")

	_, err := e.createAdminKey(session, "ci", "everything")
	requireCode(t, connect.CodeInvalidArgument, err)
	_, err = e.identity.CreateAdminApiKey(ctx, req(&identitypb.CreateAdminApiKeyRequest{Name: "ci", Scope: "admin"}, bearer(c.token)))
	requireCode(t, connect.CodePermissionDenied, err)

	created, err := e.createAdminKey(session, " nightly report ", "read")
	require.NoError(t, err)
	key := created.GetKey()
	require.True(t, strings.HasPrefix(key, created.GetApiKey().GetPrefix()+"_"))
	require.Equal(t, "nightly report", created.GetApiKey().GetName())
	require.Equal(t, "admin", created.GetApiKey().GetAdminUsername())
	require.Zero(t, e.count(t, `SELECT count(*) FROM admin_api_keys WHERE position(convert_to($1, 'UTF8') IN secret_hash) > 0`, key[len(key)-43:]))

	me, err := e.me(apiKey(key))
	require.NoError(t, err)
	require.Equal(t, "admin", me.GetRole())
	require.Equal(t, "read", me.GetScope())
	require.Equal(t, "api_key", me.GetCredential())

	// A key cannot mint, list or revoke keys, whatever its scope. (The
	// test's clock stands still: move it, so "newest first" has a newest.)
	e.clock.Advance(time.Second)
	wide, err := e.createAdminKey(session, "ops", "admin")
	require.NoError(t, err)
	for _, k := range []string{key, wide.GetKey()} {
		_, err = e.identity.CreateAdminApiKey(ctx, req(&identitypb.CreateAdminApiKeyRequest{Name: "more", Scope: "admin"}, apiKey(k)))
		requireCode(t, connect.CodePermissionDenied, err)
		_, err = e.identity.ListAdminApiKeys(ctx, req(&identitypb.ListAdminApiKeysRequest{Pagination: &identitypb.PageRequest{}}, apiKey(k)))
		requireCode(t, connect.CodePermissionDenied, err)
		_, err = e.identity.RevokeAdminApiKey(ctx, req(&identitypb.RevokeAdminApiKeyRequest{Id: created.GetApiKey().GetId()}, apiKey(k)))
		requireCode(t, connect.CodePermissionDenied, err)
	}

	list, err := e.identity.ListAdminApiKeys(ctx, req(&identitypb.ListAdminApiKeysRequest{Pagination: &identitypb.PageRequest{}}, cookie(session)))
	require.NoError(t, err)
	require.Len(t, list.Msg.GetApiKeys(), 2)
	require.Equal(t, wide.GetApiKey().GetId(), list.Msg.GetApiKeys()[0].GetId(), "newest first")
	require.NotEmpty(t, list.Msg.GetApiKeys()[1].GetLastUsedAt(), "the read key was used")

	// A disabled admin's keys are refused; enabled again, they work.
	_, err = e.app.Pool().Exec(ctx, `UPDATE admin_users SET disabled_at = now()`)
	require.NoError(t, err)
	_, err = e.me(apiKey(key))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.app.Pool().Exec(ctx, `UPDATE admin_users SET disabled_at = NULL`)
	require.NoError(t, err)
	_, err = e.me(apiKey(key))
	require.NoError(t, err)

	revoked, err := e.identity.RevokeAdminApiKey(ctx, req(&identitypb.RevokeAdminApiKeyRequest{Id: created.GetApiKey().GetId()}, cookie(session)))
	require.NoError(t, err)
	require.NotEmpty(t, revoked.Msg.GetApiKey().GetRevokedAt())
	require.Equal(t, created.GetApiKey().GetAdminId(), revoked.Msg.GetApiKey().GetRevokedBy())
	_, err = e.me(apiKey(key))
	requireCode(t, connect.CodeUnauthenticated, err)
	e.clock.Advance(time.Minute)
	again, err := e.identity.RevokeAdminApiKey(ctx, req(&identitypb.RevokeAdminApiKeyRequest{Id: created.GetApiKey().GetId()}, cookie(session)))
	require.NoError(t, err)
	require.Equal(t, revoked.Msg.GetApiKey().GetRevokedAt(), again.Msg.GetApiKey().GetRevokedAt(), "revoking twice changes nothing")
	_, err = e.identity.RevokeAdminApiKey(ctx, req(&identitypb.RevokeAdminApiKeyRequest{Id: "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"}, cookie(session)))
	requireCode(t, connect.CodeNotFound, err)

	// A customer key's id under the admin prefix, and the reverse, are
	// nobody's keys.
	_, err = e.me(apiKey("pk_" + key[3:]))
	requireCode(t, connect.CodeUnauthenticated, err)

	require.Equal(t, 2, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'admin_api_key.created' AND actor_kind = 'admin'`))
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'admin_api_key.revoked'`))
	require.NotContains(t, e.logs.String(), key[len(key)-43:], "the secret is never logged")
}

// At most 50 admin keys are active at once.
func TestActiveAdminAPIKeysAreBounded(t *testing.T) {
	t.Parallel()
	e := setup(t)
	session := e.adminLogin(t).Value
	var first string
	for i := range 50 {
		k, err := e.createAdminKey(session, "k", "read")
		require.NoError(t, err, "key %d", i)
		if i == 0 {
			first = k.GetApiKey().GetId()
		}
	}
	_, err := e.createAdminKey(session, "one too many", "read")
	requireCode(t, connect.CodeFailedPrecondition, err)
	_, err = e.identity.RevokeAdminApiKey(context.Background(), req(&identitypb.RevokeAdminApiKeyRequest{Id: first}, cookie(session)))
	require.NoError(t, err)
	_, err = e.createAdminKey(session, "in its place", "read")
	require.NoError(t, err)
}

// An admin key's expires_at must be in the future and within
// [admin].api_key_max_lifetime_days; a key without one gets the maximum.
// From its expiry on, the key is refused as an unknown key is.
func TestExpiredAdminAPIKeyIsRefusedAsAnUnknownOne(t *testing.T) {
	t.Parallel()
	e := setup(t, withConfig(func(c *config.Config) { c.Admin.APIKeyMaxLifetimeDays = 30 }))
	ctx := context.Background()
	session := e.adminLogin(t).Value
	now := e.clock.Now().UTC()
	create := func(expiresAt string) (*identitypb.CreateAdminApiKeyResponse, error) {
		res, err := e.identity.CreateAdminApiKey(ctx, req(&identitypb.CreateAdminApiKeyRequest{Name: "ci", Scope: "read", ExpiresAt: expiresAt}, cookie(session)))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	for _, bad := range []string{"tomorrow", now.Add(-time.Minute).Format(time.RFC3339), now.Format(time.RFC3339), now.Add(31 * 24 * time.Hour).Format(time.RFC3339)} {
		_, err := create(bad)
		requireCode(t, connect.CodeInvalidArgument, err)
	}
	require.Zero(t, e.count(t, `SELECT count(*) FROM admin_api_keys`), "a refused key is not stored")

	defaulted, err := create("")
	require.NoError(t, err)
	require.Equal(t, now.Add(30*24*time.Hour).Format(time.RFC3339), defaulted.GetApiKey().GetExpiresAt())

	at := now.Add(time.Hour)
	short, err := create(at.Format(time.RFC3339))
	require.NoError(t, err)
	require.Equal(t, at.Format(time.RFC3339), short.GetApiKey().GetExpiresAt())
	_, err = e.me(apiKey(short.GetKey()))
	require.NoError(t, err)

	e.clock.Advance(time.Hour)
	_, expired := e.me(apiKey(short.GetKey()))
	_, unknown := e.me(apiKey(short.GetApiKey().GetPrefix() + "_" + strings.Repeat("A", 43)))
	requireCode(t, connect.CodeUnauthenticated, expired)
	requireCode(t, connect.CodeUnauthenticated, unknown)
	require.Equal(t, connect.CodeOf(unknown), connect.CodeOf(expired))
	require.Equal(t, unknown.(*connect.Error).Message(), expired.(*connect.Error).Message(), "an expired key reads as a wrong one")
	_, err = e.me(apiKey(defaulted.GetKey()))
	require.NoError(t, err, "the other key has 30 days")
}

// Without a maximum lifetime (the default), a key without expires_at never
// expires, as before expiry existed.
func TestAdminAPIKeyWithoutMaximumNeverExpires(t *testing.T) {
	t.Parallel()
	e := setup(t)
	session := e.adminLogin(t).Value
	k, err := e.createAdminKey(session, "forever", "read")
	require.NoError(t, err)
	require.Empty(t, k.GetApiKey().GetExpiresAt())
	e.clock.Advance(10 * 365 * 24 * time.Hour)
	_, err = e.me(apiKey(k.GetKey()))
	require.NoError(t, err)
}
