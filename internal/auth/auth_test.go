package auth_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/store"
)

// headerAuth authenticates a header of its own: "good:<uuid>" is valid,
// anything else present is invalid, "broken" cannot be checked.
type headerAuth struct {
	kind   auth.Kind
	header string
	role   auth.Role
	calls  int
}

func (h *headerAuth) Kind() auth.Kind { return h.kind }

func (h *headerAuth) Authenticate(_ context.Context, r *http.Request) (auth.Principal, error) {
	h.calls++
	v := r.Header.Get(h.header)
	switch {
	case v == "":
		return auth.Principal{}, auth.ErrNoCredential
	case v == "broken":
		return auth.Principal{}, errors.New("database down")
	case len(v) > 5 && v[:5] == "good:":
		return auth.Principal{Role: h.role, ID: uuid.MustParse(v[5:]), Kind: h.kind}, nil
	}
	return auth.Principal{}, &auth.Invalid{Reason: "expired"}
}

func chain(layers ...*headerAuth) (http.Handler, *auth.Principal, *bool) {
	var got auth.Principal
	var ok bool
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok = auth.FromContext(r.Context())
	})
	for i := len(layers) - 1; i >= 0; i-- {
		h = auth.Layer(layers[i], slog.New(slog.DiscardHandler))(h)
	}
	return h, &got, &ok
}

var (
	adminID    = uuid.MustParse("00000000-0000-4000-8000-00000000000a")
	customerID = uuid.MustParse("00000000-0000-4000-8000-00000000000c")
)

func layers() (*headerAuth, *headerAuth, *headerAuth) {
	return &headerAuth{kind: auth.KindSession, header: "Cookie-Session", role: auth.RoleAdmin},
		&headerAuth{kind: auth.KindJWT, header: "Authorization", role: auth.RoleCustomer},
		&headerAuth{kind: auth.KindAPIKey, header: "X-Api-Key", role: auth.RoleCustomer}
}

func TestLayersPassRequestsWithoutCredentialsThrough(t *testing.T) {
	t.Parallel()
	s, j, k := layers()
	h, _, ok := chain(s, j, k)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", nil))
	require.False(t, *ok)
	require.Equal(t, []int{1, 1, 1}, []int{s.calls, j.calls, k.calls}, "each layer looked once")
}

func TestFirstValidCredentialWinsInSpecOrder(t *testing.T) {
	t.Parallel()
	s, j, k := layers()
	h, got, ok := chain(s, j, k)
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Header.Set("Cookie-Session", "good:"+adminID.String())
	r.Header.Set("Authorization", "good:"+customerID.String())
	h.ServeHTTP(httptest.NewRecorder(), r)
	require.True(t, *ok)
	require.Equal(t, auth.KindSession, got.Kind)
	require.Equal(t, adminID, got.ID)
	require.Zero(t, j.calls, "later layers do not look once a principal is set")
}

func TestInvalidCredentialNeverFallsThroughToAWeakerOne(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"forged", "broken"} {
		s, j, k := layers()
		h, _, ok := chain(s, j, k)
		r := httptest.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set("Cookie-Session", bad)
		r.Header.Set("Authorization", "good:"+customerID.String())
		r.Header.Set("X-Api-Key", "good:"+customerID.String())
		h.ServeHTTP(httptest.NewRecorder(), r)
		require.False(t, *ok, bad)
		require.Zero(t, j.calls+k.calls, bad)
	}
}

func TestRejectedKindIsReported(t *testing.T) {
	t.Parallel()
	_, j, _ := layers()
	var kind auth.Kind
	var reason string
	h := auth.Layer(j, slog.New(slog.DiscardHandler))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind, reason, _ = auth.Rejected(r.Context())
	}))
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Header.Set("Authorization", "Bearer nope")
	h.ServeHTTP(httptest.NewRecorder(), r)
	require.Equal(t, auth.KindJWT, kind)
	require.Equal(t, "expired", reason)
}

