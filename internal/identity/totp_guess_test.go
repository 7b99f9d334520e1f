package identity_test

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/identity"
)

// enrolled confirms a second factor for the bootstrap admin and answers its
// secret and recovery codes.
func (e *bundle) enrolled(t *testing.T) (string, []string) {
	t.Helper()
	ctx := context.Background()
	session := e.adminLogin(t).Value
	started, err := e.identity.StartTotpEnrolment(ctx, req(&identitypb.StartTotpEnrolmentRequest{Password: bootstrapPassword}, cookie(session)))
	require.NoError(t, err)
	secret := started.Msg.GetSecret()
	confirmed, err := e.identity.ConfirmTotpEnrolment(ctx, req(&identitypb.ConfirmTotpEnrolmentRequest{Password: bootstrapPassword, Code: codeAt(t, secret, e.clock.Now())}, cookie(session)))
	require.NoError(t, err)
	return secret, confirmed.Msg.GetRecoveryCodes()
}

// sharing is a second paymentd on e's database, with a clock of its own
// set to e's, whose client calls from 127.0.0.2: another instance and
// another address.
func (e *bundle) sharing(t *testing.T) *bundle {
	t.Helper()
	o := setup(t, withSecretsKey(t), withConfig(func(c *config.Config) {
		c.DB.URL = e.cfg.DB.URL
		c.Secrets = e.cfg.Secrets
	}))
	o.clock.Set(e.clock.Now())
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	transport := &http.Transport{DialContext: dialer.DialContext}
	t.Cleanup(transport.CloseIdleConnections)
	o.identity = identitypbconnect.NewIdentityServiceClient(&http.Client{Transport: transport}, o.baseURL)
	return o
}

// lockedFor requires err to be the refusal of an unjudged code: never
// Unauthenticated or totp_invalid, but ResourceExhausted, the reason
// totp_locked and a retry delay; it answers the delay.
func lockedFor(t *testing.T, err error) time.Duration {
	t.Helper()
	requireCode(t, connect.CodeResourceExhausted, err)
	require.Equal(t, identity.ReasonTOTPLocked, reason(t, err))
	var ce *connect.Error
	require.ErrorAs(t, err, &ce)
	require.NotContains(t, ce.Message(), "invalid")
	for _, d := range ce.Details() {
		v, derr := d.Value()
		require.NoError(t, derr)
		if info, ok := v.(*errdetails.RetryInfo); ok {
			require.Equal(t, ce.Meta().Get("Retry-After") != "", true)
			return info.GetRetryDelay().AsDuration()
		}
	}
	t.Fatalf("no RetryInfo in %v", err)
	return 0
}

// refusedTotal is paymentd_admin_second_factor_refused_total{outcome} of e.
func (e *bundle) refusedTotal(t *testing.T, outcome string) float64 {
	t.Helper()
	families, err := e.app.Metrics().Registry().Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "paymentd_admin_second_factor_refused_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series of outcome %q", outcome)
	return 0
}

