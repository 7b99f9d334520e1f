package identity_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/identity"
)

// cutOffBundle is a service whose session cache is shared with the operator's
// commands, as Redis is between `paymentd serve` and `paymentd admin`.
type cutOffBundle struct {
	*bundle
	cache *memoryCache
	op    identity.Operator
}

func setupCutOff(t *testing.T) cutOffBundle {
	t.Helper()
	cache := &memoryCache{entries: map[string]identity.Session{}}
	e := setup(t, withAppOption(app.WithSessionCache(cache)))
	return cutOffBundle{bundle: e, cache: cache, op: identity.Operator{DB: e.app.Pool(), Cache: cache, By: "cli:test@host", Clock: e.clock.Now}}
}

// loginAs starts a session of any admin and returns its cookie's value.
func (e *bundle) loginAs(t *testing.T, username, password string) (string, error) {
	t.Helper()
	res, err := e.identity.AdminLogin(context.Background(), req(&identitypb.AdminLoginRequest{Username: username, Password: password}))
	if err != nil {
		return "", err
	}
	return sessionCookie(t, res.Header()).Value, nil
}

func (e cutOffBundle) auditCount(t *testing.T, action, cause string) int {
	t.Helper()
	if cause == "" {
		return e.count(t, `SELECT count(*) FROM audit_log WHERE action = $1`, action)
	}
	return e.count(t, `SELECT count(*) FROM audit_log WHERE action = $1 AND after->>'cause' = $2`, action, cause)
}

// `paymentd admin reset-password` is the remedy for a leaked password: the
// admin's API keys (which the password could have minted) answer
// Unauthenticated from the next request, their sessions too, even where a
// session is cached; with --keep-keys the keys keep working.
func TestResetPasswordRevokesTheAdminsAPIKeysUnlessKept(t *testing.T) {
	t.Parallel()
	e := setupCutOff(t)
	ctx := context.Background()
	session := e.adminLogin(t).Value
	minted, err := e.createAdminKey(session, "minted with the leaked password", "admin")
	require.NoError(t, err)
	_, err = e.me(apiKey(minted.GetKey()))
	require.NoError(t, err)
	_, err = e.me(cookie(session))
	require.NoError(t, err)
	require.Equal(t, 1, e.cache.len(), "the session is cached")

	ch, err := e.op.ResetPassword(ctx, "admin", "a new password after the leak", false)
	require.NoError(t, err)
	require.Equal(t, 1, ch.KeysRevoked)
	require.Equal(t, 1, ch.SessionsEnded)
	require.NoError(t, ch.CacheErr)
	_, err = e.me(apiKey(minted.GetKey()))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.me(cookie(session))
	requireCode(t, connect.CodeUnauthenticated, err)
	require.Equal(t, 1, e.auditCount(t, identity.ActionAdminAPIKeyRevoked, identity.ActionAdminResetPassword))
	require.Equal(t, 1, e.auditCount(t, identity.ActionAdminResetPassword, ""))

	_, err = e.loginAs(t, "admin", bootstrapPassword)
	requireCode(t, connect.CodeUnauthenticated, err)
	session, err = e.loginAs(t, "admin", "a new password after the leak")
	require.NoError(t, err)
	kept, err := e.createAdminKey(session, "nightly report", "read")
	require.NoError(t, err)
	ch, err = e.op.ResetPassword(ctx, "admin", "yet another password", true)
	require.NoError(t, err)
	require.Zero(t, ch.KeysRevoked)
	_, err = e.me(apiKey(kept.GetKey()))
	require.NoError(t, err, "--keep-keys keeps them")
	_, err = e.me(apiKey(minted.GetKey()))
	requireCode(t, connect.CodeUnauthenticated, err)

	_, err = e.op.ResetPassword(ctx, "nobody", "yet another password", false)
	require.True(t, apperr.Is(err, apperr.NotFound), "%v", err)
}

