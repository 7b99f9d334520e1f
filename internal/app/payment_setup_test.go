package app_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// payBundle is a running paymentd whose [server].public_url is its own
// address, with the shipped gateway plugins, an enabled epay interface
// talking to a fake epay gateway, a product, and logged-in callers.
type payBundle struct {
	r      *running
	c      callers
	fake   *epay.Server
	epayGW string
	// pluginDir is [plugins].dir.
	pluginDir string
	product   string
	payments  paymentpbconnect.PaymentServiceClient
	orders    orderpbconnect.OrderServiceClient
	admin     gatewaypbconnect.GatewayAdminServiceClient
}

// startOn is start with a listener chosen by the caller (and app options).
func startOn(t testing.TB, cfg config.Config, ln net.Listener, opts ...app.Option) *running {
	t.Helper()
	return serve(t, cfg, ln, logger(t), opts...)
}

func startPayments(t testing.TB, mutate ...func(*config.Config)) *payBundle {
	t.Helper()
	return startPaymentsWith(t, nil, mutate...)
}

// startPaymentsWith is startPayments with app options.
func startPaymentsWith(t testing.TB, opts []app.Option, mutate ...func(*config.Config)) *payBundle {
	t.Helper()
	fake := epay.New(epay.Options{NotifyScale: 0.0001})
	require.NoError(t, fake.Start())
	t.Cleanup(fake.Close)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := testConfig(testdb.URL(t))
	cfg.Plugins.Dir = pluginDir(t)
	cfg.Server.PublicURL = "http://" + ln.Addr().String()
	for _, m := range mutate {
		m(&cfg)
	}
	r := startOn(t, cfg, ln, opts...)
	e := &payBundle{
		r: r, c: login(t, r), fake: fake, pluginDir: cfg.Plugins.Dir,
		payments: paymentpbconnect.NewPaymentServiceClient(http.DefaultClient, r.baseURL),
		orders:   orderpbconnect.NewOrderServiceClient(http.DefaultClient, r.baseURL),
		admin:    gatewaypbconnect.NewGatewayAdminServiceClient(http.DefaultClient, r.baseURL),
	}
	e.epayGW = e.addGateway(t, "epay", "Alipay", e.epayConfig())
	prod, err := e.orders.CreateProduct(context.Background(), with(&orderpb.CreateProductRequest{Name: "VPS 1个月", Price: "12.30", Currency: "CNY"}, e.c.admin))
	require.NoError(t, err)
	e.product = prod.Msg.GetProduct().GetId()
	return e
}

// provisionWith makes the env's product one that http_provider provisions
// at prov (plan plan, when not empty), created through the API as an admin
// would, and returns its id.
func (e *payBundle) provisionWith(t testing.TB, prov interface {
	URL() string
	Token() string
}, plan string) string {
	t.Helper()
	cfg := map[string]any{"api_url": prov.URL(), "token": prov.Token()}
	if plan != "" {
		cfg["plan"] = plan
	}
	plugin := "http_provider"
	prod, err := e.orders.CreateProduct(context.Background(), with(&orderpb.CreateProductRequest{
		Name: "VPS 1G", Price: "12.30", Currency: "CNY", ProviderPlugin: &plugin, ProviderConfig: mustStruct(t, cfg),
	}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, plugin, prod.Msg.GetProduct().GetProviderPlugin())
	e.product = prod.Msg.GetProduct().GetId()
	return e.product
}

// order places a pending order of the product as alice.
func (e *payBundle) order(t testing.TB) string {
	t.Helper()
	o, err := e.orders.CreateOrder(context.Background(), with(&orderpb.CreateOrderRequest{ProductId: e.product}, e.c.customer))
	require.NoError(t, err)
	return o.Msg.GetOrder().GetId()
}

// dollarGateway adds a gateway that takes USD: epay.lua with its currency
// changed, as a stand-in for a gateway that books dollars, talking to the
// env's fake epay. It returns the enabled interface's id.
func (e *payBundle) dollarGateway(t testing.TB) string {
	t.Helper()
	return e.epayVariant(t, "epay_usd", func(src string) string {
		return strings.Replace(src, `local CURRENCY = "CNY"`, `local CURRENCY = "USD"`, 1)
	})
}

// epayVariant writes epay.lua as edited by edit to gateway/<name>.lua,
// reloads the plugins and returns the id of an enabled interface of it on
// the env's fake epay.
func (e *payBundle) epayVariant(t testing.TB, name string, edit func(src string) string) string {
	t.Helper()
	e.installGateway(t, "epay", name, func(src string) string {
		variant := edit(src)
		require.NotEqual(t, src, variant, "the edit must change the script")
		return variant
	})
	return e.addGateway(t, name, name, e.epayConfig())
}

// epayConfig is the configuration of an interface on the env's fake epay,
// as its default merchant.
func (e *payBundle) epayConfig() map[string]any {
	return map[string]any{"api_url": e.fake.URL() + "/", "pid": epay.DefaultPID, "key": epay.DefaultKey}
}

// installGateway writes the shipped plugins/gateway/<file>.lua (changed by
// edit, when not nil) to the env's plugin directory as gateway/<name>.lua
// and rescans, as a file dropped into [plugins].dir joins: the shared env
// ships bank_transfer and epay only.
func (e *payBundle) installGateway(t testing.TB, file, name string, edit func(src string) string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "plugins", "gateway", file+".lua"))
	require.NoError(t, err)
	if edit != nil {
		src = []byte(edit(string(src)))
	}
	require.NoError(t, os.WriteFile(filepath.Join(e.pluginDir, "gateway", name+".lua"), src, 0o644))
	_, err = e.admin.ReloadPlugins(context.Background(), with(&gatewaypb.ReloadPluginsRequest{}, e.c.admin))
	require.NoError(t, err)
}

