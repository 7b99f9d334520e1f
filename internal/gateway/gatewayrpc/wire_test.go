package gatewayrpc_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/gateway"
	"github.com/rustbill/paymentd/internal/gateway/gatewayrpc"
	"github.com/rustbill/paymentd/internal/rpc"
)

// wireBundle is the bundle's GatewayAdminService served over HTTP, with the
// service's policy, API key scopes and error mapping. The caller is named
// by a header the test's own interceptor reads (the real authentication is
// internal/app's): "session" (an admin signed in), "read" (an admin API key
// of scope read), "admin" (a key of scope admin).
type wireBundle struct {
	*bundle
	admin gatewaypbconnect.GatewayAdminServiceClient
}

const callerHeader = "X-Test-Caller"

func setupWire(t *testing.T) *wireBundle {
	t.Helper()
	b := setup(t)
	who := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			p := auth.Principal{Role: auth.RoleAdmin, ID: b.adminID, Kind: auth.KindSession}
			switch req.Header().Get(callerHeader) {
			case "read":
				p.Kind, p.CredentialID, p.Scope = auth.KindAPIKey, "key-read", auth.ScopeRead
			case "admin":
				p.Kind, p.CredentialID, p.Scope = auth.KindAPIKey, "key-admin", auth.ScopeAdmin
			}
			return next(auth.WithPrincipal(ctx, p), req)
		}
	})
	path, h := gatewaypbconnect.NewGatewayAdminServiceHandler(gatewayrpc.NewHandler(b.svc, nil),
		connect.WithInterceptors(who, auth.NewInterceptor(gatewayrpc.Policy, app.AdminKeyScopes), rpc.NewErrorInterceptor(nil)))
	mux := http.NewServeMux()
	mux.Handle(path, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &wireBundle{bundle: b, admin: gatewaypbconnect.NewGatewayAdminServiceClient(srv.Client(), srv.URL)}
}

// as is a request of msg made by caller ("session", "read", "admin").
func as[T any](caller string, msg *T) *connect.Request[T] {
	req := connect.NewRequest(msg)
	req.Header().Set(callerHeader, caller)
	return req
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	require.NoError(t, err)
	return s
}

// M3: an admin who may edit an interface's config but does not know its
// secret cannot move the endpoint and keep the secret: the stored key
// would go wherever the new URL points.
func TestChangedEndpointWithTheMaskIsRefusedAndTheKeyNeverReachesTheNewURL(t *testing.T) {
	t.Parallel()
	w := setupWire(t)
	w.write(t, "gateway/sender.lua", sendingScript("1.0.0"))
	w.scan(t)
	legit := newRecorder(t, http.StatusNotFound, "legit")
	listener := newRecorder(t, http.StatusNotFound, "listener")
	ctx := context.Background()

	created, err := w.admin.CreateGatewayInterface(ctx, as("session", &gatewaypb.CreateGatewayInterfaceRequest{
		PluginName: "sender", DisplayName: "Sender",
		Config: mustStruct(t, map[string]any{"api_url": legit.URL, "pid": "1001", "key": "merchant-key-1"}),
	}))
	require.NoError(t, err)
	id := created.Msg.GetGatewayInterface().GetId()
	storedBefore := w.storedConfig(t, uuid.MustParse(id))

	for name, cfg := range map[string]map[string]any{
		"mask":    {"api_url": listener.URL, "pid": "1001", "key": "********"},
		"omitted": {"api_url": listener.URL, "pid": "1001"},
	} {
		_, err := w.admin.UpdateGatewayInterface(ctx, as("session", &gatewaypb.UpdateGatewayInterfaceRequest{Id: id, Config: mustStruct(t, cfg)}))
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%s: %v", name, err)
		require.ErrorContains(t, err, "config.api_url changed", name)
		require.ErrorContains(t, err, "send config.key again", name)
		require.NotContains(t, err.Error(), "merchant-key-1", name)
	}
	require.Equal(t, storedBefore, w.storedConfig(t, uuid.MustParse(id)), "nothing changed in the database")
	require.Zero(t, w.auditRows(t, id, gateway.ActionInterfaceUpdate))

	// The test goes where the config still says: the listener hears nothing.
	_, err = w.admin.TestGatewayInterface(ctx, as("session", &gatewaypb.TestGatewayInterfaceRequest{Id: id}))
	require.NoError(t, err)
	require.Empty(t, listener.requests())
	require.Len(t, legit.requests(), 1)
	require.Contains(t, legit.requests()[0], "key=merchant-key-1")

	// Sending the secret again with the new endpoint is accepted, and the
	// audit row says what changed, without the value.
	_, err = w.admin.UpdateGatewayInterface(ctx, as("session", &gatewaypb.UpdateGatewayInterfaceRequest{Id: id,
		Config: mustStruct(t, map[string]any{"api_url": listener.URL, "pid": "1001", "key": "merchant-key-2"})}))
	require.NoError(t, err)
	after, raw := w.auditAfter(t, id, gateway.ActionInterfaceUpdate)
	require.Equal(t, []any{"api_url"}, after["endpoints_changed"])
	require.Equal(t, []any{"key"}, after["secrets_replaced"])
	require.NotContains(t, raw, "merchant-key")
	_, err = w.admin.TestGatewayInterface(ctx, as("session", &gatewaypb.TestGatewayInterfaceRequest{Id: id}))
	require.NoError(t, err)
	require.Len(t, listener.requests(), 1)
	require.Contains(t, listener.requests()[0], "key=merchant-key-2", "the admin's own new key")

	// An unchanged endpoint keeps today's behaviour: the mask keeps the key.
	_, err = w.admin.UpdateGatewayInterface(ctx, as("session", &gatewaypb.UpdateGatewayInterfaceRequest{Id: id,
		Config: mustStruct(t, map[string]any{"api_url": listener.URL, "pid": "1002", "key": "********"})}))
	require.NoError(t, err)
	after, _ = w.auditAfter(t, id, gateway.ActionInterfaceUpdate)
	require.Nil(t, after["endpoints_changed"])
	require.Nil(t, after["secrets_replaced"])
	require.Equal(t, "merchant-key-2", w.pluginConfig(t, w.reg, uuid.MustParse(id))["key"])
}

