package app_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	integrationpb "github.com/rustbill/paymentd/gen/billing/integration"
	"github.com/rustbill/paymentd/gen/billing/integration/integrationpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/testdb"
)

// pluginDir is a plugin directory of the test's own with the shipped gateway
// plugins (bank_transfer, epay) copied in.
func pluginDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "gateway"), 0o755))
	for _, name := range []string{"bank_transfer.lua", "epay.lua"} {
		src, err := os.ReadFile(filepath.Join("..", "..", "plugins", "gateway", name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "gateway", name), src, 0o644))
	}
	return dir
}

func mustStruct(t testing.TB, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	require.NoError(t, err)
	return s
}

type gatewayClients struct {
	admin       gatewaypbconnect.GatewayAdminServiceClient
	methods     gatewaypbconnect.PaymentMethodServiceClient
	integration integrationpbconnect.IntegrationServiceClient
}

func startWithPlugins(t *testing.T, dir string) (*running, callers, gatewayClients) {
	t.Helper()
	cfg := testConfig(testdb.URL(t))
	cfg.Plugins.Dir = dir
	r := start(t, cfg)
	return r, login(t, r), gatewayClients{
		admin:       gatewaypbconnect.NewGatewayAdminServiceClient(http.DefaultClient, r.baseURL),
		methods:     gatewaypbconnect.NewPaymentMethodServiceClient(http.DefaultClient, r.baseURL),
		integration: integrationpbconnect.NewIntegrationServiceClient(http.DefaultClient, r.baseURL),
	}
}

