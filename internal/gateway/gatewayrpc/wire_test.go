package gatewayrpc_test

import (
	"context"
	"net/http"
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
	"github.com/rustbill/paymentd/internal/gatewaytest"
	"github.com/rustbill/paymentd/internal/rpctest"
)

// wireBundle is gatewaytest's bundle with its GatewayAdminService served by
// rpctest, with the service's policy, API key scopes and error mapping.
type wireBundle struct {
	*gatewaytest.Bundle
	admin gatewaypbconnect.GatewayAdminServiceClient
}

func setupWire(t *testing.T) *wireBundle {
	t.Helper()
	b := gatewaytest.Setup(t)
	srv := rpctest.Serve(t, gatewayrpc.Policy, app.AdminKeyScopes, func(opts ...connect.HandlerOption) (string, http.Handler) {
		return gatewaypbconnect.NewGatewayAdminServiceHandler(gatewayrpc.NewHandler(b.Svc, nil), opts...)
	})
	return &wireBundle{Bundle: b, admin: gatewaypbconnect.NewGatewayAdminServiceClient(srv.Client(), srv.URL)}
}

// as is a request of msg made by the bundle's admin as caller: "session"
// (signed in), "read" (an API key of scope read) or "admin" (a key of scope
// admin).
func as[T any](w *wireBundle, caller string, msg *T) *connect.Request[T] {
	who := rpctest.Admin(w.AdminID)
	if caller != "session" {
		scope, ok := auth.ParseScope(caller)
		if !ok {
			panic("no caller " + caller)
		}
		who = rpctest.AdminKey(w.AdminID, scope)
	}
	return rpctest.As(who, msg)
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
	w.Write(t, "gateway/sender.lua", sendingScript("1.0.0"))
	w.Scan(t)
	legit := newRecorder(t, http.StatusNotFound, "legit")
	listener := newRecorder(t, http.StatusNotFound, "listener")
	ctx := context.Background()

	created, err := w.admin.CreateGatewayInterface(ctx, as(w, "session", &gatewaypb.CreateGatewayInterfaceRequest{
		PluginName: "sender", DisplayName: "Sender",
		Config: mustStruct(t, map[string]any{"api_url": legit.URL, "pid": "1001", "key": "merchant-key-1"}),
	}))
	require.NoError(t, err)
	id := created.Msg.GetGatewayInterface().GetId()
	storedBefore := w.StoredConfig(t, uuid.MustParse(id))

	for name, cfg := range map[string]map[string]any{
		"mask":    {"api_url": listener.URL, "pid": "1001", "key": "********"},
		"omitted": {"api_url": listener.URL, "pid": "1001"},
	} {
		_, err := w.admin.UpdateGatewayInterface(ctx, as(w, "session", &gatewaypb.UpdateGatewayInterfaceRequest{Id: id, Config: mustStruct(t, cfg)}))
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%s: %v", name, err)
		require.ErrorContains(t, err, "config.api_url changed", name)
		require.ErrorContains(t, err, "send config.key again", name)
		require.NotContains(t, err.Error(), "merchant-key-1", name)
	}
	require.Equal(t, storedBefore, w.StoredConfig(t, uuid.MustParse(id)), "nothing changed in the database")
	require.Zero(t, w.auditRows(t, id, gateway.ActionInterfaceUpdate))

	// The test goes where the config still says: the listener hears nothing.
	_, err = w.admin.TestGatewayInterface(ctx, as(w, "session", &gatewaypb.TestGatewayInterfaceRequest{Id: id}))
	require.NoError(t, err)
	require.Empty(t, listener.requests())
	require.Len(t, legit.requests(), 1)
	require.Contains(t, legit.requests()[0], "key=merchant-key-1")

	// Sending the secret again with the new endpoint is accepted, and the
	// audit row says what changed, without the value.
	_, err = w.admin.UpdateGatewayInterface(ctx, as(w, "session", &gatewaypb.UpdateGatewayInterfaceRequest{Id: id,
		Config: mustStruct(t, map[string]any{"api_url": listener.URL, "pid": "1001", "key": "merchant-key-2"})}))
	require.NoError(t, err)
	after, raw := w.auditAfter(t, id, gateway.ActionInterfaceUpdate)
	require.Equal(t, []any{"api_url"}, after["endpoints_changed"])
	require.Equal(t, []any{"key"}, after["secrets_replaced"])
	require.NotContains(t, raw, "merchant-key")
	_, err = w.admin.TestGatewayInterface(ctx, as(w, "session", &gatewaypb.TestGatewayInterfaceRequest{Id: id}))
	require.NoError(t, err)
	require.Len(t, listener.requests(), 1)
	require.Contains(t, listener.requests()[0], "key=merchant-key-2", "the admin's own new key")

	// An unchanged endpoint keeps today's behaviour: the mask keeps the key.
	_, err = w.admin.UpdateGatewayInterface(ctx, as(w, "session", &gatewaypb.UpdateGatewayInterfaceRequest{Id: id,
		Config: mustStruct(t, map[string]any{"api_url": listener.URL, "pid": "1002", "key": "********"})}))
	require.NoError(t, err)
	after, _ = w.auditAfter(t, id, gateway.ActionInterfaceUpdate)
	require.Nil(t, after["endpoints_changed"])
	require.Nil(t, after["secrets_replaced"])
	require.Equal(t, "merchant-key-2", w.PluginConfig(t, w.Reg, uuid.MustParse(id))["key"])
}