// L1: the test's answer and its audit row never quote the upstream's
// answer, whether the plugin put it in its message or in an error.
func TestTestGatewayInterfaceNeverEchoesTheUpstreamAnswer(t *testing.T) {
	t.Parallel()
	w := setupWire(t)
	w.write(t, "gateway/sender.lua", sendingScript("1.0.0"))
	w.scan(t)
	const distinctive = "go_build_info{path=\"paymentd\",version=\"zq-distinctive-7731\"} 1"
	ctx := context.Background()
	for _, status := range []int{http.StatusOK, http.StatusInternalServerError} {
		upstream := newRecorder(t, status, distinctive)
		created, err := w.admin.CreateGatewayInterface(ctx, as("session", &gatewaypb.CreateGatewayInterfaceRequest{
			PluginName: "sender", DisplayName: "Sender",
			Config: mustStruct(t, map[string]any{"api_url": upstream.URL, "pid": "1001", "key": "k"}),
		}))
		require.NoError(t, err)
		id := created.Msg.GetGatewayInterface().GetId()

		res, err := w.admin.TestGatewayInterface(ctx, as("admin", &gatewaypb.TestGatewayInterfaceRequest{Id: id}))
		require.NoError(t, err)
		require.NotEmpty(t, upstream.requests(), "the plugin did call the upstream")
		require.False(t, res.Msg.GetOk())
		require.NotContains(t, res.Msg.GetMessage(), "zq-distinctive", status)
		require.NotContains(t, res.Msg.GetMessage(), "go_build_info", status)
		require.Contains(t, res.Msg.GetMessage(), "withheld", status)

		after, raw := w.auditAfter(t, id, gateway.ActionInterfaceTest)
		require.NotContains(t, raw, "zq-distinctive", status)
		require.Equal(t, false, after["ok"])
		require.Equal(t, []any{strings.TrimPrefix(upstream.URL, "http://")}, after["hosts"])

		p, err := w.admin.GetPlugin(ctx, as("read", &gatewaypb.GetPluginRequest{Name: "sender"}))
		require.NoError(t, err)
		require.NotContains(t, p.Msg.GetPlugin().GetLastError(), "zq-distinctive", "the plugin's last error")
	}
}

// The admin page is a read (scope read): the plugin gets the config as a
// read shows it, so a page that prints its config prints no secret.
func TestAdminPageGetsTheMaskedConfigForEveryCaller(t *testing.T) {
	t.Parallel()
	w := setupWire(t)
	src, err := os.ReadFile(filepath.Join("testdata", "plugins", "echo_admin_page.lua"))
	require.NoError(t, err)
	w.write(t, "gateway/echo.lua", string(src))
	w.scan(t)
	ctx := context.Background()
	created, err := w.admin.CreateGatewayInterface(ctx, as("session", &gatewaypb.CreateGatewayInterfaceRequest{
		PluginName: "echo", DisplayName: "Echo",
		Config: mustStruct(t, map[string]any{"api_url": "https://pay.example/", "pid": "1001", "key": "merchant-key-1"}),
	}))
	require.NoError(t, err)
	id := created.Msg.GetGatewayInterface().GetId()

	for _, caller := range []string{"read", "admin", "session"} {
		page, err := w.admin.GetPluginAdminPage(ctx, as(caller, &gatewaypb.GetPluginAdminPageRequest{Name: "echo", GatewayInterfaceId: &id}))
		require.NoError(t, err, caller)
		require.NotContains(t, page.Msg.GetContent(), "merchant-key-1", caller)
		require.Contains(t, page.Msg.GetContent(), `"key":"********"`, caller)
		require.Contains(t, page.Msg.GetContent(), `"pid":"1001"`, caller)
	}
}