// Wrong second-factor codes are counted per admin in the database: four
// on one instance and a fifth on another, from another address, lock the
// admin's codes out for a minute. A right code is then refused unjudged
// (ResourceExhausted, totp_locked, a retry delay), on either instance, and
// so is a recovery code. Each wrong code is audited with its address and
// counted in the metric. Once the lock has passed the right code signs in
// and the count is back to 0; the next wrong code after that is free again.
func TestWrongSecondFactorCodesLockTheAdminOutOnEveryInstance(t *testing.T) {
	t.Parallel()
	a := setup(t, withSecretsKey(t))
	secret, recovery := a.enrolled(t)
	b := a.sharing(t)
	// Both series exist before the first refusal, so increase() sees it.
	require.Zero(t, a.refusedTotal(t, identity.SecondFactorWrong))
	require.Zero(t, a.refusedTotal(t, identity.SecondFactorLocked))

	for i := range 4 {
		_, err := a.loginWithCode("00000" + string(rune('0'+i)))
		requireCode(t, connect.CodeUnauthenticated, err)
		require.Equal(t, identity.ReasonTOTPInvalid, reason(t, err))
	}
	_, err := b.loginWithCode("999999")
	requireCode(t, connect.CodeUnauthenticated, err)
	require.Equal(t, identity.ReasonTOTPInvalid, reason(t, err), "the fifth wrong code is judged, and locks")

	right := codeAt(t, secret, a.clock.Now().Add(30*time.Second))
	for _, e := range []*bundle{a, b} {
		_, err = e.loginWithCode(right)
		require.Equal(t, time.Minute, lockedFor(t, err), "the right code is not judged under the lock")
	}
	_, err = a.loginWithCode(recovery[0])
	lockedFor(t, err)
	require.Equal(t, 10, a.count(t, `SELECT count(*) FROM admin_recovery_codes WHERE used_at IS NULL`), "the recovery code was not spent")
	// A wrong password is answered as before, lock or not.
	_, err = a.identity.AdminLogin(context.Background(), req(&identitypb.AdminLoginRequest{Username: "admin", Password: "wrong-password", TotpCode: right}))
	requireCode(t, connect.CodeUnauthenticated, err)

	require.Equal(t, 5, a.count(t, `SELECT count(*) FROM audit_log WHERE action = $1`, identity.ActionSecondFactorFailed))
	require.Equal(t, 1, a.count(t, `SELECT count(*) FROM audit_log WHERE action = $1 AND after->>'remote_addr' LIKE '127.0.0.2:%' AND (after->>'failures')::int = 5 AND after ? 'locked_until'`, identity.ActionSecondFactorFailed))
	require.Equal(t, float64(4), a.refusedTotal(t, identity.SecondFactorWrong))
	require.Equal(t, float64(1), b.refusedTotal(t, identity.SecondFactorWrong))
	require.Equal(t, float64(2), a.refusedTotal(t, identity.SecondFactorLocked))
	require.Equal(t, float64(1), b.refusedTotal(t, identity.SecondFactorLocked))

	// Time lifts the lock; the right code then signs in on the other
	// instance and ends the run.
	for _, e := range []*bundle{a, b} {
		e.clock.Advance(time.Minute + 30*time.Second)
	}
	_, err = b.loginWithCode(codeAt(t, secret, b.clock.Now()))
	require.NoError(t, err)
	require.Equal(t, 0, a.count(t, `SELECT totp_failures FROM admin_users WHERE username = 'admin'`))
	require.Equal(t, 0, a.count(t, `SELECT count(*) FROM admin_users WHERE totp_locked_until IS NOT NULL`))
	_, err = a.loginWithCode("000000")
	require.Equal(t, identity.ReasonTOTPInvalid, reason(t, err), "after a right code the budget is whole again")
}

// Each lock after the first is twice as long, up to a day; a run of wrong
// codes is only ever answered with the lock once it holds.
func TestSecondFactorLockGrows(t *testing.T) {
	t.Parallel()
	e := setup(t, withSecretsKey(t))
	e.enrolled(t)
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute}
	for i := range 4 {
		_, err := e.loginWithCode("000000")
		require.Equal(t, identity.ReasonTOTPInvalid, reason(t, err), "free wrong code %d", i+1)
	}
	for _, d := range want {
		_, err := e.loginWithCode("000000")
		require.Equal(t, identity.ReasonTOTPInvalid, reason(t, err))
		_, err = e.loginWithCode("000000")
		require.Equal(t, d, lockedFor(t, err))
		e.clock.Advance(d)
	}
	require.Equal(t, 8, e.count(t, `SELECT totp_failures FROM admin_users WHERE username = 'admin'`))
}