// L1: the test's answer and its audit row never quote the upstream's
// answer, whether the plugin put it in its message or in an error.
func TestTestGatewayInterfaceNeverEchoesTheUpstreamAnswer(t *testing.T) {
	t.Parallel()
	w := setupWire(t)
	w.Write(t, "gateway/sender.lua", sendingScript("1.0.0"))
	w.Scan(t)
	const distinctive = "go_build_info{path=\"paymentd\",version=\"zq-distinctive-7731\"} 1"
	ctx := context.Background()
	for _, status := range []int{http.StatusOK, http.StatusInternalServerError} {
		upstream := newRecorder(t, status, distinctive)
		created, err := w.admin.CreateGatewayInterface(ctx, as(w, "session", &gatewaypb.CreateGatewayInterfaceRequest{
			PluginName: "sender", DisplayName: "Sender",
			Config: mustStruct(t, map[string]any{"api_url": upstream.URL, "pid": "1001", "key": "k"}),
		}))
		require.NoError(t, err)
		id := created.Msg.GetGatewayInterface().GetId()

		res, err := w.admin.TestGatewayInterface(ctx, as(w, "admin", &gatewaypb.TestGatewayInterfaceRequest{Id: id}))
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

		p, err := w.admin.GetPlugin(ctx, as(w, "read", &gatewaypb.GetPluginRequest{Name: "sender"}))
		require.NoError(t, err)
		require.NotContains(t, p.Msg.GetPlugin().GetLastError(), "zq-distinctive", "the plugin's last error")
	}
}

// The admin page is a read (scope read): the plugin gets the config as a
// read shows it, so a page that prints its config prints no secret.
func TestAdminPageGetsTheMaskedConfigForEveryCaller(t *testing.T) {
	t.Parallel()
	w := setupWire(t)
	w.Write(t, "gateway/echo.lua", echoScript())
	w.Scan(t)
	ctx := context.Background()
	created, err := w.admin.CreateGatewayInterface(ctx, as(w, "session", &gatewaypb.CreateGatewayInterfaceRequest{
		PluginName: "echo", DisplayName: "Echo",
		Config: mustStruct(t, map[string]any{"api_url": "https://pay.example/", "pid": "1001", "key": "merchant-key-1"}),
	}))
	require.NoError(t, err)
	id := created.Msg.GetGatewayInterface().GetId()

	for _, caller := range []string{"read", "admin", "session"} {
		page, err := w.admin.GetPluginAdminPage(ctx, as(w, caller, &gatewaypb.GetPluginAdminPageRequest{Name: "echo", GatewayInterfaceId: &id}))
		require.NoError(t, err, caller)
		require.NotContains(t, page.Msg.GetContent(), "merchant-key-1", caller)
		require.Contains(t, page.Msg.GetContent(), `"key":"********"`, caller)
		require.Contains(t, page.Msg.GetContent(), `"pid":"1001"`, caller)
	}
}