// addGateway creates an interface of plugin, named name, with cfg as an
// admin does, and enables it; it returns the interface's id.
func (e *payBundle) addGateway(t testing.TB, plugin, name string, cfg map[string]any) string {
	t.Helper()
	ctx := context.Background()
	gw, err := e.admin.CreateGatewayInterface(ctx, with(&gatewaypb.CreateGatewayInterfaceRequest{
		PluginName: plugin, DisplayName: name, Config: mustStruct(t, cfg),
	}, e.c.admin))
	require.NoError(t, err)
	id := gw.Msg.GetGatewayInterface().GetId()
	_, err = e.admin.EnableGatewayInterface(ctx, with(&gatewaypb.EnableGatewayInterfaceRequest{Id: id}, e.c.admin))
	require.NoError(t, err)
	return id
}

// requireGatewayTestPasses runs the console's "Test" of interface id: the
// plugin reaches its gateway with the configuration it was given.
func (e *payBundle) requireGatewayTestPasses(t testing.TB, id string) {
	t.Helper()
	res, err := e.admin.TestGatewayInterface(context.Background(), with(&gatewaypb.TestGatewayInterfaceRequest{Id: id}, e.c.admin))
	require.NoError(t, err)
	require.True(t, res.Msg.GetOk(), res.Msg.GetMessage())
}

// createPaymentVia pays an order through the interface gw as alice.
func (e *payBundle) createPaymentVia(t testing.TB, orderID, gw string) *paymentpb.CreatePaymentResponse {
	t.Helper()
	res, err := e.payments.CreatePayment(context.Background(), with(&paymentpb.CreatePaymentRequest{
		OrderId: orderID, GatewayInterfaceId: gw, ReturnUrl: "https://shop.example/done",
	}, e.c.customer))
	require.NoError(t, err)
	return res.Msg
}

// createPayment pays an order through the epay interface as alice.
func (e *payBundle) createPayment(t testing.TB, orderID string) *paymentpb.CreatePaymentResponse {
	t.Helper()
	res, err := e.payments.CreatePayment(context.Background(), with(&paymentpb.CreatePaymentRequest{
		OrderId: orderID, GatewayInterfaceId: e.epayGW, ReturnUrl: "https://shop.example/done",
	}, e.c.customer))
	require.NoError(t, err)
	return res.Msg
}

// getPayment reads a payment as the admin; t may be an EventuallyWithT
// condition's collector.
func (e *payBundle) getPayment(t testkit.T, id string) *paymentpb.PaymentRecord {
	t.Helper()
	res, err := e.payments.GetPayment(context.Background(), with(&paymentpb.GetPaymentRequest{Id: id}, e.c.admin))
	require.NoError(t, err)
	return res.Msg.GetPayment()
}

func (e *payBundle) orderStatus(t *testing.T, id string) string {
	t.Helper()
	o, err := e.orders.GetOrder(context.Background(), with(&orderpb.GetOrderRequest{Id: id}, e.c.customer))
	require.NoError(t, err)
	return o.Msg.GetOrder().GetStatus()
}

// waitOrderStatus waits for the order to reach status (the event worker
// moves a paid order on asynchronously).
func (e *payBundle) waitOrderStatus(t *testing.T, id, status string) {
	t.Helper()
	// The condition runs in another goroutine: it reports to c, never to t.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		o, err := e.orders.GetOrder(context.Background(), with(&orderpb.GetOrderRequest{Id: id}, e.c.customer))
		require.NoError(c, err)
		assert.Equal(c, status, o.Msg.GetOrder().GetStatus(), "order %s", id)
	}, 10*time.Second, 20*time.Millisecond, "order %s never reached %s", id, status)
}

// count runs a count query; t may be an EventuallyWithT condition's
// collector.
func (e *payBundle) count(t testkit.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, e.r.app.Pool().QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// waitSettled waits until a payment is success.
func (e *payBundle) waitSettled(t *testing.T, id string) *paymentpb.PaymentRecord {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		res, err := e.payments.GetPayment(context.Background(), with(&paymentpb.GetPaymentRequest{Id: id}, e.c.admin))
		require.NoError(c, err)
		assert.Equal(c, "success", res.Msg.GetPayment().GetStatus(), "payment %s", id)
	}, 15*time.Second, 20*time.Millisecond, "payment %s never settled", id)
	return e.getPayment(t, id)
}

// signedNotify is an epay notification signed with the merchant key.
func signedNotify(paymentID, tradeNo, money string) string {
	return signedNotifyWith(paymentID, tradeNo, money, "TRADE_SUCCESS")
}

// signedNotifyWith is signedNotify with another trade_status.
func signedNotifyWith(paymentID, tradeNo, money, tradeStatus string) string {
	v := url.Values{}
	v.Set("pid", epay.DefaultPID)
	v.Set("trade_no", tradeNo)
	v.Set("out_trade_no", paymentID)
	v.Set("type", "alipay")
	v.Set("name", "VPS")
	v.Set("money", money)
	v.Set("trade_status", tradeStatus)
	v.Set("sign", epay.Sign(v, epay.DefaultKey))
	v.Set("sign_type", "MD5")
	return v.Encode()
}

func (e *payBundle) callback(payload string) error {
	_, err := e.payments.HandleCallback(context.Background(), connect.NewRequest(&paymentpb.PaymentCallbackRequest{
		GatewayInterfaceId: e.epayGW, Payload: payload,
	}))
	return err
}