// Recovery codes draw on the same budget as TOTP codes: five wrong ones
// lock out the TOTP code as well. An operator's unlock-2fa lifts the lock
// at once (audited) and keeps the factor; a right recovery code sets the
// count back as a right TOTP code does.
func TestRecoveryCodesShareTheSecondFactorBudget(t *testing.T) {
	t.Parallel()
	e := setup(t, withSecretsKey(t))
	ctx := context.Background()
	secret, recovery := e.enrolled(t)
	for range 5 {
		_, err := e.loginWithCode("AAAA-BBBB-CCCC-DDDD")
		requireCode(t, connect.CodeUnauthenticated, err)
		require.Equal(t, identity.ReasonTOTPInvalid, reason(t, err))
	}
	_, err := e.loginWithCode(codeAt(t, secret, e.clock.Now().Add(30*time.Second)))
	lockedFor(t, err)
	require.Equal(t, 5, e.count(t, `SELECT count(*) FROM audit_log WHERE action = $1 AND after->>'kind' = 'recovery_code'`, identity.ActionSecondFactorFailed))

	op := identity.Operator{DB: e.app.Pool(), By: "cli:ops@host", Clock: e.clock.Now}
	had, err := op.UnlockSecondFactor(ctx, "admin")
	require.NoError(t, err)
	require.True(t, had)
	had, err = op.UnlockSecondFactor(ctx, "admin")
	require.NoError(t, err)
	require.False(t, had)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = $1 AND actor_id = 'cli:ops@host'`, identity.ActionSecondFactorUnlocked))

	// Four wrong, then a right recovery code: the count is back to 0, so
	// four more wrong codes still lock nothing.
	for range 4 {
		_, err = e.loginWithCode("000000")
		require.Equal(t, identity.ReasonTOTPInvalid, reason(t, err))
	}
	_, err = e.loginWithCode(recovery[1])
	require.NoError(t, err)
	require.Equal(t, 0, e.count(t, `SELECT totp_failures FROM admin_users WHERE username = 'admin'`))
	for range 4 {
		_, err = e.loginWithCode("000000")
		require.Equal(t, identity.ReasonTOTPInvalid, reason(t, err))
	}
	e.clock.Advance(30 * time.Second)
	_, err = e.loginWithCode(codeAt(t, secret, e.clock.Now()))
	require.NoError(t, err, "unlocked, the TOTP code signs in")
}

// Wrong codes sent at once are counted one by one under the row lock: of
// 16 concurrent guesses exactly five are judged, the others are refused
// unjudged.
func TestConcurrentSecondFactorGuessesAreEachCounted(t *testing.T) {
	t.Parallel()
	e := setup(t, withSecretsKey(t))
	e.enrolled(t)
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() { _, errs[i] = e.loginWithCode("000000") })
	}
	wg.Wait()
	judged, locked := 0, 0
	for _, err := range errs {
		switch connect.CodeOf(err) {
		case connect.CodeUnauthenticated:
			require.Equal(t, identity.ReasonTOTPInvalid, reason(t, err))
			judged++
		case connect.CodeResourceExhausted:
			lockedFor(t, err)
			locked++
		default:
			t.Fatalf("unexpected answer %v", err)
		}
	}
	require.Equal(t, 5, judged)
	require.Equal(t, 11, locked)
	require.Equal(t, 5, e.count(t, `SELECT count(*) FROM audit_log WHERE action = $1`, identity.ActionSecondFactorFailed))
}

// Enrolling needs the password at both steps: without it the request is
// invalid, with a wrong one it is permission_denied, and neither stores a
// secret, confirms one, writes an audit row or ends a session.
func TestTOTPEnrolmentNeedsThePassword(t *testing.T) {
	t.Parallel()
	e := setup(t, withSecretsKey(t))
	ctx := context.Background()
	session := e.adminLogin(t).Value

	_, err := e.identity.StartTotpEnrolment(ctx, req(&identitypb.StartTotpEnrolmentRequest{}, cookie(session)))
	requireCode(t, connect.CodeInvalidArgument, err)
	_, err = e.identity.StartTotpEnrolment(ctx, req(&identitypb.StartTotpEnrolmentRequest{Password: "wrong-password"}, cookie(session)))
	requireCode(t, connect.CodePermissionDenied, err)
	require.Zero(t, e.count(t, `SELECT count(*) FROM admin_users WHERE totp_secret IS NOT NULL`))
	require.Zero(t, e.count(t, `SELECT count(*) FROM audit_log WHERE action LIKE 'admin.totp%'`))

	started, err := e.identity.StartTotpEnrolment(ctx, req(&identitypb.StartTotpEnrolmentRequest{Password: bootstrapPassword}, cookie(session)))
	require.NoError(t, err)
	code := codeAt(t, started.Msg.GetSecret(), e.clock.Now())
	_, err = e.identity.ConfirmTotpEnrolment(ctx, req(&identitypb.ConfirmTotpEnrolmentRequest{Code: code}, cookie(session)))
	requireCode(t, connect.CodeInvalidArgument, err)
	_, err = e.identity.ConfirmTotpEnrolment(ctx, req(&identitypb.ConfirmTotpEnrolmentRequest{Code: code, Password: "wrong-password"}, cookie(session)))
	requireCode(t, connect.CodePermissionDenied, err)
	require.Zero(t, e.count(t, `SELECT count(*) FROM admin_users WHERE totp_confirmed_at IS NOT NULL`))
	require.Zero(t, e.count(t, `SELECT count(*) FROM admin_recovery_codes`))
	require.Zero(t, e.count(t, `SELECT count(*) FROM audit_log WHERE action = $1`, identity.ActionTOTPConfirmed))
	_, err = e.me(cookie(session))
	require.NoError(t, err, "the session goes on")
	_, err = e.loginWithCode("")
	require.NoError(t, err, "the password alone still signs in")
}

// [admin].api_key_max_lifetime_days bounds keys made before it was set:
// a key without an expiry is refused once it is older than the maximum,
// and ListAdminApiKeys shows that effective expiry.
func TestAdminAPIKeyMaxLifetimeBoundsOlderKeys(t *testing.T) {
	t.Parallel()
	e := setup(t, withConfig(func(c *config.Config) { c.Admin.APIKeyMaxLifetimeDays = 30 }))
	ctx := context.Background()
	session := e.adminLogin(t).Value
	key, err := e.identity.CreateAdminApiKey(ctx, req(&identitypb.CreateAdminApiKeyRequest{Name: "old", Scope: "read"}, cookie(session)))
	require.NoError(t, err)
	// As if made before the maximum was set: no expiry of its own.
	_, err = e.app.Pool().Exec(ctx, `UPDATE admin_api_keys SET expires_at = NULL`)
	require.NoError(t, err)
	created, err := time.Parse(time.RFC3339, key.Msg.GetApiKey().GetCreatedAt())
	require.NoError(t, err)

	list := func() *identitypb.AdminApiKey {
		res, err := e.identity.ListAdminApiKeys(ctx, req(&identitypb.ListAdminApiKeysRequest{Pagination: &identitypb.PageRequest{}}, cookie(e.adminLogin(t).Value)))
		require.NoError(t, err)
		require.Len(t, res.Msg.GetApiKeys(), 1)
		return res.Msg.GetApiKeys()[0]
	}
	require.Equal(t, created.Add(30*24*time.Hour).UTC().Format(time.RFC3339), list().GetExpiresAt())

	e.clock.Advance(30*24*time.Hour - time.Minute)
	_, err = e.me(apiKey(key.Msg.GetKey()))
	require.NoError(t, err, "within the maximum")
	e.clock.Advance(2 * time.Minute)
	_, err = e.me(apiKey(key.Msg.GetKey()))
	requireCode(t, connect.CodeUnauthenticated, err)
}
