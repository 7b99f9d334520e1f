package app_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/testdb"
)

// adminKey is an admin API key the test created, with its id.
type adminKey struct {
	id   string
	cred credential
}

// newAdminKey creates an admin API key of scope with the admin session.
func newAdminKey(t *testing.T, baseURL string, session credential, scope string) adminKey {
	t.Helper()
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, baseURL)
	res, err := ids.CreateAdminApiKey(context.Background(), with(&identitypb.CreateAdminApiKeyRequest{Name: scope + " automation", Scope: scope}, session))
	require.NoError(t, err)
	require.Regexp(t, `^ak_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$`, res.Msg.GetKey())
	require.Equal(t, scope, res.Msg.GetApiKey().GetScope())
	return adminKey{id: res.Msg.GetApiKey().GetId(), cred: apiKey(res.Msg.GetKey())}
}

// Every procedure of every service, as the generated descriptors list
// them, has a permission; every one an admin may call has the scope an
// admin API key needs in app.AdminKeyScopes, and the table names nothing
// else. A new procedure without a scope fails here (and is refused to every
// key meanwhile).
func TestEveryAdminProcedureHasAnAPIKeyScope(t *testing.T) {
	t.Parallel()
	policy, err := app.Policy()
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, p := range billingProcedures(t) {
		seen[p.path] = true
		access, ok := policy[p.path]
		require.True(t, ok, "%s has no permission in the policy", p.path)
		need, scoped := app.AdminKeyScopes[p.path]
		switch access {
		case auth.AdminOnly, auth.Authenticated:
			require.True(t, scoped, "%s: an admin may call it, but app.AdminKeyScopes gives it no scope", p.path)
			require.Contains(t, []auth.Scope{auth.ScopeRead, auth.ScopeOperate, auth.ScopeAdmin, auth.ScopeSession}, need, p.path)
		default:
			require.False(t, scoped, "%s is %s: no admin key scope applies", p.path, access)
		}
	}
	for proc := range app.AdminKeyScopes {
		require.True(t, seen[proc], "app.AdminKeyScopes names %s, which no service offers", proc)
	}
}

// The permission matrix of admin API keys: every procedure of every
// service, called with a key of each scope, a revoked key and the session.
// A key whose scope covers the procedure gets whatever the operation
// answers (never Unauthenticated or PermissionDenied); any other key gets
// PermissionDenied — and so does every key on customers' own operations
// and on managing keys, passwords and sessions. A revoked key is
// Unauthenticated everywhere.
func TestAdminAPIKeyScopesOnEveryProcedure(t *testing.T) {
	t.Parallel()
	r := start(t, testConfig(testdb.URL(t)))
	c := login(t, r)
	keys := map[string]adminKey{}
	for _, scope := range []string{"read", "operate", "admin"} {
		keys[scope] = newAdminKey(t, r.baseURL, c.admin, scope)
	}
	revoked := newAdminKey(t, r.baseURL, c.admin, "admin")
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, r.baseURL)
	_, err := ids.RevokeAdminApiKey(context.Background(), with(&identitypb.RevokeAdminApiKeyRequest{Id: revoked.id}, c.admin))
	require.NoError(t, err)

	policy, err := app.Policy()
	require.NoError(t, err)
	refusals := []string{"unauthenticated", "permission_denied"}
	checked := 0
	for _, p := range billingProcedures(t) {
		access := policy[p.path]
		if access == auth.Public {
			continue
		}
		for name, k := range keys {
			scope, _ := auth.ParseScope(name)
			code, msg := callRaw(t, r.baseURL, p.path, k.cred, true, []byte("{}"))
			if access != auth.CustomerOnly && scope.Covers(app.AdminKeyScopes[p.path]) {
				require.NotContains(t, refusals, code, "%s with a %s key: %s", p.path, name, msg)
			} else {
				require.Equal(t, "permission_denied", code, "%s with a %s key: %s", p.path, name, msg)
			}
			checked++
		}
		code, msg := callRaw(t, r.baseURL, p.path, revoked.cred, true, []byte("{}"))
		require.Equal(t, "unauthenticated", code, "%s with a revoked key: %s", p.path, msg)
		if p.path == "/billing.identity.IdentityService/Logout" {
			continue // it would end the session the loop goes on with
		}
		code, msg = callRaw(t, r.baseURL, p.path, c.admin, true, []byte("{}"))
		if access == auth.CustomerOnly {
			require.Equal(t, "permission_denied", code, "%s with the session: %s", p.path, msg)
		} else {
			require.NotContains(t, refusals, code, "%s with the session: %s", p.path, msg)
		}
	}
	require.Greater(t, checked, 150)

	me, err := ids.GetMe(context.Background(), with(&identitypb.GetMeRequest{}, keys["operate"].cred))
	require.NoError(t, err)
	require.Equal(t, "admin", me.Msg.GetRole())
	require.Equal(t, "api_key", me.Msg.GetCredential())
	require.Equal(t, "operate", me.Msg.GetScope())
	require.Equal(t, "admin", me.Msg.GetUsername(), "a key acts as the admin who created it")
}