// A disabled admin is cut off at once: the login is refused, their cached
// session and their API keys answer Unauthenticated from the next request.
// Enabling restores the login; keys revoked by disabling stay revoked,
// keys kept (--keep-keys) work again. The last enabled admin cannot be
// disabled.
func TestDisabledAdminIsCutOffAtOnceAndEnablingRestoresOnlyTheLogin(t *testing.T) {
	t.Parallel()
	e := setupCutOff(t)
	ctx := context.Background()

	_, err := e.op.Disable(ctx, "admin", "", false)
	require.True(t, apperr.Is(err, apperr.FailedPrecondition), "%v", err)
	require.ErrorContains(t, err, "last enabled admin")
	_, err = e.op.Disable(ctx, "nobody", "", false)
	require.True(t, apperr.Is(err, apperr.NotFound), "%v", err)

	const password = "ops password, long enough"
	_, err = e.op.CreateAdmin(ctx, "ops", password)
	require.NoError(t, err)
	session, err := e.loginAs(t, "ops", password)
	require.NoError(t, err)
	revoked, err := e.createAdminKey(session, "revoked by disabling", "read")
	require.NoError(t, err)
	_, err = e.me(cookie(session))
	require.NoError(t, err)

	ch, err := e.op.Disable(ctx, "ops", "left the team", false)
	require.NoError(t, err)
	require.True(t, ch.Changed)
	require.Equal(t, 1, ch.SessionsEnded)
	require.Equal(t, 1, ch.KeysRevoked)
	_, err = e.me(cookie(session))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.me(apiKey(revoked.GetKey()))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.loginAs(t, "ops", password)
	requireCode(t, connect.CodeUnauthenticated, err)
	require.Equal(t, "invalid username or password", message(err), "a disabled admin's login reads as a wrong password")
	_, err = e.op.Disable(ctx, "admin", "", false)
	require.True(t, apperr.Is(err, apperr.FailedPrecondition), "ops is disabled: admin is the last: %v", err)

	ch, err = e.op.Enable(ctx, "ops")
	require.NoError(t, err)
	require.True(t, ch.Changed)
	session, err = e.loginAs(t, "ops", password)
	require.NoError(t, err)
	_, err = e.me(apiKey(revoked.GetKey()))
	requireCode(t, connect.CodeUnauthenticated, err)

	// --keep-keys: refused while disabled, working again once enabled.
	kept, err := e.createAdminKey(session, "kept", "read")
	require.NoError(t, err)
	ch, err = e.op.Disable(ctx, "ops", "", true)
	require.NoError(t, err)
	require.Zero(t, ch.KeysRevoked)
	_, err = e.me(apiKey(kept.GetKey()))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.op.Enable(ctx, "ops")
	require.NoError(t, err)
	_, err = e.me(apiKey(kept.GetKey()))
	require.NoError(t, err)
	ch, err = e.op.Enable(ctx, "ops")
	require.NoError(t, err)
	require.False(t, ch.Changed)

	require.Equal(t, 2, e.auditCount(t, identity.ActionAdminDisable, ""))
	require.Equal(t, 2, e.auditCount(t, identity.ActionAdminEnable, ""), "the enable that changed nothing writes none")
	require.Equal(t, 1, e.auditCount(t, identity.ActionAdminAPIKeyRevoked, identity.ActionAdminDisable))
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'admin.disable' AND actor_kind = 'system' AND after->>'reason' = 'left the team'`))
}

// An admin's password change revokes their API keys, unless the request
// keeps them: a password that leaked could have minted them.
func TestAdminPasswordChangeRevokesTheirAPIKeysUnlessKept(t *testing.T) {
	t.Parallel()
	e := setupCutOff(t)
	ctx := context.Background()
	session := e.adminLogin(t).Value
	minted, err := e.createAdminKey(session, "minted", "admin")
	require.NoError(t, err)

	res, err := e.identity.ChangePassword(ctx, req(&identitypb.ChangePasswordRequest{CurrentPassword: bootstrapPassword, NewPassword: "second password"}, cookie(session)))
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Msg.GetApiKeysRevoked())
	_, err = e.me(apiKey(minted.GetKey()))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.me(cookie(session))
	requireCode(t, connect.CodeUnauthenticated, err)
	require.Equal(t, 1, e.auditCount(t, identity.ActionAdminAPIKeyRevoked, identity.ActionAdminPasswordChanged))

	session = sessionCookie(t, res.Header()).Value
	kept, err := e.createAdminKey(session, "kept", "read")
	require.NoError(t, err)
	res, err = e.identity.ChangePassword(ctx, req(&identitypb.ChangePasswordRequest{CurrentPassword: "second password", NewPassword: "third password", KeepApiKeys: true}, cookie(session)))
	require.NoError(t, err)
	require.Zero(t, res.Msg.GetApiKeysRevoked())
	_, err = e.me(apiKey(kept.GetKey()))
	require.NoError(t, err)
}