func TestGatewayAdminServiceIsForAdminsOnlyAndPaymentMethodsForEveryone(t *testing.T) {
	t.Parallel()
	_, c, cl := startWithPlugins(t, pluginDir(t))
	ctx := context.Background()
	id := uuid.NewString()
	admin := map[string]func(credential) error{
		"ListPlugins": func(cr credential) error {
			_, err := cl.admin.ListPlugins(ctx, with(&gatewaypb.ListPluginsRequest{}, cr))
			return err
		},
		"GetPlugin": func(cr credential) error {
			_, err := cl.admin.GetPlugin(ctx, with(&gatewaypb.GetPluginRequest{Name: "epay"}, cr))
			return err
		},
		"ReloadPlugins": func(cr credential) error {
			_, err := cl.admin.ReloadPlugins(ctx, with(&gatewaypb.ReloadPluginsRequest{}, cr))
			return err
		},
		"GetPluginAdminPage": func(cr credential) error {
			_, err := cl.admin.GetPluginAdminPage(ctx, with(&gatewaypb.GetPluginAdminPageRequest{Name: "epay"}, cr))
			return err
		},
		"EnablePlugin": func(cr credential) error {
			_, err := cl.admin.EnablePlugin(ctx, with(&gatewaypb.EnablePluginRequest{Name: "epay"}, cr))
			return err
		},
		"DisablePlugin": func(cr credential) error {
			// A plugin that does not exist: the test's other calls need epay.
			_, err := cl.admin.DisablePlugin(ctx, with(&gatewaypb.DisablePluginRequest{Name: "no-such-plugin"}, cr))
			return err
		},
		"CreateGatewayInterface": func(cr credential) error {
			_, err := cl.admin.CreateGatewayInterface(ctx, with(&gatewaypb.CreateGatewayInterfaceRequest{PluginName: "bank_transfer", DisplayName: "x"}, cr))
			return err
		},
		"UpdateGatewayInterface": func(cr credential) error {
			_, err := cl.admin.UpdateGatewayInterface(ctx, with(&gatewaypb.UpdateGatewayInterfaceRequest{Id: id}, cr))
			return err
		},
		"EnableGatewayInterface": func(cr credential) error {
			_, err := cl.admin.EnableGatewayInterface(ctx, with(&gatewaypb.EnableGatewayInterfaceRequest{Id: id}, cr))
			return err
		},
		"DisableGatewayInterface": func(cr credential) error {
			_, err := cl.admin.DisableGatewayInterface(ctx, with(&gatewaypb.DisableGatewayInterfaceRequest{Id: id}, cr))
			return err
		},
		"ListGatewayInterfaces": func(cr credential) error {
			_, err := cl.admin.ListGatewayInterfaces(ctx, with(&gatewaypb.ListGatewayInterfacesRequest{Pagination: &paymentpb.PageRequest{}}, cr))
			return err
		},
		"GetGatewayInterface": func(cr credential) error {
			_, err := cl.admin.GetGatewayInterface(ctx, with(&gatewaypb.GetGatewayInterfaceRequest{Id: id}, cr))
			return err
		},
		"TestGatewayInterface": func(cr credential) error {
			_, err := cl.admin.TestGatewayInterface(ctx, with(&gatewaypb.TestGatewayInterfaceRequest{Id: id}, cr))
			return err
		},
		"ConfirmBankTransfer": func(cr credential) error {
			_, err := cl.admin.ConfirmBankTransfer(ctx, with(&gatewaypb.ConfirmBankTransferRequest{PaymentId: id, Reference: "REF"}, cr))
			return err
		},
	}
	// The table covers every procedure of the service.
	methods := gatewaypb.File_billing_gateway_gateway_proto.Services().ByName("GatewayAdminService").Methods()
	require.Equal(t, methods.Len(), len(admin))
	for i := range methods.Len() {
		require.Contains(t, admin, string(methods.Get(i).Name()))
	}

	unauth, denied := connect.CodeUnauthenticated, connect.CodePermissionDenied
	for name, call := range admin {
		require.Equal(t, unauth, connect.CodeOf(call(nobody)), "%s anonymous", name)
		require.Equal(t, denied, connect.CodeOf(call(c.customer)), "%s as customer", name)
		require.Equal(t, denied, connect.CodeOf(call(c.key)), "%s with an API key", name)
		err := call(c.admin)
		require.NotContains(t, []connect.Code{unauth, denied}, connect.CodeOf(err), "%s as admin: %v", name, err)
	}

	listMethods := func(cr credential) error {
		_, err := cl.methods.ListPaymentMethods(ctx, with(&gatewaypb.ListPaymentMethodsRequest{}, cr))
		return err
	}
	require.Equal(t, unauth, connect.CodeOf(listMethods(nobody)))
	for _, cr := range []credential{c.customer, c.key, c.admin} {
		require.NoError(t, listMethods(cr))
	}

	breakers := func(cr credential) error {
		_, err := cl.integration.ListCircuitBreakers(ctx, with(&integrationpb.ListCircuitBreakersRequest{}, cr))
		return err
	}
	require.Equal(t, unauth, connect.CodeOf(breakers(nobody)))
	require.Equal(t, denied, connect.CodeOf(breakers(c.customer)))
	require.Equal(t, denied, connect.CodeOf(breakers(c.key)))
	require.NoError(t, breakers(c.admin))
}

