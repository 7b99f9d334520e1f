package app_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// credential decorates a request with one caller's credential.
type credential func(http.Header)

func bearer(token string) credential {
	return func(h http.Header) { h.Set("Authorization", "Bearer "+token) }
}
func apiKey(key string) credential { return func(h http.Header) { h.Set("X-Api-Key", key) } }
func cookie(c string) credential   { return func(h http.Header) { h.Set("Cookie", c) } }
func nobody(http.Header)           {}

func with[T any](msg *T, c credential) *connect.Request[T] {
	r := connect.NewRequest(msg)
	c(r.Header())
	return r
}

// callers logs in every kind of caller the permission matrix walks.
type callers struct {
	customer, other, key, admin credential
	customerID, otherID         uuid.UUID
}

func login(t testing.TB, r *running) callers {
	t.Helper()
	ctx := context.Background()
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, r.baseURL)
	admins := identitypbconnect.NewCustomerAdminServiceClient(http.DefaultClient, r.baseURL)

	register := func(email string) (string, uuid.UUID) {
		res, err := ids.Register(ctx, connect.NewRequest(&identitypb.RegisterRequest{Email: email, Password: "long enough password", Name: email}))
		require.NoError(t, err)
		return res.Msg.GetAccessToken(), uuid.MustParse(res.Msg.GetCustomer().GetId())
	}
	var c callers
	var aliceToken, bobToken string
	aliceToken, c.customerID = register("alice@example.com")
	bobToken, c.otherID = register("bob@example.com")
	c.customer, c.other = bearer(aliceToken), bearer(bobToken)

	res, err := ids.AdminLogin(ctx, connect.NewRequest(&identitypb.AdminLoginRequest{Username: "admin", Password: "bootstrap-password"}))
	require.NoError(t, err)
	setCookie := res.Header().Get("Set-Cookie")
	require.NotEmpty(t, setCookie)
	c.admin = cookie(strings.SplitN(setCookie, ";", 2)[0])

	_, err = admins.SetCanCreateApiKeys(ctx, with(&identitypb.SetCanCreateApiKeysRequest{CustomerId: c.customerID.String(), Allowed: true}, c.admin))
	require.NoError(t, err)
	key, err := ids.CreateApiKey(ctx, with(&identitypb.CreateApiKeyRequest{Name: "matrix"}, c.customer))
	require.NoError(t, err)
	c.key = apiKey(key.Msg.GetKey())
	return c
}

// allowed is the expectation for a caller that passes the permission check:
// whatever the operation answers, it is not an authentication or permission
// refusal.
const allowed connect.Code = 0

