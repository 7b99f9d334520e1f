package identity_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/identity"
)

// withSecretsKey configures a [secrets] key, which seals TOTP secrets.
func withSecretsKey(t *testing.T) setupOption {
	var k [32]byte
	_, err := rand.Read(k[:])
	require.NoError(t, err)
	return withConfig(func(c *config.Config) {
		c.Secrets.Current = "k1"
		c.Secrets.Keys = map[string]string{"k1": base64.StdEncoding.EncodeToString(k[:])}
	})
}

func codeAt(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	c, err := totp.GenerateCodeCustom(secret, at, totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	require.NoError(t, err)
	return c
}

func (e *bundle) loginWithCode(code string) (*connect.Response[identitypb.AdminLoginResponse], error) {
	return e.identity.AdminLogin(context.Background(), req(&identitypb.AdminLoginRequest{Username: "admin", Password: bootstrapPassword, TotpCode: code}))
}

// reason is the ErrorInfo reason of a connect error, "" without one.
func reason(t *testing.T, err error) string {
	t.Helper()
	var ce *connect.Error
	require.ErrorAs(t, err, &ce)
	for _, d := range ce.Details() {
		v, derr := d.Value()
		require.NoError(t, derr)
		if info, ok := v.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// An admin enrols in TOTP with a session: the secret is stored sealed, the
// first code confirms it, and from then on AdminLogin asks for a code
// (totp_required), accepts each code once, and accepts each recovery code
// once instead. Every step is audited; reset-2fa removes it.
func TestAdminTOTPEnrolmentAndSignIn(t *testing.T) {
	t.Parallel()
	e := setup(t, withSecretsKey(t))
	ctx := context.Background()
	session := e.adminLogin(t).Value

	_, err := e.identity.ConfirmTotpEnrolment(ctx, req(&identitypb.ConfirmTotpEnrolmentRequest{Password: bootstrapPassword, Code: "123456"}, cookie(session)))
	requireCode(t, connect.CodeFailedPrecondition, err)

	started, err := e.identity.StartTotpEnrolment(ctx, req(&identitypb.StartTotpEnrolmentRequest{Password: bootstrapPassword}, cookie(session)))
	require.NoError(t, err)
	u, err := url.Parse(started.Msg.GetOtpauthUrl())
	require.NoError(t, err)
	require.Equal(t, "otpauth", u.Scheme)
	secret := u.Query().Get("secret")
	require.Equal(t, started.Msg.GetSecret(), secret)
	require.True(t, strings.HasPrefix(started.Msg.GetQrPng(), "data:image/png;base64,iVBOR"), "a PNG")
	require.Zero(t, e.count(t, `SELECT count(*) FROM admin_users WHERE totp_secret LIKE '%'||$1||'%'`, secret), "never stored in clear")
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM admin_users WHERE totp_secret LIKE 'enc:v1:k1:%'`))

	// Pending: the password alone still signs in.
	_, err = e.loginWithCode("")
	require.NoError(t, err)

	now := e.clock.Now()
	_, err = e.identity.ConfirmTotpEnrolment(ctx, req(&identitypb.ConfirmTotpEnrolmentRequest{Password: bootstrapPassword, Code: codeAt(t, secret, now.Add(-5*time.Minute))}, cookie(session)))
	requireCode(t, connect.CodeInvalidArgument, err)
	other := e.adminLogin(t).Value
	confirmed, err := e.identity.ConfirmTotpEnrolment(ctx, req(&identitypb.ConfirmTotpEnrolmentRequest{Password: bootstrapPassword, Code: codeAt(t, secret, now)}, cookie(session)))
	require.NoError(t, err)
	codes := confirmed.Msg.GetRecoveryCodes()
	require.Len(t, codes, 10)
	require.Equal(t, 10, e.count(t, `SELECT count(*) FROM admin_recovery_codes WHERE used_at IS NULL`))
	// Every session started with the password alone has ended, this one
	// too: the answer's cookie is the session that goes on.
	for _, old := range []string{session, other} {
		_, err = e.me(cookie(old))
		requireCode(t, connect.CodeUnauthenticated, err)
	}
	session = sessionCookie(t, confirmed.Header()).Value
	me, err := e.me(cookie(session))
	require.NoError(t, err)
	require.True(t, me.GetTotpEnabled())
	require.False(t, me.GetTotpRequired())

	// Now the code is required; the code of the confirmation is spent.
	_, err = e.loginWithCode("")
	requireCode(t, connect.CodeUnauthenticated, err)
	require.Equal(t, identity.ReasonTOTPRequired, reason(t, err))
	_, err = e.loginWithCode(codeAt(t, secret, now))
	requireCode(t, connect.CodeUnauthenticated, err)
	require.Equal(t, identity.ReasonTOTPInvalid, reason(t, err), "a code is accepted once")
	_, err = e.loginWithCode("000000")
	requireCode(t, connect.CodeUnauthenticated, err)
	// A wrong password answers as before, whatever the code.
	_, err = e.identity.AdminLogin(ctx, req(&identitypb.AdminLoginRequest{Username: "admin", Password: "wrong-password", TotpCode: codeAt(t, secret, now)}))
	requireCode(t, connect.CodeUnauthenticated, err)
	require.Empty(t, reason(t, err))

	e.clock.Advance(30 * time.Second)
	next := codeAt(t, secret, e.clock.Now())
	res, err := e.loginWithCode(next)
	require.NoError(t, err)
	require.Equal(t, "admin", res.Msg.GetAdmin().GetUsername())
	_, err = e.loginWithCode(next)
	requireCode(t, connect.CodeUnauthenticated, err)

	// A recovery code, typed in lower case, signs in once.
	_, err = e.loginWithCode(strings.ToLower(codes[3]))
	require.NoError(t, err)
	_, err = e.loginWithCode(codes[3])
	requireCode(t, connect.CodeUnauthenticated, err)
	require.Equal(t, 9, e.count(t, `SELECT count(*) FROM admin_recovery_codes WHERE used_at IS NULL`))
	require.Zero(t, e.count(t, `SELECT count(*) FROM admin_recovery_codes WHERE position(convert_to($1, 'UTF8') IN code_hash) > 0`, codes[0]))

	// Enrolling again needs the 2FA off first; off needs the password.
	_, err = e.identity.StartTotpEnrolment(ctx, req(&identitypb.StartTotpEnrolmentRequest{Password: bootstrapPassword}, cookie(session)))
	requireCode(t, connect.CodeFailedPrecondition, err)
	_, err = e.identity.DisableTotp(ctx, req(&identitypb.DisableTotpRequest{Password: "wrong-password"}, cookie(session)))
	requireCode(t, connect.CodePermissionDenied, err)

	// The operator's reset removes it: the password alone signs in again.
	op := identity.Operator{DB: e.app.Pool(), By: "cli:ops@host", Clock: e.clock.Now}
	had, err := op.ResetTOTP(ctx, "admin")
	require.NoError(t, err)
	require.True(t, had)
	had, err = op.ResetTOTP(ctx, "admin")
	require.NoError(t, err)
	require.False(t, had)
	_, err = e.loginWithCode("")
	require.NoError(t, err)
	require.Zero(t, e.count(t, `SELECT count(*) FROM admin_recovery_codes`))

	for action, n := range map[string]int{
		identity.ActionTOTPEnrolmentStarted: 1, identity.ActionTOTPConfirmed: 1,
		identity.ActionRecoveryCodeUsed: 1, identity.ActionTOTPReset: 1,
	} {
		require.Equal(t, n, e.count(t, `SELECT count(*) FROM audit_log WHERE action = $1`, action), action)
	}
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = $1 AND actor_id = 'cli:ops@host'`, identity.ActionTOTPReset))
	require.NotContains(t, e.logs.String(), secret)
}

// DisableTotp with the password removes the admin's 2FA, audited.
func TestAdminDisablesTOTPWithThePassword(t *testing.T) {
	t.Parallel()
	e := setup(t, withSecretsKey(t))
	ctx := context.Background()
	session := e.adminLogin(t).Value
	started, err := e.identity.StartTotpEnrolment(ctx, req(&identitypb.StartTotpEnrolmentRequest{Password: bootstrapPassword}, cookie(session)))
	require.NoError(t, err)
	confirmed, err := e.identity.ConfirmTotpEnrolment(ctx, req(&identitypb.ConfirmTotpEnrolmentRequest{Password: bootstrapPassword, Code: codeAt(t, started.Msg.GetSecret(), e.clock.Now())}, cookie(session)))
	require.NoError(t, err)
	session = sessionCookie(t, confirmed.Header()).Value
	_, err = e.identity.DisableTotp(ctx, req(&identitypb.DisableTotpRequest{Password: bootstrapPassword}, cookie(session)))
	require.NoError(t, err)
	_, err = e.loginWithCode("")
	require.NoError(t, err)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = $1`, identity.ActionTOTPDisabled))
}

// Without a [secrets] key no secret can be sealed: enrolment is refused.
func TestTOTPEnrolmentNeedsASecretsKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, err := e.identity.StartTotpEnrolment(context.Background(), req(&identitypb.StartTotpEnrolmentRequest{Password: bootstrapPassword}, cookie(e.adminLogin(t).Value)))
	requireCode(t, connect.CodeFailedPrecondition, err)
	require.Zero(t, e.count(t, `SELECT count(*) FROM admin_users WHERE totp_secret IS NOT NULL`))
}

// With [admin].require_2fa a session of an admin without a confirmed second
// factor may call GetMe, Logout and the enrolment, and nothing else: every
// other procedure (an admin one, a customer one, an export) answers
// permission_denied with the reason totp_enrolment_required, whichever
// protocol asks. Confirming replaces the session with one that may do
// everything; 2FA cannot then be turned off, and an operator's reset puts
// the admin's sessions back to enrolment only. API keys are not sign-ins
// and keep working.
func TestRequired2FALetsAnAdminWithoutItOnlyEnrol(t *testing.T) {
	t.Parallel()
	e := setup(t, withSecretsKey(t), withConfig(func(c *config.Config) { c.Admin.Require2FA = true }))
	ctx := context.Background()
	session := e.adminLogin(t).Value

	me, err := e.me(cookie(session))
	require.NoError(t, err)
	require.True(t, me.GetTotpRequired())
	require.False(t, me.GetTotpEnabled())

	refused := func(t *testing.T, session string) {
		t.Helper()
		_, err := e.admin.ListCustomers(ctx, req(&identitypb.ListCustomersRequest{Pagination: &identitypb.PageRequest{}}, cookie(session)))
		requireCode(t, connect.CodePermissionDenied, err)
		require.Equal(t, auth.ReasonEnrolmentRequired, reason(t, err))
		_, err = e.identity.CreateAdminApiKey(ctx, req(&identitypb.CreateAdminApiKeyRequest{Name: "k", Scope: "read"}, cookie(session)))
		requireCode(t, connect.CodePermissionDenied, err)
		_, err = e.identity.ChangePassword(ctx, req(&identitypb.ChangePasswordRequest{CurrentPassword: bootstrapPassword, NewPassword: "another-password"}, cookie(session)))
		requireCode(t, connect.CodePermissionDenied, err)
		// Over gRPC as well.
		grpcAdmin := identitypbconnect.NewCustomerAdminServiceClient(e.h2c, e.baseURL, connect.WithGRPC())
		_, err = grpcAdmin.ListCustomers(ctx, req(&identitypb.ListCustomersRequest{Pagination: &identitypb.PageRequest{}}, cookie(session)))
		requireCode(t, connect.CodePermissionDenied, err)
		// An export, a plain HTTP route.
		r, err := http.NewRequestWithContext(ctx, http.MethodGet, e.baseURL+"/export/payments.csv", nil)
		require.NoError(t, err)
		r.Header.Set("Cookie", cookieName+"="+session)
		res, err := e.http.Do(r)
		require.NoError(t, err)
		_ = res.Body.Close()
		require.Equal(t, http.StatusForbidden, res.StatusCode)
	}
	refused(t, session)

	started, err := e.identity.StartTotpEnrolment(ctx, req(&identitypb.StartTotpEnrolmentRequest{Password: bootstrapPassword}, cookie(session)))
	require.NoError(t, err)
	confirmed, err := e.identity.ConfirmTotpEnrolment(ctx, req(&identitypb.ConfirmTotpEnrolmentRequest{Password: bootstrapPassword, Code: codeAt(t, started.Msg.GetSecret(), e.clock.Now())}, cookie(session)))
	require.NoError(t, err)
	_, err = e.me(cookie(session))
	requireCode(t, connect.CodeUnauthenticated, err)
	session = sessionCookie(t, confirmed.Header()).Value
	me, err = e.me(cookie(session))
	require.NoError(t, err)
	require.False(t, me.GetTotpRequired())
	_, err = e.admin.ListCustomers(ctx, req(&identitypb.ListCustomersRequest{Pagination: &identitypb.PageRequest{}}, cookie(session)))
	require.NoError(t, err)
	key, err := e.identity.CreateAdminApiKey(ctx, req(&identitypb.CreateAdminApiKeyRequest{Name: "k", Scope: "read"}, cookie(session)))
	require.NoError(t, err)

	_, err = e.identity.DisableTotp(ctx, req(&identitypb.DisableTotpRequest{Password: bootstrapPassword}, cookie(session)))
	requireCode(t, connect.CodeFailedPrecondition, err)
	require.Contains(t, err.Error(), "reset-2fa")

	// The operator's reset: the session that is left may only enrol again
	// once it is read from the database (at most a minute later).
	_, err = identity.Operator{DB: e.app.Pool(), By: "cli:ops@host", Clock: e.clock.Now}.ResetTOTP(ctx, "admin")
	require.NoError(t, err)
	e.clock.Advance(2 * time.Minute)
	refused(t, session)
	// The key acts as before.
	_, err = e.admin.ListCustomers(ctx, req(&identitypb.ListCustomersRequest{Pagination: &identitypb.PageRequest{}}, apiKey(key.Msg.GetKey())))
	require.NoError(t, err)
	// Logging out is open.
	_, err = e.identity.Logout(ctx, req(&identitypb.LogoutRequest{}, cookie(session)))
	require.NoError(t, err)
}