func TestCheckCodes(t *testing.T) {
	t.Parallel()
	anon := context.Background()
	customer := auth.WithPrincipal(anon, auth.Principal{Role: auth.RoleCustomer, ID: customerID, Kind: auth.KindJWT})
	admin := auth.WithPrincipal(anon, auth.Principal{Role: auth.RoleAdmin, ID: adminID, Kind: auth.KindSession})
	tests := []struct {
		ctx    context.Context
		access auth.Access
		want   connect.Code // 0: allowed
	}{
		{anon, auth.Public, 0},
		{anon, auth.Authenticated, connect.CodeUnauthenticated},
		{anon, auth.AdminOnly, connect.CodeUnauthenticated},
		{anon, auth.CustomerOnly, connect.CodeUnauthenticated},
		{customer, auth.Authenticated, 0},
		{customer, auth.AdminOnly, connect.CodePermissionDenied},
		{customer, auth.CustomerOnly, 0},
		{admin, auth.AdminOnly, 0},
		{admin, auth.Authenticated, 0},
		{admin, auth.CustomerOnly, connect.CodePermissionDenied},
		{customer, auth.Access(99), connect.CodePermissionDenied},
	}
	for _, tt := range tests {
		err := auth.Check(tt.ctx, tt.access)
		if tt.want == 0 {
			require.NoError(t, err, tt.access.String())
			continue
		}
		require.Equal(t, tt.want, connect.CodeOf(err), tt.access.String())
	}
}

func TestUnlistedProcedureIsRefused(t *testing.T) {
	t.Parallel()
	ic := auth.NewInterceptor(auth.Policy{"/x.Y/Listed": auth.Public}, nil)
	called := false
	next := connect.UnaryFunc(func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) {
		called = true
		return nil, nil
	})
	admin := auth.WithPrincipal(context.Background(), auth.Principal{Role: auth.RoleAdmin, ID: adminID})
	req := connect.NewRequest(&struct{}{})
	_, err := ic.WrapUnary(next)(admin, req) // Spec().Procedure is "" for a bare request
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))
	require.False(t, called)
}

func TestCustomersSeeOnlyTheirOwn(t *testing.T) {
	t.Parallel()
	c := auth.Principal{Role: auth.RoleCustomer, ID: customerID}
	a := auth.Principal{Role: auth.RoleAdmin, ID: adminID}
	other := uuid.New()
	require.NoError(t, auth.CanAccessCustomer(c, customerID))
	require.True(t, apperr.Is(auth.CanAccessCustomer(c, other), apperr.PermissionDenied))
	require.NoError(t, auth.CanAccessCustomer(a, other))
	require.Equal(t, customerID, *auth.CustomerScope(c))
	require.Nil(t, auth.CustomerScope(a))
}

// Owned answers a read by id of one customer's row: the missing answer for
// a row that is not there, the read's own error for a failed read, the
// not-yours answer for another customer's row, and nil for its customer or
// an admin.
func TestOwnedAnswersEachCaseOfARead(t *testing.T) {
	t.Parallel()
	c := auth.Principal{Role: auth.RoleCustomer, ID: customerID}
	a := auth.Principal{Role: auth.RoleAdmin, ID: adminID}
	other := uuid.New()
	missing, notYours, broken := errors.New("missing"), errors.New("not yours"), errors.New("connection lost")
	require.Same(t, missing, auth.Owned(c, customerID, fmt.Errorf("read: %w", store.ErrNotFound), missing, notYours))
	require.Same(t, broken, auth.Owned(c, customerID, broken, missing, notYours))
	require.Same(t, notYours, auth.Owned(c, other, nil, missing, notYours))
	require.NoError(t, auth.Owned(c, customerID, nil, missing, notYours))
	require.NoError(t, auth.Owned(a, other, nil, missing, notYours))
}

// A credential that could not be checked (the database is down) is
// Unavailable, so a client retries instead of logging out; it never falls
// through to a later layer either.
func TestCredentialThatCouldNotBeCheckedIsUnavailable(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Header.Set("Cookie-Session", "broken")
	r.Header.Set("X-Api-Key", "good:"+customerID.String())
	err := checkThroughLayers(r)
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(err), "%v", err)
}

// checkThroughLayers sends r through the three credential layers and
// answers what auth.Check(Authenticated) said behind them.
func checkThroughLayers(r *http.Request) error {
	s, j, k := layers()
	var err error
	h := http.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err = auth.Check(r.Context(), auth.Authenticated)
	}))
	for _, l := range []*headerAuth{k, j, s} {
		h = auth.Layer(l, slog.New(slog.DiscardHandler))(h)
	}
	h.ServeHTTP(httptest.NewRecorder(), r)
	return err
}

// A credential whose check failed because the request itself ended (its
// client went away, its deadline passed) answers Canceled or
// DeadlineExceeded, not Unavailable: nothing is down, and a metric of
// Unavailable answers must not rise with impatient clients.
func TestCredentialUncheckedBecauseTheRequestEndedIsCanceledOrDeadlineExceeded(t *testing.T) {
	t.Parallel()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	late, cancelLate := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelLate()
	for _, tc := range []struct {
		ctx  context.Context
		want connect.Code
	}{{gone, connect.CodeCanceled}, {late, connect.CodeDeadlineExceeded}, {context.Background(), connect.CodeUnavailable}} {
		r := httptest.NewRequest(http.MethodPost, "/", nil).WithContext(tc.ctx)
		r.Header.Set("Cookie-Session", "broken")
		err := checkThroughLayers(r)
		require.Equal(t, tc.want, connect.CodeOf(err), "%v", err)
	}
}