// Every audit row a call with an admin API key writes names the key (actor
// api_key, the key's id), not the admin it acts as: an admin key adjusting
// a balance, an operate key refunding a payment.
func TestEveryAuditRowOfAnAdminKeysCallNamesTheKey(t *testing.T) {
	t.Parallel()
	r := start(t, testConfig(testdb.URL(t)))
	c := login(t, r)
	ctx := context.Background()
	adminK := newAdminKey(t, r.baseURL, c.admin, "admin")
	operateK := newAdminKey(t, r.baseURL, c.admin, "operate")
	tagged := func(cr credential, requestID string) credential {
		return func(h http.Header) { cr(h); h.Set("X-Request-Id", requestID) }
	}
	actors := func(requestID string) [][2]string {
		rows, err := r.app.Pool().Query(ctx, `SELECT DISTINCT actor_kind, actor_id FROM audit_log WHERE request_id = $1`, requestID)
		require.NoError(t, err)
		defer rows.Close()
		var out [][2]string
		for rows.Next() {
			var a [2]string
			require.NoError(t, rows.Scan(&a[0], &a[1]))
			out = append(out, a)
		}
		require.NoError(t, rows.Err())
		return out
	}

	admins := identitypbconnect.NewCustomerAdminServiceClient(http.DefaultClient, r.baseURL)
	_, err := admins.AdjustBalance(ctx, with(&identitypb.AdjustBalanceRequest{CustomerId: c.customerID.String(), Amount: "50.00", Note: "goodwill"}, tagged(adminK.cred, "key-adjust")))
	require.NoError(t, err)
	require.Equal(t, [][2]string{{"api_key", adminK.id}}, actors("key-adjust"))

	orders := orderpbconnect.NewOrderServiceClient(http.DefaultClient, r.baseURL)
	product, err := orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{Name: "VPS", Price: "12.30", Currency: "CNY"}, tagged(adminK.cred, "key-product")))
	require.NoError(t, err)
	require.Equal(t, [][2]string{{"api_key", adminK.id}}, actors("key-product"))
	order, err := orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: product.Msg.GetProduct().GetId()}, c.customer))
	require.NoError(t, err)
	paid, err := orders.PayWithBalance(ctx, with(&orderpb.PayWithBalanceRequest{OrderId: order.Msg.GetOrder().GetId()}, c.customer))
	require.NoError(t, err)

	payments := paymentpbconnect.NewPaymentServiceClient(http.DefaultClient, r.baseURL)
	_, err = payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: paid.Msg.GetPayment().GetId(), Reason: "automation"}, tagged(operateK.cred, "key-refund")))
	require.NoError(t, err)
	got := actors("key-refund")
	require.NotEmpty(t, got)
	require.Equal(t, [][2]string{{"api_key", operateK.id}}, got)

	// The key's own records name the admin who created and revoked it.
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, r.baseURL)
	list, err := ids.ListAdminApiKeys(ctx, with(&identitypb.ListAdminApiKeysRequest{Pagination: &identitypb.PageRequest{}}, c.admin))
	require.NoError(t, err)
	require.Len(t, list.Msg.GetApiKeys(), 2)
	require.True(t, slices.ContainsFunc(list.Msg.GetApiKeys(), func(k *identitypb.AdminApiKey) bool {
		return k.GetId() == operateK.id && k.GetAdminUsername() == "admin" && k.GetPrefix() == "ak_"+k.GetId()[0:8]+k.GetId()[9:13]+k.GetId()[14:18]+k.GetId()[19:23]+k.GetId()[24:]
	}))
}
