package adminui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	"github.com/stretchr/testify/require"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/identity"
)

// TestConsoleTwoFactorEndToEnd enrols the admin in two-factor sign-in in
// Chromium, as [admin].require_2fa makes it: after the password the console
// shows only the enrolment (whatever address is asked for), with the
// service's QR code and the otpauth URL; the test reads the secret from the
// URL on the page, computes the codes in Go (github.com/pquerna/otp, behind
// a small HTTP helper the browser run calls), confirms, gets 10 recovery
// codes and no way to turn 2FA off, goes on to the dashboard, logs out, and
// signs in again with the password and the next code. The service then
// holds a confirmed, sealed secret and the audit rows of each step; the
// test's own password-only session was refused everything but enrolment
// and ended with the confirmation.
func TestConsoleTwoFactorEndToEnd(t *testing.T) {
	t.Parallel()
	s := startService(t, "/admin", func(c *config.Config) { c.Admin.Require2FA = true })
	payments := paymentpbconnect.NewPaymentServiceClient(s.admin, s.baseURL)
	_, err := payments.ListPayments(context.Background(), connect.NewRequest(&paymentpb.ListPaymentsRequest{}))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "a session without a second factor may only enrol: %v", err)
	require.Contains(t, err.Error(), "[admin].require_2fa")
	codes := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		steps, err := strconv.Atoi(r.URL.Query().Get("steps"))
		if err != nil {
			http.Error(w, "steps", http.StatusBadRequest)
			return
		}
		code, err := totp.GenerateCodeCustom(r.URL.Query().Get("secret"), time.Now().Add(time.Duration(steps)*30*time.Second),
			totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprint(w, code)
	}))
	t.Cleanup(codes.Close)
	fx := fixture{Mode: "totp", BaseURL: s.baseURL, AdminPath: "/admin", Username: "admin", Password: adminPassword, TOTPCodeURL: codes.URL}
	runBrowser(t, fx)

	_, err = payments.ListPayments(context.Background(), connect.NewRequest(&paymentpb.ListPaymentsRequest{}))
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "the confirmation ended every session started without the second factor: %v", err)

	ctx := context.Background()
	var sealed string
	var confirmed bool
	require.NoError(t, s.app.Pool().QueryRow(ctx, `SELECT totp_secret, totp_confirmed_at IS NOT NULL FROM admin_users WHERE username = 'admin'`).Scan(&sealed, &confirmed))
	require.True(t, confirmed)
	require.Regexp(t, `^enc:v1:e2e:`, sealed, "the secret is sealed at rest")
	for _, action := range []string{identity.ActionTOTPEnrolmentStarted, identity.ActionTOTPConfirmed} {
		var n int
		require.NoError(t, s.app.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = $1`, action).Scan(&n))
		require.Equal(t, 1, n, action)
	}
}