func TestPermissionMatrixOfEveryPaymentProcedure(t *testing.T) {
	t.Parallel()
	r := start(t, testConfig(testdb.URL(t)))
	c := login(t, r)
	gw := testfixture.GatewayInterface(t, r.app.Pool(), "epay")
	alicePayment := testfixture.InsertPayment(t, r.app.Pool(), testfixture.Payment{Customer: c.customerID, Gateway: gw}).String()

	client := paymentpbconnect.NewPaymentServiceClient(http.DefaultClient, r.baseURL)
	ctx := context.Background()
	calls := map[string]func(credential) error{
		"CreatePayment": func(cr credential) error {
			_, err := client.CreatePayment(ctx, with(&paymentpb.CreatePaymentRequest{OrderId: uuid.NewString(), GatewayInterfaceId: gw.String(), ReturnUrl: "https://shop.example/done"}, cr))
			return err
		},
		"ListPayments": func(cr credential) error {
			_, err := client.ListPayments(ctx, with(&paymentpb.ListPaymentsRequest{Pagination: &paymentpb.PageRequest{}}, cr))
			return err
		},
		"GetPayment": func(cr credential) error {
			_, err := client.GetPayment(ctx, with(&paymentpb.GetPaymentRequest{Id: alicePayment}, cr))
			return err
		},
		"QueryPaymentStatus": func(cr credential) error {
			_, err := client.QueryPaymentStatus(ctx, with(&paymentpb.QueryPaymentStatusRequest{PaymentId: alicePayment}, cr))
			return err
		},
		"HandleCallback": func(cr credential) error {
			_, err := client.HandleCallback(ctx, with(&paymentpb.PaymentCallbackRequest{GatewayInterfaceId: gw.String(), Payload: "a=b"}, cr))
			return err
		},
		"RefundPayment": func(cr credential) error {
			_, err := client.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: alicePayment}, cr))
			return err
		},
		"ListSavedPaymentMethods": func(cr credential) error {
			_, err := client.ListSavedPaymentMethods(ctx, with(&paymentpb.ListSavedPaymentMethodsRequest{CustomerId: c.customerID.String()}, cr))
			return err
		},
		"RemoveSavedPaymentMethod": func(cr credential) error {
			_, err := client.RemoveSavedPaymentMethod(ctx, with(&paymentpb.RemoveSavedPaymentMethodRequest{Id: uuid.NewString()}, cr))
			return err
		},
		"SetAutoCharge": func(cr credential) error {
			_, err := client.SetAutoCharge(ctx, with(&paymentpb.SetAutoChargeRequest{OrderId: uuid.NewString()}, cr))
			return err
		},
		"GetAutoCharge": func(cr credential) error {
			_, err := client.GetAutoCharge(ctx, with(&paymentpb.GetAutoChargeRequest{OrderId: uuid.NewString()}, cr))
			return err
		},
	}
	unauth, denied := connect.CodeUnauthenticated, connect.CodePermissionDenied
	type row struct{ none, customer, other, key, admin connect.Code }
	matrix := map[string]row{
		"CreatePayment":      {unauth, allowed, allowed, allowed, allowed},
		"ListPayments":       {unauth, allowed, allowed, allowed, allowed},
		"GetPayment":         {unauth, allowed, denied, allowed, allowed},
		"QueryPaymentStatus": {unauth, denied, denied, denied, allowed},
		"HandleCallback":     {allowed, allowed, allowed, allowed, allowed},
		"RefundPayment":      {unauth, denied, denied, denied, allowed},
		// Saved cards: the customer's own; another's list is denied, another's
		// card or order is NotFound (the operations' scoping).
		"ListSavedPaymentMethods":  {unauth, allowed, denied, allowed, allowed},
		"RemoveSavedPaymentMethod": {unauth, allowed, allowed, allowed, allowed},
		"SetAutoCharge":            {unauth, allowed, allowed, allowed, allowed},
		"GetAutoCharge":            {unauth, allowed, allowed, allowed, allowed},
	}

	// The matrix covers every procedure of the service: a new operation
	// cannot be added without deciding who may call it.
	methods := paymentpb.File_billing_payment_payment_proto.Services().ByName("PaymentService").Methods()
	require.Equal(t, methods.Len(), len(matrix))
	for i := range methods.Len() {
		name := string(methods.Get(i).Name())
		require.Contains(t, matrix, name)
		require.Contains(t, calls, name)
	}

	for name, want := range matrix {
		for _, tc := range []struct {
			who  string
			cred credential
			want connect.Code
		}{
			{"no credential", nobody, want.none},
			{"customer", c.customer, want.customer},
			{"other customer", c.other, want.other},
			{"api key", c.key, want.key},
			{"admin", c.admin, want.admin},
		} {
			err := calls[name](tc.cred)
			got := connect.CodeOf(err)
			if tc.want == allowed {
				require.NotContains(t, []connect.Code{unauth, denied}, got, "%s as %s: %v", name, tc.who, err)
				continue
			}
			require.Equal(t, tc.want, got, "%s as %s: %v", name, tc.who, err)
		}
	}

	// Scoping beyond the permission check: a customer's list holds only their own.
	res, err := client.ListPayments(ctx, with(&paymentpb.ListPaymentsRequest{Pagination: &paymentpb.PageRequest{}}, c.other))
	require.NoError(t, err)
	require.Zero(t, res.Msg.GetMeta().GetTotal(), "bob sees none of alice's payments")
	res, err = client.ListPayments(ctx, with(&paymentpb.ListPaymentsRequest{Pagination: &paymentpb.PageRequest{}}, c.key))
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Msg.GetMeta().GetTotal(), "alice's API key sees alice's payment")
}

func TestLoginIsRateLimitedPerIPThroughTheWholeStack(t *testing.T) {
	t.Parallel()
	cfg := testConfig(testdb.URL(t))
	cfg.RateLimit.Enabled = true
	r := start(t, cfg)
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, r.baseURL)

	// Ten logins at once from one IP: the burst of five passes to the
	// password check, the rest are refused before it (one more may pass for
	// every 200 ms the burst takes to arrive).
	const n = 10
	codes := make([]connect.Code, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			_, err := ids.Login(context.Background(), connect.NewRequest(&identitypb.LoginRequest{Email: "nobody@example.com", Password: "wrong password"}))
			codes[i] = connect.CodeOf(err)
		})
	}
	wg.Wait()
	spread := time.Since(start)
	var passed, refused int
	for _, c := range codes {
		switch c {
		case connect.CodeUnauthenticated:
			passed++
		case connect.CodeResourceExhausted:
			refused++
		default:
			t.Fatalf("unexpected code %v", c)
		}
	}
	require.GreaterOrEqual(t, passed, 5)
	require.LessOrEqual(t, passed, 5+int(spread/(200*time.Millisecond))+1)
	require.Positive(t, refused)
}
