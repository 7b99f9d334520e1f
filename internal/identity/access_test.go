package identity_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
)

// changePassword calls ChangePassword with creds.
func (e *bundle) changePassword(current, next string, creds ...cred) (*connect.Response[identitypb.ChangePasswordResponse], error) {
	return e.identity.ChangePassword(context.Background(), req(&identitypb.ChangePasswordRequest{CurrentPassword: current, NewPassword: next}, creds...))
}

func (e *bundle) login(t *testing.T, email, password string) (string, error) {
	t.Helper()
	res, err := e.identity.Login(context.Background(), req(&identitypb.LoginRequest{Email: email, Password: password}))
	if err != nil {
		return "", err
	}
	return res.Msg.GetAccessToken(), nil
}

// A customer's password change needs the current password and a token (not
// an API key); it ends every token issued before — the one it was made
// with too — and answers a new one. API keys keep working.
func TestCustomerPasswordChangeEndsEveryTokenIssuedBefore(t *testing.T) {
	t.Parallel()
	e := setup(t)
	admin := e.adminLogin(t).Value
	c := e.register(t, "carol@example.com")
	second, err := e.login(t, c.email, c.password)
	require.NoError(t, err)
	e.allowAPIKeys(t, admin, c, true)
	key, err := e.identity.CreateApiKey(context.Background(), req(&identitypb.CreateApiKeyRequest{Name: "ci"}, bearer(c.token)))
	require.NoError(t, err)

	_, err = e.changePassword("not the password", "a brand new password", bearer(c.token))
	requireCode(t, connect.CodePermissionDenied, err)
	_, err = e.changePassword(c.password, c.password, bearer(c.token))
	requireCode(t, connect.CodeInvalidArgument, err)
	_, err = e.changePassword(c.password, "a brand new password", apiKey(key.Msg.GetKey()))
	requireCode(t, connect.CodePermissionDenied, err)
	_, err = e.changePassword(c.password, "short", bearer(c.token))
	requireCode(t, connect.CodeInvalidArgument, err)
	_, err = e.changePassword(c.password, "a brand new password")
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.me(bearer(second))
	require.NoError(t, err, "nothing above changed anything")

	res, err := e.changePassword(c.password, "a brand new password", bearer(c.token))
	require.NoError(t, err)
	require.Equal(t, "no-store", res.Header().Get("Cache-Control"))
	fresh := res.Msg.GetAccessToken()
	require.NotEmpty(t, fresh)
	require.NotEmpty(t, res.Msg.GetExpiresAt())

	for name, tok := range map[string]string{"the token of the change": c.token, "another earlier token": second} {
		_, err := e.me(bearer(tok))
		requireCode(t, connect.CodeUnauthenticated, err)
		require.NotContains(t, message(err), "generation", name)
	}
	me, err := e.me(bearer(fresh))
	require.NoError(t, err)
	require.Equal(t, c.id, me.GetId())
	_, err = e.me(apiKey(key.Msg.GetKey()))
	require.NoError(t, err, "API keys are revoked one by one, not by a password change")

	_, err = e.login(t, c.email, c.password)
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.login(t, c.email, "a brand new password")
	require.NoError(t, err)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'customer.password_changed' AND actor_kind = 'customer' AND entity_id = $1`, c.id))
	require.Contains(t, e.logs.String(), `"reason":"token ended (generation 0, now 1)"`)
	require.NotContains(t, e.logs.String(), "a brand new password")
}

// An admin's password change needs the current password and a session; it
// ends every session of the admin, the one it was made with included, and
// sets a new session cookie.
func TestAdminPasswordChangeEndsEverySessionAndStartsANewOne(t *testing.T) {
	t.Parallel()
	e := setup(t)
	first := e.adminLogin(t).Value
	second := e.adminLogin(t).Value
	c := e.register(t, "dave@example.com")

	_, err := e.changePassword("wrong-password", "the admin's new password", cookie(first))
	requireCode(t, connect.CodePermissionDenied, err)
	_, err = e.changePassword(c.password, "a brand new password", bearer(c.token), cookie(first))
	requireCode(t, connect.CodePermissionDenied, err) // the session decides: the admin's password is not that
	_, err = e.changePassword(bootstrapPassword, "        ", cookie(first))
	requireCode(t, connect.CodeInvalidArgument, err)

	res, err := e.changePassword(bootstrapPassword, "the admin's new password", cookie(first))
	require.NoError(t, err)
	require.Empty(t, res.Msg.GetAccessToken())
	fresh := sessionCookie(t, res.Header())
	require.True(t, fresh.HttpOnly)
	for _, old := range []string{first, second} {
		_, err := e.me(cookie(old))
		requireCode(t, connect.CodeUnauthenticated, err)
	}
	me, err := e.me(cookie(fresh.Value))
	require.NoError(t, err)
	require.Equal(t, "admin", me.GetUsername())
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM sessions`))

	_, err = e.identity.AdminLogin(context.Background(), req(&identitypb.AdminLoginRequest{Username: "admin", Password: bootstrapPassword}))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.identity.AdminLogin(context.Background(), req(&identitypb.AdminLoginRequest{Username: "admin", Password: "the admin's new password"}))
	require.NoError(t, err)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'admin.password_changed' AND after->>'sessions_ended' = '2'`))
}

// A disabled customer cannot log in (the answer of a wrong password), and
// every call with their tokens or API keys is Unauthenticated. Enabling
// brings back the login and the API keys, never the tokens.
func TestDisabledCustomerIsRefusedEverywhereAndEnablingRestoresLoginAndKeys(t *testing.T) {
	t.Parallel()
	e := setup(t)
	admin := e.adminLogin(t).Value
	c := e.register(t, "erin@example.com")
	bystander := e.register(t, "frank@example.com")
	e.allowAPIKeys(t, admin, c, true)
	key, err := e.identity.CreateApiKey(context.Background(), req(&identitypb.CreateApiKeyRequest{Name: "ci"}, bearer(c.token)))
	require.NoError(t, err)

	_, err = e.admin.DisableCustomer(context.Background(), req(&identitypb.DisableCustomerRequest{CustomerId: c.id, Reason: "chargeback"}, bearer(c.token)))
	requireCode(t, connect.CodePermissionDenied, err)
	res, err := e.admin.DisableCustomer(context.Background(), req(&identitypb.DisableCustomerRequest{CustomerId: c.id, Reason: "chargeback"}, cookie(admin)))
	require.NoError(t, err)
	require.NotEmpty(t, res.Msg.GetCustomer().GetDisabledAt())
	again, err := e.admin.DisableCustomer(context.Background(), req(&identitypb.DisableCustomerRequest{CustomerId: c.id}, cookie(admin)))
	require.NoError(t, err)
	require.Equal(t, res.Msg.GetCustomer().GetDisabledAt(), again.Msg.GetCustomer().GetDisabledAt(), "disabling twice changes nothing")

	_, err = e.me(bearer(c.token))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.me(apiKey(key.Msg.GetKey()))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.login(t, c.email, c.password)
	requireCode(t, connect.CodeUnauthenticated, err)
	require.Equal(t, "invalid email or password", message(err), "a disabled account reads as a wrong password")
	_, err = e.me(bearer(bystander.token))
	require.NoError(t, err, "another customer is untouched")

	en, err := e.admin.EnableCustomer(context.Background(), req(&identitypb.EnableCustomerRequest{CustomerId: c.id}, cookie(admin)))
	require.NoError(t, err)
	require.Empty(t, en.Msg.GetCustomer().GetDisabledAt())
	_, err = e.me(bearer(c.token))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.me(apiKey(key.Msg.GetKey()))
	require.NoError(t, err, "the API key works again")
	tok, err := e.login(t, c.email, c.password)
	require.NoError(t, err)
	_, err = e.me(bearer(tok))
	require.NoError(t, err)

	_, err = e.admin.EnableCustomer(context.Background(), req(&identitypb.EnableCustomerRequest{CustomerId: "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f"}, cookie(admin)))
	requireCode(t, connect.CodeNotFound, err)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'customer.disabled' AND entity_id = $1 AND after->>'reason' = 'chargeback'`, c.id))
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'customer.enabled' AND entity_id = $1`, c.id))
}

// Signing a customer out everywhere ends every token issued before, keeps
// the API keys unless asked to revoke them, and lets the customer log in
// again.
func TestSignOutEverywhereEndsTokensAndOnRequestTheKeys(t *testing.T) {
	t.Parallel()
	e := setup(t)
	admin := e.adminLogin(t).Value
	c := e.register(t, "gina@example.com")
	e.allowAPIKeys(t, admin, c, true)
	var keys []string
	for _, name := range []string{"one", "two"} {
		k, err := e.identity.CreateApiKey(context.Background(), req(&identitypb.CreateApiKeyRequest{Name: name}, bearer(c.token)))
		require.NoError(t, err)
		keys = append(keys, k.Msg.GetKey())
	}

	res, err := e.admin.SignOutEverywhere(context.Background(), req(&identitypb.SignOutEverywhereRequest{CustomerId: c.id}, cookie(admin)))
	require.NoError(t, err)
	require.Zero(t, res.Msg.GetApiKeysRevoked())
	_, err = e.me(bearer(c.token))
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = e.me(apiKey(keys[0]))
	require.NoError(t, err)
	tok, err := e.login(t, c.email, c.password)
	require.NoError(t, err)
	_, err = e.me(bearer(tok))
	require.NoError(t, err)

	res, err = e.admin.SignOutEverywhere(context.Background(), req(&identitypb.SignOutEverywhereRequest{CustomerId: c.id, RevokeApiKeys: true}, cookie(admin)))
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Msg.GetApiKeysRevoked())
	for _, cr := range []cred{bearer(tok), apiKey(keys[0]), apiKey(keys[1])} {
		_, err = e.me(cr)
		requireCode(t, connect.CodeUnauthenticated, err)
	}
	require.Equal(t, 2, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'customer.signed_out_everywhere' AND actor_kind = 'admin'`))
}
