package identity_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/identity"
)

func TestNoSecretIsEverLogged(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	secrets := []string{bootstrapPassword, jwtSecret}

	cust := e.register(t, "oscar@example.com")
	secrets = append(secrets, cust.password, cust.token)
	_, err := e.identity.Login(ctx, req(&identitypb.LoginRequest{Email: cust.email, Password: "wrong-password-123"}))
	requireCode(t, connect.CodeUnauthenticated, err)
	secrets = append(secrets, "wrong-password-123")
	admin := e.adminLogin(t)
	secrets = append(secrets, admin.Value)
	e.allowAPIKeys(t, admin.Value, cust, true)
	created, err := e.identity.CreateApiKey(ctx, req(&identitypb.CreateApiKeyRequest{Name: "ci"}, bearer(cust.token)))
	require.NoError(t, err)
	key := created.Msg.GetKey()
	keySecret := key[len(created.Msg.GetApiKey().GetPrefix())+1:]
	secrets = append(secrets, key, keySecret)

	// Every kind of rejection, each of which logs a reason.
	_, err = e.me(bearer(cust.token[:len(cust.token)-2] + "xx"))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.me(apiKey(key[:len(key)-3] + "abc"))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.me(cookie(admin.Value[:40] + "abc"))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.me(apiKey(key))
	require.NoError(t, err)
	_, err = e.identity.RevokeApiKey(ctx, req(&identitypb.RevokeApiKeyRequest{Id: created.Msg.GetApiKey().GetId()}, bearer(cust.token)))
	require.NoError(t, err)
	_, err = e.me(apiKey(key))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.identity.Logout(ctx, req(&identitypb.LogoutRequest{}, cookie(admin.Value)))
	require.NoError(t, err)
	_, err = e.me(cookie(admin.Value))
	requireCode(t, connect.CodeUnauthenticated, err)
	e.clock.Advance(25 * time.Hour)
	_, err = e.me(bearer(cust.token))
	requireCode(t, connect.CodeUnauthenticated, err)

	logs := e.logs.String()
	require.Contains(t, logs, "credential rejected", "the rejections were logged")
	for _, s := range secrets {
		require.NotContains(t, logs, s)
	}
	var audit string
	require.NoError(t, e.app.Pool().QueryRow(ctx, `SELECT coalesce(string_agg(coalesce(before::text, '') || coalesce(after::text, ''), ' '), '') FROM audit_log`).Scan(&audit))
	for _, s := range secrets {
		require.NotContains(t, audit, s)
	}
}

// memoryCache is a SessionCache for tests; fail makes every call fail.
type memoryCache struct {
	mu      sync.Mutex
	entries map[string]identity.Session
	fail    bool
	hits    int
}

func (c *memoryCache) Get(_ context.Context, id []byte) (identity.Session, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail {
		return identity.Session{}, false, errors.New("cache down")
	}
	s, ok := c.entries[string(id)]
	if ok {
		c.hits++
	}
	return s, ok, nil
}

func (c *memoryCache) Put(_ context.Context, s identity.Session) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail {
		return errors.New("cache down")
	}
	c.entries[string(s.ID)] = s
	return nil
}

func (c *memoryCache) Delete(_ context.Context, id []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail {
		return errors.New("cache down")
	}
	delete(c.entries, string(id))
	return nil
}

func (c *memoryCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

func TestSessionCacheIsReadThroughAndNeverTheSystemOfRecord(t *testing.T) {
	t.Parallel()
	cache := &memoryCache{entries: map[string]identity.Session{}}
	e := setup(t, withAppOption(app.WithSessionCache(cache)))
	ctx := context.Background()

	c := e.adminLogin(t)
	require.Equal(t, 1, cache.len(), "login fills the cache")
	for range 3 {
		_, err := e.me(cookie(c.Value))
		require.NoError(t, err)
	}
	cache.mu.Lock()
	require.Equal(t, 3, cache.hits)
	cache.mu.Unlock()
	cache.mu.Lock()
	for _, s := range cache.entries {
		require.NotContains(t, string(s.ID), c.Value)
		require.Len(t, s.ID, 32, "the cache holds the hash, not the token")
	}
	cache.mu.Unlock()

	// A session deleted behind the cache's back is refused once the cached
	// copy is a minute old.
	_, err := e.app.Pool().Exec(ctx, `DELETE FROM sessions`)
	require.NoError(t, err)
	e.clock.Advance(time.Minute)
	_, err = e.me(cookie(c.Value))
	requireCode(t, connect.CodeUnauthenticated, err)
	require.Equal(t, 0, cache.len())

	// Logout removes the cached copy.
	c = e.adminLogin(t)
	_, err = e.identity.Logout(ctx, req(&identitypb.LogoutRequest{}, cookie(c.Value)))
	require.NoError(t, err)
	require.Equal(t, 0, cache.len())
	_, err = e.me(cookie(c.Value))
	requireCode(t, connect.CodeUnauthenticated, err)

	// A dead cache logs nobody out: the database answers.
	c = e.adminLogin(t)
	cache.mu.Lock()
	cache.fail = true
	cache.mu.Unlock()
	for range 3 {
		e.clock.Advance(2 * time.Minute)
		_, err = e.me(cookie(c.Value))
		require.NoError(t, err)
	}
	second := e.adminLogin(t)
	_, err = e.me(cookie(second.Value))
	require.NoError(t, err)
	_, err = e.identity.Logout(ctx, req(&identitypb.LogoutRequest{}, cookie(second.Value)))
	require.NoError(t, err)
	_, err = e.me(cookie(second.Value))
	requireCode(t, connect.CodeUnauthenticated, err)
	require.True(t, bytes.Contains([]byte(e.logs.String()), []byte("session cache get failed")))
}