func TestGatewayInterfacesOverTheWire(t *testing.T) {
	t.Parallel()
	dir := pluginDir(t)
	// A broken plugin next to the good ones: disabled alone, error visible.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gateway", "broken.lua"), []byte("function version()\n  return \"1.0.0\"\nend end\n"), 0o644))
	_, c, cl := startWithPlugins(t, dir)
	ctx := context.Background()

	broken, err := cl.admin.GetPlugin(ctx, with(&gatewaypb.GetPluginRequest{Name: "broken"}, c.admin))
	require.NoError(t, err)
	require.Equal(t, "error", broken.Msg.GetPlugin().GetStatus())
	require.Contains(t, broken.Msg.GetPlugin().GetLastError(), "line 3")
	epay, err := cl.admin.GetPlugin(ctx, with(&gatewaypb.GetPluginRequest{Name: "epay"}, c.admin))
	require.NoError(t, err)
	p := epay.Msg.GetPlugin()
	require.Equal(t, "loaded", p.GetStatus())
	require.Regexp(t, `^[0-9]+\.[0-9]+\.[0-9]+$`, p.GetLoadedVersion())
	require.Equal(t, p.GetVersion(), p.GetLoadedVersion(), "the stored definition is the version that runs")
	require.Equal(t, p.GetSha256(), p.GetLoadedSha256())
	require.Equal(t, true, p.GetConfigSchema().AsMap()["properties"].(map[string]any)["key"].(map[string]any)["x-secret"])
	require.False(t, p.GetHasAdminPage())

	// Validation names the key.
	_, err = cl.admin.CreateGatewayInterface(ctx, with(&gatewaypb.CreateGatewayInterfaceRequest{
		PluginName: "epay", DisplayName: "Alipay", Config: mustStruct(t, map[string]any{"api_url": "https://pay.example.com/", "pid": "1001"}),
	}, c.admin))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	require.ErrorContains(t, err, "config.key: is required")
	_, err = cl.admin.CreateGatewayInterface(ctx, with(&gatewaypb.CreateGatewayInterfaceRequest{PluginName: "broken", DisplayName: "Broken"}, c.admin))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)

	created, err := cl.admin.CreateGatewayInterface(ctx, with(&gatewaypb.CreateGatewayInterfaceRequest{
		PluginName: "epay", DisplayName: "Alipay",
		Config: mustStruct(t, map[string]any{"api_url": "https://pay.example.com/", "pid": "1001", "key": "merchant-secret"}),
	}, c.admin))
	require.NoError(t, err)
	epayID := created.Msg.GetGatewayInterface().GetId()
	require.NotEmpty(t, epayID)
	require.Equal(t, "********", created.Msg.GetGatewayInterface().GetConfig().AsMap()["key"])

	// The mask sent back keeps the secret while the endpoint stays; reads
	// never show it. A moved endpoint needs the secret again.
	upd, err := cl.admin.UpdateGatewayInterface(ctx, with(&gatewaypb.UpdateGatewayInterfaceRequest{
		Id: epayID, Config: mustStruct(t, map[string]any{"api_url": "https://pay.example.com/", "pid": "1002", "key": "********"}),
	}, c.admin))
	require.NoError(t, err)
	require.Equal(t, "1002", upd.Msg.GetGatewayInterface().GetConfig().AsMap()["pid"])
	_, err = cl.admin.UpdateGatewayInterface(ctx, with(&gatewaypb.UpdateGatewayInterfaceRequest{
		Id: epayID, Config: mustStruct(t, map[string]any{"api_url": "https://pay2.example.com/", "pid": "1002", "key": "********"}),
	}, c.admin))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	upd, err = cl.admin.UpdateGatewayInterface(ctx, with(&gatewaypb.UpdateGatewayInterfaceRequest{
		Id: epayID, Config: mustStruct(t, map[string]any{"api_url": "https://pay2.example.com/", "pid": "1002", "key": "merchant-secret"}),
	}, c.admin))
	require.NoError(t, err)
	require.Equal(t, "https://pay2.example.com/", upd.Msg.GetGatewayInterface().GetConfig().AsMap()["api_url"])
	gw, err := cl.admin.GetGatewayInterface(ctx, with(&gatewaypb.GetGatewayInterfaceRequest{Id: epayID}, c.admin))
	require.NoError(t, err)
	require.Equal(t, "********", gw.Msg.GetGatewayInterface().GetConfig().AsMap()["key"])
	list, err := cl.admin.ListGatewayInterfaces(ctx, with(&gatewaypb.ListGatewayInterfacesRequest{Pagination: &paymentpb.PageRequest{}}, c.admin))
	require.NoError(t, err)
	require.EqualValues(t, 1, list.Msg.GetMeta().GetTotal())
	require.NotContains(t, list.Msg.String(), "merchant-secret")

	bank, err := cl.admin.CreateGatewayInterface(ctx, with(&gatewaypb.CreateGatewayInterfaceRequest{
		PluginName: "bank_transfer", DisplayName: "Bank transfer",
		Config: mustStruct(t, map[string]any{"bank_name": "Example Bank", "account_name": "Rustbill Ltd", "account_number": "DE89 3704", "currencies": []any{"CNY"}}),
	}, c.admin))
	require.NoError(t, err)
	bankID := bank.Msg.GetGatewayInterface().GetId()
	test, err := cl.admin.TestGatewayInterface(ctx, with(&gatewaypb.TestGatewayInterfaceRequest{Id: bankID}, c.admin))
	require.NoError(t, err)
	require.True(t, test.Msg.GetOk(), test.Msg.GetMessage())

	// Customers see enabled interfaces only, without config.
	methods := func() []*gatewaypb.PaymentMethod {
		res, err := cl.methods.ListPaymentMethods(ctx, with(&gatewaypb.ListPaymentMethodsRequest{}, c.customer))
		require.NoError(t, err)
		return res.Msg.GetPaymentMethods()
	}
	require.Empty(t, methods(), "interfaces start disabled")
	_, err = cl.admin.EnableGatewayInterface(ctx, with(&gatewaypb.EnableGatewayInterfaceRequest{Id: bankID}, c.admin))
	require.NoError(t, err)
	got := methods()
	require.Len(t, got, 1)
	require.Equal(t, &gatewaypb.PaymentMethod{Id: bankID, DisplayName: "Bank transfer", PluginName: "bank_transfer", Currencies: []string{"CNY"}}, got[0])
	_, err = cl.admin.EnableGatewayInterface(ctx, with(&gatewaypb.EnableGatewayInterfaceRequest{Id: epayID}, c.admin))
	require.NoError(t, err)
	require.Len(t, methods(), 2)
	_, err = cl.admin.DisableGatewayInterface(ctx, with(&gatewaypb.DisableGatewayInterfaceRequest{Id: epayID}, c.admin))
	require.NoError(t, err)
	require.Len(t, methods(), 1)

	// A reload after fixing the broken file reports it.
	good, err := os.ReadFile(filepath.Join(dir, "gateway", "bank_transfer.lua"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gateway", "broken.lua"), good, 0o644))
	rel, err := cl.admin.ReloadPlugins(ctx, with(&gatewaypb.ReloadPluginsRequest{}, c.admin))
	require.NoError(t, err)
	require.EqualValues(t, 3, rel.Msg.GetFiles())
	require.Len(t, rel.Msg.GetChanges(), 1)
	require.Equal(t, "broken", rel.Msg.GetChanges()[0].GetName())
	require.Equal(t, "upgraded", rel.Msg.GetChanges()[0].GetChange(), "its first good file defines it")
}

func TestListCircuitBreakersShowsAnOpenBreaker(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	t.Cleanup(down.Close)
	_, c, cl := startWithPlugins(t, pluginDir(t))
	ctx := context.Background()

	created, err := cl.admin.CreateGatewayInterface(ctx, with(&gatewaypb.CreateGatewayInterfaceRequest{
		PluginName: "epay", DisplayName: "Down",
		Config: mustStruct(t, map[string]any{"api_url": down.URL + "/", "pid": "1001", "key": "k"}),
	}, c.admin))
	require.NoError(t, err)
	id := created.Msg.GetGatewayInterface().GetId()

	// test_config sends a GET (3 attempts each): the fifth failure opens the
	// host's breaker, after which calls fail at once.
	for range 2 {
		res, err := cl.admin.TestGatewayInterface(ctx, with(&gatewaypb.TestGatewayInterfaceRequest{Id: id}, c.admin))
		require.NoError(t, err)
		require.False(t, res.Msg.GetOk())
	}
	res, err := cl.admin.TestGatewayInterface(ctx, with(&gatewaypb.TestGatewayInterfaceRequest{Id: id}, c.admin))
	require.NoError(t, err)
	require.Contains(t, res.Msg.GetMessage(), "circuit open")
	require.EqualValues(t, 5, hits.Load(), "nothing is sent while the breaker is open")

	list, err := cl.integration.ListCircuitBreakers(ctx, with(&integrationpb.ListCircuitBreakersRequest{}, c.admin))
	require.NoError(t, err)
	host := strings.TrimPrefix(down.URL, "http://")
	var found *integrationpb.CircuitBreaker
	for _, b := range list.Msg.GetCircuitBreakers() {
		if b.GetHost() == host {
			found = b
		}
	}
	require.NotNil(t, found, "breakers: %v", list.Msg.GetCircuitBreakers())
	require.Equal(t, "open", found.GetState())
	require.EqualValues(t, 5, found.GetRecentFailures())
	require.NotEmpty(t, found.GetOpenedAt())
	require.NotEmpty(t, found.GetNextProbe())
}