func TestScopesNestAndNoKeyCoversASessionOnlyProcedure(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		key, need auth.Scope
		want      bool
	}{
		{auth.ScopeRead, auth.ScopeRead, true},
		{auth.ScopeRead, auth.ScopeOperate, false},
		{auth.ScopeOperate, auth.ScopeRead, true},
		{auth.ScopeOperate, auth.ScopeAdmin, false},
		{auth.ScopeAdmin, auth.ScopeOperate, true},
		{auth.ScopeAdmin, auth.ScopeSession, false},
		{auth.ScopeSession, auth.ScopeRead, false}, // no key has it
		{0, auth.ScopeRead, false},
		{auth.ScopeAdmin, 0, false},
	} {
		require.Equal(t, tt.want, tt.key.Covers(tt.need), "%s covers %s", tt.key, tt.need)
	}
	for _, name := range []string{"read", "operate", "admin"} {
		s, ok := auth.ParseScope(name)
		require.True(t, ok)
		require.Equal(t, name, s.String())
	}
	for _, name := range []string{"session", "", "Admin", "write"} {
		_, ok := auth.ParseScope(name)
		require.False(t, ok, name)
	}
}

// The interceptor refuses an admin API key the scope of a procedure does
// not cover, and every key a procedure missing from the table; sessions
// and customers are not asked about scopes.
func TestInterceptorChecksAnAdminKeysScope(t *testing.T) {
	t.Parallel()
	policy := auth.Policy{"/x.Y/Read": auth.AdminOnly, "/x.Y/Refund": auth.AdminOnly, "/x.Y/Unscoped": auth.AdminOnly, "/x.Y/Keys": auth.AdminOnly, "/x.Y/Me": auth.Authenticated}
	scopes := auth.Scopes{"/x.Y/Read": auth.ScopeRead, "/x.Y/Refund": auth.ScopeOperate, "/x.Y/Keys": auth.ScopeSession, "/x.Y/Me": auth.ScopeRead}
	ic := auth.NewInterceptor(policy, scopes)
	call := func(p auth.Principal, proc string) error {
		h := connect.NewUnaryHandler(proc, func(context.Context, *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
			return connect.NewResponse(&emptypb.Empty{}), nil
		}, connect.WithInterceptors(ic))
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
		}))
		defer srv.Close()
		_, err := connect.NewClient[emptypb.Empty, emptypb.Empty](srv.Client(), srv.URL+proc).CallUnary(context.Background(), connect.NewRequest(&emptypb.Empty{}))
		return err
	}
	key := func(s auth.Scope) auth.Principal {
		return auth.Principal{Role: auth.RoleAdmin, ID: adminID, Kind: auth.KindAPIKey, CredentialID: "k", Scope: s}
	}
	session := auth.Principal{Role: auth.RoleAdmin, ID: adminID, Kind: auth.KindSession}
	customerKey := auth.Principal{Role: auth.RoleCustomer, ID: customerID, Kind: auth.KindAPIKey}
	for _, tt := range []struct {
		who  auth.Principal
		proc string
		want connect.Code // 0: allowed
	}{
		{key(auth.ScopeRead), "/x.Y/Read", 0},
		{key(auth.ScopeRead), "/x.Y/Me", 0},
		{key(auth.ScopeRead), "/x.Y/Refund", connect.CodePermissionDenied},
		{key(auth.ScopeOperate), "/x.Y/Refund", 0},
		{key(auth.ScopeAdmin), "/x.Y/Refund", 0},
		{key(auth.ScopeAdmin), "/x.Y/Unscoped", connect.CodePermissionDenied},
		{key(auth.ScopeAdmin), "/x.Y/Keys", connect.CodePermissionDenied},
		{session, "/x.Y/Keys", 0},
		{session, "/x.Y/Unscoped", 0},
		{customerKey, "/x.Y/Me", 0},
	} {
		err := call(tt.who, tt.proc)
		if tt.want == 0 {
			require.NoError(t, err, "%s %s on %s", tt.who.Kind, tt.who.Scope, tt.proc)
			continue
		}
		require.Equal(t, tt.want, connect.CodeOf(err), "%s %s on %s: %v", tt.who.Kind, tt.who.Scope, tt.proc, err)
	}
}
