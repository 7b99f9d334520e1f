package app_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// startLogged is start with the app's log lines also kept (as JSON) for
// the test to read.
func startLogged(t *testing.T, cfg config.Config) (*running, *testkit.Logs) {
	t.Helper()
	logs := &testkit.Logs{}
	log := slog.New(slog.NewJSONHandler(io.MultiWriter(logs, t.Output()), nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return serve(t, cfg, ln, log), logs
}

// A NUL in a string field — which PostgreSQL cannot store — is refused at
// the edge as InvalidArgument naming the field, before any password check
// or handler: nothing is written, and nothing is logged as an ERROR (it
// used to answer Internal from the failed INSERT or SELECT).
func TestNULInAStringFieldIsInvalidArgumentAndChangesNothing(t *testing.T) {
	t.Parallel()
	cfg := testConfig(testdb.URL(t))
	cfg.Plugins.Dir = pluginDir(t)
	r, logs := startLogged(t, cfg)
	c := login(t, r)
	ctx := context.Background()
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, r.baseURL)
	_, orders, gateways := paymentClients(r.baseURL)
	state := func() string {
		var s string
		require.NoError(t, r.app.Pool().QueryRow(ctx, `SELECT concat_ws('|',
			(SELECT count(*) FROM customers), (SELECT count(*) FROM api_keys), (SELECT count(*) FROM products),
			(SELECT count(*) FROM sessions), (SELECT count(*) FROM gateway_interfaces), (SELECT count(*) FROM audit_log))`).Scan(&s))
		return s
	}
	before, logged := state(), len(logs.String())

	for _, tc := range []struct {
		name, field string
		call        func() error
	}{
		{"AdminLogin username", "username", func() error {
			_, err := ids.AdminLogin(ctx, connect.NewRequest(&identitypb.AdminLoginRequest{Username: "ad\x00min", Password: "bootstrap-password"}))
			return err
		}},
		{"Register name", "name", func() error {
			_, err := ids.Register(ctx, connect.NewRequest(&identitypb.RegisterRequest{Email: "nul@example.com", Password: "long enough password", Name: "Nu\x00l"}))
			return err
		}},
		{"Login email", "email", func() error {
			_, err := ids.Login(ctx, connect.NewRequest(&identitypb.LoginRequest{Email: "alice@example.com\x00", Password: "long enough password"}))
			return err
		}},
		{"CreateApiKey name", "name", func() error {
			_, err := ids.CreateApiKey(ctx, with(&identitypb.CreateApiKeyRequest{Name: "ci\x00"}, c.customer))
			return err
		}},
		{"CreateProduct name", "name", func() error {
			_, err := orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{Name: "\x00VPS", Price: "1.00", Currency: "CNY"}, c.admin))
			return err
		}},
		{"CreateProduct provider config", `provider_config.fields["token"].string_value`, func() error {
			plugin := "http_provider"
			_, err := orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{Name: "VPS", Price: "1.00", Currency: "CNY",
				ProviderPlugin: &plugin, ProviderConfig: mustStruct(t, map[string]any{"token": "t\x00"})}, c.admin))
			return err
		}},
		{"CreateGatewayInterface config key", `config.fields["pid\x00"]`, func() error {
			_, err := gateways.CreateGatewayInterface(ctx, with(&gatewaypb.CreateGatewayInterfaceRequest{PluginName: "epay", DisplayName: "Alipay",
				Config: mustStruct(t, map[string]any{"api_url": "https://pay.example/", "pid\x00": "1001", "key": "k"})}, c.admin))
			return err
		}},
	} {
		err := tc.call()
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%s: %v", tc.name, err)
		require.ErrorContains(t, err, "validation error: "+tc.field+": must not contain NUL characters", tc.name)
		require.Equal(t, before, state(), "%s changed something", tc.name)
	}
	// The same requests without the NUL work: the refusal is the NUL's.
	_, err := ids.AdminLogin(ctx, connect.NewRequest(&identitypb.AdminLoginRequest{Username: "admin", Password: "bootstrap-password"}))
	require.NoError(t, err)
	_, err = orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{Name: "VPS", Price: "1.00", Currency: "CNY"}, c.admin))
	require.NoError(t, err)

	require.NotContains(t, logs.String()[logged:], `"level":"ERROR"`)
}
