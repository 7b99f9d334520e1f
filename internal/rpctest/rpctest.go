// Package rpctest serves one domain's Connect service to its transport
// tests (internal/order/orderrpc, internal/gateway/gatewayrpc,
// internal/event/eventrpc) the way paymentd mounts it: the server's handler
// options (validation, error mapping, panic recovery) and the service's
// access policy and API key scopes, over TLS with HTTP/2, so that the tests
// can call it over Connect and gRPC alike. The caller is named by a header
// that the test middleware turns into a principal (Admin, AdminKey,
// Customer), standing in for the credential layers of the identity service
// (internal/app tests those). It is test support, imported from _test files
// only; internal/architecture holds that no production package imports it.
package rpctest

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/server"
)

// PrincipalHeader carries Admin's, AdminKey's or Customer's name of the
// caller to the test middleware.
const PrincipalHeader = "X-Test-Principal"

// Serve serves the handler that mount builds from the handler options it is
// given (mount is a generated New…ServiceHandler with the service's handler
// bound), under policy and, for admin API keys, scopes (nil: a service no
// key may call), until the test ends. Its client speaks HTTP/2.
func Serve(t testing.TB, policy auth.Policy, scopes auth.Scopes, mount func(opts ...connect.HandlerOption) (string, http.Handler)) *httptest.Server {
	t.Helper()
	opts, err := server.HandlerOptions(server.Options{}, slog.New(slog.DiscardHandler), auth.NewInterceptor(policy, scopes))
	require.NoError(t, err)
	path, h := mount(opts...)
	mux := http.NewServeMux()
	mux.Handle(path, principal(h))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// principal puts the principal that PrincipalHeader names into the
// request's context.
func principal(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get(PrincipalHeader); v != "" {
			r = r.WithContext(auth.WithPrincipal(r.Context(), parse(v)))
		}
		next.ServeHTTP(w, r)
	})
}

// parse reads a name of Admin, AdminKey or Customer: a customer holds a
// token, an admin a session, or an API key of the scope named.
func parse(who string) auth.Principal {
	role, rest, _ := strings.Cut(who, ":")
	scope, id, isKey := strings.Cut(rest, ":")
	if !isKey {
		id = rest
	}
	p := auth.Principal{Role: auth.Role(role), ID: uuid.MustParse(id), Kind: auth.KindJWT}
	switch {
	case isKey:
		p.Kind, p.CredentialID = auth.KindAPIKey, "key-"+scope
		p.Scope, _ = auth.ParseScope(scope)
	case p.Role == auth.RoleAdmin:
		p.Kind = auth.KindSession
	}
	return p
}

// As is a request of msg made by who (Admin(id), AdminKey(id, scope),
// Customer(id), or "" for no one).
func As[T any](who string, msg *T) *connect.Request[T] {
	req := connect.NewRequest(msg)
	if who != "" {
		req.Header().Set(PrincipalHeader, who)
	}
	return req
}

// Admin names admin id, signed in with a session, to As.
func Admin(id uuid.UUID) string { return "admin:" + id.String() }

// AdminKey names an API key of admin id of scope to As.
func AdminKey(id uuid.UUID, scope auth.Scope) string {
	return "admin:" + scope.String() + ":" + id.String()
}

// Customer names customer id to As.
func Customer(id uuid.UUID) string { return "customer:" + id.String() }

// RequireCode requires err to be a Connect error of code want.
func RequireCode(t testing.TB, want connect.Code, err error, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	var ce *connect.Error
	require.True(t, errors.As(err, &ce), "want a connect error, got %v", err)
	require.Equal(t, want.String(), ce.Code().String(), append([]any{"%v"}, err)...)
}
