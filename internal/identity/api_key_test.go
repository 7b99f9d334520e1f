package identity_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
)

func TestAPIKeyLifecycle(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	cust := e.register(t, "frank@example.com")
	admin := e.adminLogin(t)

	_, err := e.identity.CreateApiKey(ctx, req(&identitypb.CreateApiKeyRequest{Name: "ci"}, bearer(cust.token)))
	requireCode(t, connect.CodePermissionDenied, err)
	require.Equal(t, 0, e.count(t, `SELECT count(*) FROM api_keys`))

	e.allowAPIKeys(t, admin.Value, cust, true)
	me, err := e.me(bearer(cust.token))
	require.NoError(t, err)
	require.True(t, me.GetCanCreateApiKeys())

	created, err := e.identity.CreateApiKey(ctx, req(&identitypb.CreateApiKeyRequest{Name: "ci"}, bearer(cust.token)))
	require.NoError(t, err)
	key := created.Msg.GetKey()
	rec := created.Msg.GetApiKey()
	require.Equal(t, "no-store", created.Header().Get("Cache-Control"))
	require.Len(t, key, 79)
	require.True(t, strings.HasPrefix(key, rec.GetPrefix()+"_"), "%s starts with %s_", key, rec.GetPrefix())
	require.Equal(t, "pk_"+strings.ReplaceAll(rec.GetId(), "-", ""), rec.GetPrefix())
	require.Equal(t, "ci", rec.GetName())
	require.Empty(t, rec.GetRevokedAt())
	require.Empty(t, rec.GetLastUsedAt())

	// Only SHA-256 of the secret is stored.
	secret := key[len(rec.GetPrefix())+1:]
	raw, err := base64.RawURLEncoding.DecodeString(secret)
	require.NoError(t, err)
	require.Len(t, raw, 32)
	sum := sha256.Sum256(raw)
	var stored []byte
	require.NoError(t, e.app.Pool().QueryRow(ctx, `SELECT secret_hash FROM api_keys WHERE id = $1`, rec.GetId()).Scan(&stored))
	require.Equal(t, sum[:], stored)

	me, err = e.me(apiKey(key))
	require.NoError(t, err)
	require.Equal(t, cust.id, me.GetId())
	require.Equal(t, "customer", me.GetRole())
	require.Equal(t, "api_key", me.GetCredential())

	// A leaked key can neither mint nor revoke keys.
	_, err = e.identity.CreateApiKey(ctx, req(&identitypb.CreateApiKeyRequest{Name: "more"}, apiKey(key)))
	requireCode(t, connect.CodePermissionDenied, err)
	_, err = e.identity.RevokeApiKey(ctx, req(&identitypb.RevokeApiKeyRequest{Id: rec.GetId()}, apiKey(key)))
	requireCode(t, connect.CodePermissionDenied, err)
	// Listing is harmless.
	_, err = e.identity.ListApiKeys(ctx, req(&identitypb.ListApiKeysRequest{Pagination: &identitypb.PageRequest{}}, apiKey(key)))
	require.NoError(t, err)

	// Right id, wrong secret; and other malformed variants.
	wrong := make([]byte, 32)
	guessed := rec.GetPrefix() + "_" + base64.RawURLEncoding.EncodeToString(wrong)
	for _, k := range []string{guessed, strings.ToUpper(key[:35]) + key[35:], key[:78], key + "A", "Bearer " + key, rec.GetPrefix()} {
		_, err = e.me(apiKey(k))
		requireCode(t, connect.CodeUnauthenticated, err)
	}

	second, err := e.identity.CreateApiKey(ctx, req(&identitypb.CreateApiKeyRequest{Name: "deploy"}, bearer(cust.token)))
	require.NoError(t, err)
	e.clock.Advance(time.Minute)
	third, err := e.identity.CreateApiKey(ctx, req(&identitypb.CreateApiKeyRequest{Name: "backup"}, bearer(cust.token)))
	require.NoError(t, err)
	list, err := e.identity.ListApiKeys(ctx, req(&identitypb.ListApiKeysRequest{Pagination: &identitypb.PageRequest{PageSize: 2}}, bearer(cust.token)))
	require.NoError(t, err)
	require.Equal(t, uint64(3), list.Msg.GetMeta().GetTotal())
	require.Equal(t, uint32(2), list.Msg.GetMeta().GetTotalPages())
	require.Len(t, list.Msg.GetApiKeys(), 2)
	require.Equal(t, third.Msg.GetApiKey().GetId(), list.Msg.GetApiKeys()[0].GetId(), "newest first")
	require.NotContains(t, list.Msg.String(), secret)

	// Another customer sees none of them and cannot revoke them.
	intruder := e.register(t, "intruder@example.com")
	e.allowAPIKeys(t, admin.Value, intruder, true)
	_, err = e.identity.RevokeApiKey(ctx, req(&identitypb.RevokeApiKeyRequest{Id: rec.GetId()}, bearer(intruder.token)))
	requireCode(t, connect.CodeNotFound, err)
	theirs, err := e.identity.ListApiKeys(ctx, req(&identitypb.ListApiKeysRequest{Pagination: &identitypb.PageRequest{}}, bearer(intruder.token)))
	require.NoError(t, err)
	require.Empty(t, theirs.Msg.GetApiKeys())

	revoked, err := e.identity.RevokeApiKey(ctx, req(&identitypb.RevokeApiKeyRequest{Id: rec.GetId()}, bearer(cust.token)))
	require.NoError(t, err)
	require.Equal(t, e.clock.Now().Format(time.RFC3339), revoked.Msg.GetApiKey().GetRevokedAt())
	_, err = e.me(apiKey(key))
	requireCode(t, connect.CodeUnauthenticated, err)
	again, err := e.identity.RevokeApiKey(ctx, req(&identitypb.RevokeApiKeyRequest{Id: rec.GetId()}, bearer(cust.token)))
	require.NoError(t, err, "revoking twice returns the key unchanged")
	require.Equal(t, revoked.Msg.GetApiKey().GetRevokedAt(), again.Msg.GetApiKey().GetRevokedAt())

	// Taking the permission away suspends the remaining keys; giving it back restores them.
	_, err = e.me(apiKey(second.Msg.GetKey()))
	require.NoError(t, err)
	e.allowAPIKeys(t, admin.Value, cust, false)
	_, err = e.me(apiKey(second.Msg.GetKey()))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.identity.CreateApiKey(ctx, req(&identitypb.CreateApiKeyRequest{Name: "x"}, bearer(cust.token)))
	requireCode(t, connect.CodePermissionDenied, err)
	e.allowAPIKeys(t, admin.Value, cust, true)
	_, err = e.me(apiKey(second.Msg.GetKey()))
	require.NoError(t, err)

	require.Equal(t, 3, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'api_key.created' AND actor_kind = 'customer' AND actor_id = $1`, cust.id))
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'api_key.revoked' AND entity_id = $1 AND before->>'revoked_at' IS NULL AND after->>'revoked_at' IS NOT NULL`, rec.GetId()))
	require.Equal(t, 4, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'customer.can_create_api_keys_changed' AND actor_kind = 'admin'`))
	require.Equal(t, 0, e.count(t, `SELECT count(*) FROM audit_log WHERE before::text LIKE '%' || $1 || '%' OR after::text LIKE '%' || $1 || '%'`, secret))
}

func TestAPIKeyLastUsedIsWrittenAtMostOnceAMinute(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cust := e.register(t, "grace@example.com")
	admin := e.adminLogin(t)
	e.allowAPIKeys(t, admin.Value, cust, true)
	created, err := e.identity.CreateApiKey(context.Background(), req(&identitypb.CreateApiKeyRequest{Name: "ci"}, bearer(cust.token)))
	require.NoError(t, err)
	key := created.Msg.GetKey()
	lastUsed := func() *time.Time {
		var ts *time.Time
		require.NoError(t, e.app.Pool().QueryRow(context.Background(), `SELECT last_used_at FROM api_keys`).Scan(&ts))
		return ts
	}
	require.Nil(t, lastUsed())
	first := e.clock.Now()
	_, err = e.me(apiKey(key))
	require.NoError(t, err)
	require.Equal(t, first, lastUsed().UTC())
	for range 5 {
		e.clock.Advance(10 * time.Second)
		_, err = e.me(apiKey(key))
		require.NoError(t, err)
	}
	require.Equal(t, first, lastUsed().UTC())
	e.clock.Advance(10 * time.Second)
	_, err = e.me(apiKey(key))
	require.NoError(t, err)
	require.Equal(t, e.clock.Now(), lastUsed().UTC())
}

func TestActiveAPIKeysAreBounded(t *testing.T) {
	t.Parallel()
	e := setup(t)
	cust := e.register(t, "heidi@example.com")
	admin := e.adminLogin(t)
	e.allowAPIKeys(t, admin.Value, cust, true)
	var first string
	for i := range 20 {
		res, err := e.identity.CreateApiKey(context.Background(), req(&identitypb.CreateApiKeyRequest{Name: "k"}, bearer(cust.token)))
		require.NoError(t, err, i)
		if i == 0 {
			first = res.Msg.GetApiKey().GetId()
		}
	}
	_, err := e.identity.CreateApiKey(context.Background(), req(&identitypb.CreateApiKeyRequest{Name: "k"}, bearer(cust.token)))
	requireCode(t, connect.CodeFailedPrecondition, err)
	_, err = e.identity.RevokeApiKey(context.Background(), req(&identitypb.RevokeApiKeyRequest{Id: first}, bearer(cust.token)))
	require.NoError(t, err)
	_, err = e.identity.CreateApiKey(context.Background(), req(&identitypb.CreateApiKeyRequest{Name: "k"}, bearer(cust.token)))
	require.NoError(t, err)
}
