package adminui_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/structpb"

	eventpb "github.com/rustbill/paymentd/gen/billing/event"
	"github.com/rustbill/paymentd/gen/billing/event/eventpbconnect"
	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/alipay"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/notify/notifytest"
	"github.com/rustbill/paymentd/internal/testdb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testdb.Main(m)) }

const adminPassword = "e2e-admin-password"

// fixture is what e2e/run.mjs reads: where the service is, the records the
// browser steps look for, and the figures the screens must show.
type fixture struct {
	Mode        string `json:"mode"` // full | smoke
	BaseURL     string `json:"baseURL"`
	AdminPath   string `json:"adminPath"`
	Username    string `json:"username"`
	Password    string `json:"password"`
	Screenshots string `json:"screenshots"`
	// DocsScreenshots is docs/screenshots/ when the run refreshes the
	// pictures the docs show (PAYMENTD_E2E_DOCS_SCREENSHOT=1); empty otherwise.
	DocsScreenshots string  `json:"docsScreenshots"`
	CustomerID      string  `json:"customerId"`
	PaidPayment     payment `json:"paidPayment"`
	PendingPayment  payment `json:"pendingPayment"`
	FailedPayment   payment `json:"failedPayment"`
	// ReturnedPayment is a second bank transfer whose order was cancelled
	// and whose transfer the test confirmed through the API before the
	// browser starts: captured money to return from the first screen on,
	// returned through the gateway by the browser.
	ReturnedPayment capturedPayment `json:"returnedPayment"`
	// OldestPayment is the first filler payment: the last row of the last
	// page of payments (newest first).
	OldestPayment        string `json:"oldestPayment"`
	RefundAmount         string `json:"refundAmount"`
	GatewayInterfaceName string `json:"gatewayInterfaceName"`
	// Currencies is [billing].currencies; the bank interface takes the first.
	Currencies      []string        `json:"currencies"`
	SecretInterface secretInterface `json:"secretInterface"`
	AlipayInterface alipayInterface `json:"alipayInterface"`
	TestPlugin      testPlugin      `json:"testPlugin"`
	FailedEventID   string          `json:"failedEventId"`
	// Disputes are the gateway ids of two disputes of the paid payment,
	// the nearer evidence deadline first.
	Disputes        []string  `json:"disputes"`
	NotifiedEventID string    `json:"notifiedEventId"`
	Dashboard       dashboard `json:"dashboard"`
	// ManualRefund is what the admin types when refunding the confirmed
	// bank transfer (pending: sent back by hand) and recording it.
	ManualRefund manualRefund `json:"manualRefund"`
	// DisableReason is what the admin gives when disabling the customer;
	// NewPassword what the admin changes their password to.
	DisableReason string `json:"disableReason"`
	NewPassword   string `json:"newPassword"`
	// AdminKeyName names the admin API key the browser creates and revokes.
	AdminKeyName string `json:"adminKeyName"`
	// TOTPCodeURL answers the current TOTP code of ?secret= (plus ?steps=
	// 30-second steps), computed in Go (mode totp).
	TOTPCodeURL string `json:"totpCodeURL,omitempty"`
	// Renewals is what the renewal screens must show (mode renewals).
	Renewals *renewalsFixture `json:"renewals,omitempty"`
	// Trends are GetPaymentTrends' answers (protojson) for the last 7, 30
	// and 90 days, keyed by the number of days (mode trends).
	Trends map[string]json.RawMessage `json:"trends,omitempty"`
	// Recurring is GetRecurringRevenue's answer (protojson) for the last
	// 30 days, in UTC.
	Recurring json.RawMessage `json:"recurring,omitempty"`
	// ExportPayments are the world's payments as the CSV export must list
	// them (in UTC, the browser's zone): oldest first, before the browser
	// changes any.
	ExportPayments []exportPayment `json:"exportPayments"`
	// customerToken and customerKey are the customer's credentials, which
	// the browser's sign-out everywhere (with the API keys) ends.
	customerToken, customerKey string
	// CallbackOut is a file the browser writes the callback URL it copied
	// from the secret interface's page into; the test then pays through
	// that interface at epay (a fake) and compares the notify URL it got.
	CallbackOut string `json:"callbackOut"`
	epay        *epay.Server
}

// manualRefund: the refund's reason, and the outcome recorded for it.
type manualRefund struct {
	Reason    string `json:"reason"`
	Reference string `json:"reference"`
	Note      string `json:"note"`
}

// exportPayment is one payment as its row of the CSV export reads.
type exportPayment struct {
	ID             string `json:"id"`
	CreatedAt      string `json:"created_at"`
	PaidAt         string `json:"paid_at"`
	Status         string `json:"status"`
	Amount         string `json:"amount"`
	RefundedAmount string `json:"refunded_amount"`
	Currency       string `json:"currency"`
	OrderID        string `json:"order_id"`
	CustomerID     string `json:"customer_id"`
}

// capturedPayment is a failed payment whose money was captured, and when
// (RFC 3339, the service's clock): the dashboard's oldest age is measured
// from it.
type capturedPayment struct {
	payment
	CapturedAt string `json:"capturedAt"`
}

type payment struct {
	ID       string `json:"id"`
	OrderID  string `json:"orderId"`
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// secretInterface is an epay interface whose merchant key must never reach
// the page.
type secretInterface struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	PID    string `json:"pid"`
	Secret string `json:"secret"`
}

// alipayInterface is an interface of the shipped alipay plugin: its form,
// made from the plugin's schema, shows the app and the Alipay public key,
// a checkbox for the QR mode, and never the app's private key.
type alipayInterface struct {
	Name      string `json:"name"`
	AppID     string `json:"appId"`
	PublicKey string `json:"publicKey"`
	Secret    string `json:"secret"` // a line of the private key's PEM
}

// testPlugin is a gateway plugin of the test's own whose admin_page()
// answers markup that must be shown as text.
type testPlugin struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Page    string `json:"page"`
}

// dashboard is what the dashboard must show for the world below.
type dashboard struct {
	TodayPayments int    `json:"todayPayments"`
	SuccessRate   string `json:"successRate"`
	Pending       int    `json:"pending"`
	// RefundsPending before the browser refunds anything.
	RefundsPending int      `json:"refundsPending"`
	ReceivedCNY    string   `json:"receivedCNY"`
	FailedEvents   int      `json:"failedEvents"`
	Nodes          []string `json:"nodes"`
	Leaders        []leader `json:"leaders"`
}

type leader struct {
	Role   string `json:"role"`
	Holder string `json:"holder"`
}

// service is a paymentd started the way cmd/paymentd starts it (app.New),
// on a free port and a fresh database.
type service struct {
	app     *app.App
	baseURL string
	admin   *http.Client // carries the admin session cookie
	// currencies is [billing].currencies, which a bank account's currency
	// list offers.
	currencies []string
}

// The test plugin: a gateway that works like any other, whose admin page is
// hostile markup (a script, an image whose onerror runs script).
const (
	testPluginName    = "e2e_page"
	testPluginVersion = "1.2.3"
	testPluginPage    = `<script>window.__pwned = "script"</script><img src="x" onerror="window.__pwned = 'img'"><b>bold?</b>`
)

var testPluginSource = `-- A gateway plugin of the console's browser test.
function version() return "` + testPluginVersion + `" end
function info(c, i) return json_encode({ display_name = "E2E page", supports_query = false, supports_refund = false }) end
function config_schema(c, i) return '{"type":"object","properties":{"note":{"type":"string"}}}' end
function create_payment(c, i) return json_encode({ payment_url = "", qr_code = "", instructions = "e2e", gateway_payment_id = "" }) end
function query_payment(c, i) return json_encode({ status = "pending" }) end
function parse_callback(c, i) return json_encode({ valid = false, reason = "e2e" }) end
function refund(c, i) return json_encode({ status = "failed", message = "e2e" }) end
function test_config(c, i) return json_encode({ ok = true, message = "e2e" }) end
function admin_page(c, i) return [==[` + testPluginPage + `]==] end
`

// pluginDir is a copy of the shipped plugins/ with the test plugin added.
func pluginDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, filepath.WalkDir("../plugins", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".lua" {
			return err
		}
		rel, err := filepath.Rel("../plugins", path)
		if err != nil {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), src, 0o644)
	}))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "gateway", testPluginName+".lua"), []byte(testPluginSource), 0o644))
	return dir
}

// startService starts paymentd on a free port and a fresh database, with
// the configuration the browser tests share, changed by configure.
func startService(t *testing.T, adminPath string, configure ...func(*config.Config)) *service {
	t.Helper()
	cfg := config.Default()
	cfg.DB.URL = testdb.URL(t)
	cfg.JWT.Secret = "e2e-secret-e2e-secret-e2e-secret-e2e!"
	cfg.Secrets = config.Secrets{Current: "e2e", Keys: map[string]string{"e2e": "ZTJlLXNlY3JldHMta2V5LTMyLWJ5dGVzLWxvbmchISE="}} // "e2e-secrets-key-32-bytes-long!!!"
	cfg.Bootstrap.AdminPassword = adminPassword
	cfg.Server.AdminPath = adminPath
	cfg.Server.ShutdownTimeout = 5 * time.Second
	cfg.RateLimit.Enabled = false // one browser and one test client share 127.0.0.1
	cfg.Plugins.Dir = pluginDir(t)
	// An operations webhook, so that handled events queue notifications.
	hook := notifytest.StartWebhook(t, "e2e-webhook-secret-0123456789")
	cfg.Notify.Webhooks = []config.NotifyWebhook{{Name: "ops", URL: hook.URL, Secret: hook.Secret}}
	cfg.Notify.PollInterval = 100 * time.Millisecond
	for _, c := range configure {
		c(&cfg)
	}
	require.NoError(t, cfg.Validate())

	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := app.New(context.Background(), cfg, log)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, ln) }()

	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	s := &service{app: a, baseURL: "http://" + ln.Addr().String(), admin: &http.Client{Jar: jar}, currencies: cfg.Billing.Currencies}
	t.Cleanup(func() {
		s.admin.CloseIdleConnections()
		http.DefaultClient.CloseIdleConnections()
		cancel()
		require.NoError(t, <-done)
		a.Close()
	})
	_, err = identitypbconnect.NewIdentityServiceClient(s.admin, s.baseURL).AdminLogin(context.Background(),
		connect.NewRequest(&identitypb.AdminLoginRequest{Username: "admin", Password: adminPassword}))
	require.NoError(t, err)
	return s
}

// bearer adds a customer's access token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// fillers is how many small payments come before the others: with them the
// payments list has two pages (20 a page).
const fillers = 23

// world creates through the API a customer with 23 small paid orders and
// then, newest last: an order paid from the balance (to refund), an order
// whose bank-transfer payment failed (the order was cancelled) and an order
// awaiting a bank transfer (to confirm); a bank-transfer interface, an epay
// interface holding a secret, and a failed event (SQL: no API makes an
// event fail on purpose). It waits for the background work the screens
// show (leaders, notifications) and returns what the screens must show.
func world(t *testing.T, s *service) fixture {
	t.Helper()
	ctx := context.Background()
	fx := fixture{
		Username: "admin", Password: adminPassword, RefundAmount: "10.00", GatewayInterfaceName: "Bank transfer (e2e)", Currencies: s.currencies,
		DisableReason: "chargeback under review (e2e)", NewPassword: "e2e-admin-new-password", AdminKeyName: "nightly reconciliation (e2e)",
		SecretInterface: secretInterface{Name: "Alipay (e2e)", PID: "1001", Secret: "e2e-merchant-secret-" + uuid.NewString()[:8]},
		TestPlugin:      testPlugin{Name: testPluginName, Version: testPluginVersion, Page: testPluginPage},
		ManualRefund: manualRefund{
			Reason: "the customer withdrew (e2e)", Reference: "E2E-SEPA-RETURN-0001", Note: "sent back from the operating account (e2e)",
		},
	}

	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, s.baseURL)
	reg, err := ids.Register(ctx, connect.NewRequest(&identitypb.RegisterRequest{
		Email: fmt.Sprintf("e2e-%s@example.com", uuid.NewString()[:8]), Password: "customer-password", Name: "E2E Customer",
	}))
	require.NoError(t, err)
	fx.CustomerID = reg.Msg.GetCustomer().GetId()
	fx.customerToken = reg.Msg.GetAccessToken()
	customer := &http.Client{Transport: bearer{reg.Msg.GetAccessToken()}}
	adminIDs := identitypbconnect.NewCustomerAdminServiceClient(s.admin, s.baseURL)
	_, err = adminIDs.SetCanCreateApiKeys(ctx, connect.NewRequest(&identitypb.SetCanCreateApiKeysRequest{CustomerId: fx.CustomerID, Allowed: true}))
	require.NoError(t, err)
	key, err := identitypbconnect.NewIdentityServiceClient(customer, s.baseURL).CreateApiKey(ctx, connect.NewRequest(&identitypb.CreateApiKeyRequest{Name: "e2e"}))
	require.NoError(t, err)
	fx.customerKey = key.Msg.GetKey()

	adminOrders := orderpbconnect.NewOrderServiceClient(s.admin, s.baseURL)
	newProduct := func(name, price string) string {
		p, err := adminOrders.CreateProduct(ctx, connect.NewRequest(&orderpb.CreateProductRequest{Name: name, Description: "e2e", Price: price, Currency: "CNY"}))
		require.NoError(t, err)
		return p.Msg.GetProduct().GetId()
	}
	vps, addon := newProduct("VPS S (e2e)", "99.00"), newProduct("IPv4 address (e2e)", "1.00")
	orders := orderpbconnect.NewOrderServiceClient(customer, s.baseURL)
	newOrder := func(product string) string {
		o, err := orders.CreateOrder(ctx, connect.NewRequest(&orderpb.CreateOrderRequest{ProductId: product}))
		require.NoError(t, err)
		return o.Msg.GetOrder().GetId()
	}
	payWithBalance := func(orderID string) string {
		paid, err := orders.PayWithBalance(ctx, connect.NewRequest(&orderpb.PayWithBalanceRequest{OrderId: orderID}))
		require.NoError(t, err)
		return paid.Msg.GetPayment().GetId()
	}
	_, err = identitypbconnect.NewCustomerAdminServiceClient(s.admin, s.baseURL).AdjustBalance(ctx, connect.NewRequest(&identitypb.AdjustBalanceRequest{
		CustomerId: fx.CustomerID, Amount: "500.00", Note: "e2e top-up",
	}))
	require.NoError(t, err)
	for i := range fillers {
		id := payWithBalance(newOrder(addon))
		if i == 0 {
			fx.OldestPayment = id
		}
	}

	// Paid from the balance: a successful payment to refund.
	paidOrder := newOrder(vps)
	fx.PaidPayment = payment{ID: payWithBalance(paidOrder), OrderID: paidOrder, Amount: "99.00", Currency: "CNY"}

	// A bank-transfer interface; a payment through it that failed because
	// its order was cancelled, and one awaiting the transfer.
	gateways := gatewaypbconnect.NewGatewayAdminServiceClient(s.admin, s.baseURL)
	createInterface := func(plugin, name string, cfg map[string]any) string {
		c, err := structpb.NewStruct(cfg)
		require.NoError(t, err)
		gi, err := gateways.CreateGatewayInterface(ctx, connect.NewRequest(&gatewaypb.CreateGatewayInterfaceRequest{PluginName: plugin, DisplayName: name, Config: c}))
		require.NoError(t, err)
		return gi.Msg.GetGatewayInterface().GetId()
	}
	bank := createInterface("bank_transfer", fx.GatewayInterfaceName,
		map[string]any{"bank_name": "E2E Bank", "account_name": "Rustbill Ltd", "account_number": "DE89 3704 0044 0532 0130 00", "currencies": []any{"CNY"}})
	_, err = gateways.EnableGatewayInterface(ctx, connect.NewRequest(&gatewaypb.EnableGatewayInterfaceRequest{Id: bank}))
	require.NoError(t, err)
	payments := paymentpbconnect.NewPaymentServiceClient(customer, s.baseURL)
	bankPayment := func(orderID string) payment {
		created, err := payments.CreatePayment(ctx, connect.NewRequest(&paymentpb.CreatePaymentRequest{
			OrderId: orderID, GatewayInterfaceId: bank, ReturnUrl: "https://shop.example.com/return",
		}))
		require.NoError(t, err)
		require.Equal(t, "pending", created.Msg.GetPayment().GetStatus())
		return payment{ID: created.Msg.GetPayment().GetId(), OrderID: orderID, Amount: "99.00", Currency: "CNY"}
	}
	cancelled := newOrder(vps)
	fx.FailedPayment = bankPayment(cancelled)
	_, err = orders.CancelOrder(ctx, connect.NewRequest(&orderpb.CancelOrderRequest{OrderId: cancelled}))
	require.NoError(t, err)
	// Another whose transfer arrived after its order was cancelled:
	// confirmed here, it is money to return when the browser starts.
	late := newOrder(vps)
	fx.ReturnedPayment.payment = bankPayment(late)
	_, err = orders.CancelOrder(ctx, connect.NewRequest(&orderpb.CancelOrderRequest{OrderId: late}))
	require.NoError(t, err)
	confirmed, err := gateways.ConfirmBankTransfer(ctx, connect.NewRequest(&gatewaypb.ConfirmBankTransferRequest{
		PaymentId: fx.ReturnedPayment.ID, Reference: "E2E-LATE-TRANSFER-0000",
	}))
	require.NoError(t, err)
	require.Equal(t, "failed", confirmed.Msg.GetPayment().GetStatus())
	require.Equal(t, fx.ReturnedPayment.Amount, confirmed.Msg.GetPayment().GetCapturedAmount())
	fx.ReturnedPayment.CapturedAt = confirmed.Msg.GetPayment().GetCapturedAt()
	require.NotEmpty(t, fx.ReturnedPayment.CapturedAt)
	fx.PendingPayment = bankPayment(newOrder(vps))

	// Every payment of the world, as the export lists them: oldest first
	// (ListPayments answers newest first, ties by id descending).
	list, err := paymentpbconnect.NewPaymentServiceClient(s.admin, s.baseURL).ListPayments(ctx, connect.NewRequest(&paymentpb.ListPaymentsRequest{
		Pagination: &paymentpb.PageRequest{PageSize: 100},
	}))
	require.NoError(t, err)
	require.Len(t, list.Msg.GetPayments(), fillers+4)
	for _, p := range slices.Backward(list.Msg.GetPayments()) {
		fx.ExportPayments = append(fx.ExportPayments, exportPayment{
			ID: p.GetId(), CreatedAt: utcSecond(t, p.GetCreatedAt()), PaidAt: utcSecond(t, p.GetPaidAt()), Status: p.GetStatus(),
			Amount: p.GetAmount(), RefundedAmount: p.GetRefundedAmount(), Currency: p.GetCurrency(), OrderID: p.GetOrderId(), CustomerID: fx.CustomerID,
		})
	}

	// An epay interface whose merchant key the console must never show.
	// Its gateway is a fake epay, which records the notify URL of each
	// payment: the test pays through it after the browser copied the
	// interface's callback URL.
	fx.epay = epay.New(epay.Options{Merchants: map[string]string{fx.SecretInterface.PID: fx.SecretInterface.Secret}})
	require.NoError(t, fx.epay.Start())
	t.Cleanup(fx.epay.Close)
	fx.SecretInterface.ID = createInterface("epay", fx.SecretInterface.Name,
		map[string]any{"api_url": fx.epay.URL() + "/", "pid": fx.SecretInterface.PID, "key": fx.SecretInterface.Secret})
	fx.CallbackOut = filepath.Join(t.TempDir(), "callback-url")

	// An alipay interface, its private key write-only.
	appKey, err := alipay.GenerateKey()
	require.NoError(t, err)
	appPEM := alipay.PrivateKeyPEM(appKey)
	fx.AlipayInterface = alipayInterface{
		Name: "支付宝 Open API (e2e)", AppID: alipay.DefaultAppID, PublicKey: alipay.PublicKeyPEM(&appKey.PublicKey),
		Secret: strings.Split(appPEM, "\n")[2],
	}
	createInterface("alipay", fx.AlipayInterface.Name, map[string]any{
		"app_id": fx.AlipayInterface.AppID, "seller_id": alipay.DefaultSellerID,
		"app_private_key": appPEM, "alipay_public_key": fx.AlipayInterface.PublicKey,
	})

	// A card the customer saved (through the bank interface here: the page
	// lists saved methods whatever their gateway), for the customer page.
	_, err = s.app.Pool().Exec(ctx, `INSERT INTO saved_payment_methods
		(id, customer_id, gateway_interface_id, gateway_customer_id, gateway_method_id, brand, last4, exp_month, exp_year, created_at)
		VALUES (gen_random_uuid(), $1, $2, 'cus_E2E', 'pm_E2E', 'visa', '4242', 7, 2031, now())`, fx.CustomerID, bank)
	require.NoError(t, err)

	// Two disputes of the paid payment, the later deadline written first:
	// the queue lists the nearer one first.
	for _, d := range []struct {
		id  string
		due time.Duration
	}{{"dp_E2E_later", 9 * 24 * time.Hour}, {"dp_E2E_sooner", 2 * 24 * time.Hour}} {
		_, err = s.app.Pool().Exec(ctx, `INSERT INTO disputes (payment_id, gateway_interface_id, gateway_dispute_id, amount, currency, reason, status, evidence_due_by)
			SELECT id, coalesce(gateway_interface_id, $4), $2, 10.00, currency, 'fraudulent', 'needs_response', now() + $3::interval FROM payments WHERE id = $1`,
			fx.PaidPayment.ID, d.id, fmt.Sprintf("%d seconds", int(d.due.Seconds())), bank)
		require.NoError(t, err)
	}
	fx.Disputes = []string{"dp_E2E_sooner", "dp_E2E_later"}

	// An event that used up its attempts, for the retry step.
	err = s.app.Pool().QueryRow(ctx, `INSERT INTO events (event_type, payload, status, order_id, attempts, last_error)
		VALUES ('order_paid', jsonb_build_object('order_id', $1::text), 'failed', $1::uuid, 8, 'provider answered 503 eight times')
		RETURNING id`, paidOrder).Scan(&fx.FailedEventID)
	require.NoError(t, err)

	// What the background work shows once it has run: both leader roles
	// held by this one node, and the paid order's provisioning announced.
	evs := eventpbconnect.NewEventAdminServiceClient(s.admin, s.baseURL)
	require.Eventually(t, func() bool {
		res, err := evs.ListLeaders(ctx, connect.NewRequest(&eventpb.ListLeadersRequest{}))
		if err != nil {
			t.Logf("ListLeaders: %v", err)
			return false
		}
		fx.Dashboard.Leaders = nil
		for _, l := range res.Msg.GetLeaders() {
			if l.GetValid() {
				fx.Dashboard.Leaders = append(fx.Dashboard.Leaders, leader{Role: l.GetRole(), Holder: l.GetHolder()})
			}
		}
		return len(fx.Dashboard.Leaders) == 2
	}, 30*time.Second, 50*time.Millisecond, "the billing and event_worker roles are taken")
	nodes, err := evs.ListNodes(ctx, connect.NewRequest(&eventpb.ListNodesRequest{}))
	require.NoError(t, err)
	require.Len(t, nodes.Msg.GetNodes(), 1)
	fx.Dashboard.Nodes = []string{nodes.Msg.GetNodes()[0].GetId()}
	for _, l := range fx.Dashboard.Leaders {
		require.Equal(t, fx.Dashboard.Nodes[0], l.Holder)
	}
	require.Eventually(t, func() bool {
		res, err := evs.ListNotifications(ctx, connect.NewRequest(&eventpb.ListNotificationsRequest{
			Pagination: &paymentpb.PageRequest{PageSize: 100}, Status: ptr("sent"),
		}))
		if err != nil {
			t.Logf("ListNotifications: %v", err)
			return false
		}
		for _, n := range res.Msg.GetNotifications() {
			if n.GetEventId() != "" {
				fx.NotifiedEventID = n.GetEventId()
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "a handled event has sent a notification")

	// The dashboard's figures: 23 + 1 paid, 2 failed, 1 pending today.
	fx.Dashboard.TodayPayments = fillers + 4
	fx.Dashboard.SuccessRate = fmt.Sprintf("%.1f %%", 100*float64(fillers+1)/float64(fillers+3))
	fx.Dashboard.Pending = 1
	fx.Dashboard.RefundsPending = 0
	fx.Dashboard.ReceivedCNY = fmt.Sprintf("%d.00 CNY", fillers*1+99)
	fx.Dashboard.FailedEvents = 1
	return fx
}

// smokeWorld is what the smoke run under another admin path reads: the
// admin's credentials and one payment (paid from the balance) to deep-link
// to and find in the list. The full world (fillers, interfaces, an RSA
// key, the background work waited for) is the full run's; made here too,
// it cost this test half a minute of a busy machine for nothing it reads.
func smokeWorld(t *testing.T, s *service) fixture {
	t.Helper()
	ctx := context.Background()
	fx := fixture{Username: "admin", Password: adminPassword, Currencies: s.currencies}
	reg, err := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, s.baseURL).Register(ctx, connect.NewRequest(&identitypb.RegisterRequest{
		Email: fmt.Sprintf("e2e-smoke-%s@example.com", uuid.NewString()[:8]), Password: "customer-password", Name: "E2E Smoke",
	}))
	require.NoError(t, err)
	fx.CustomerID = reg.Msg.GetCustomer().GetId()
	_, err = identitypbconnect.NewCustomerAdminServiceClient(s.admin, s.baseURL).AdjustBalance(ctx, connect.NewRequest(&identitypb.AdjustBalanceRequest{
		CustomerId: fx.CustomerID, Amount: "99.00", Note: "e2e top-up",
	}))
	require.NoError(t, err)
	p, err := orderpbconnect.NewOrderServiceClient(s.admin, s.baseURL).CreateProduct(ctx, connect.NewRequest(&orderpb.CreateProductRequest{
		Name: "VPS S (e2e)", Description: "e2e", Price: "99.00", Currency: "CNY",
	}))
	require.NoError(t, err)
	orders := orderpbconnect.NewOrderServiceClient(&http.Client{Transport: bearer{reg.Msg.GetAccessToken()}}, s.baseURL)
	o, err := orders.CreateOrder(ctx, connect.NewRequest(&orderpb.CreateOrderRequest{ProductId: p.Msg.GetProduct().GetId()}))
	require.NoError(t, err)
	paid, err := orders.PayWithBalance(ctx, connect.NewRequest(&orderpb.PayWithBalanceRequest{OrderId: o.Msg.GetOrder().GetId()}))
	require.NoError(t, err)
	fx.PaidPayment = payment{ID: paid.Msg.GetPayment().GetId(), OrderID: o.Msg.GetOrder().GetId(), Amount: "99.00", Currency: "CNY"}
	return fx
}

func ptr[T any](v T) *T { return &v }

// utcSecond is an RFC 3339 time of the API as the export writes it in UTC:
// to the second, "Z"; empty stays empty.
func utcSecond(t *testing.T, rfc3339 string) string {
	t.Helper()
	if rfc3339 == "" {
		return ""
	}
	at, err := time.Parse(time.RFC3339Nano, rfc3339)
	require.NoError(t, err)
	return at.UTC().Format(time.RFC3339)
}

// runBrowser installs what the browser step needs (npm ci, Debian's
// chromium) when it is missing, then runs e2e/run.mjs against fx.
func runBrowser(t *testing.T, fx fixture) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	deps := exec.CommandContext(ctx, "./ensure-deps.sh", "--browser")
	deps.Stdout, deps.Stderr = t.Output(), t.Output()
	if err := deps.Run(); err != nil {
		t.Fatalf("admin-ui/ensure-deps.sh --browser: %v (see the line above)", err)
	}

	shots, err := filepath.Abs(filepath.Join("e2e", "screenshots"))
	require.NoError(t, err)
	fx.Screenshots = shots
	if os.Getenv("PAYMENTD_E2E_DOCS_SCREENSHOT") == "1" && (fx.Mode == "full" || fx.Mode == "trends" || fx.Mode == "renewals") {
		fx.DocsScreenshots, err = filepath.Abs(filepath.Join("..", "docs", "screenshots"))
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(fx.DocsScreenshots, 0o755))
	}
	// The screens every full (or renewals) run must photograph; old
	// pictures are removed first, so that one the run did not take fails
	// the test.
	screens := runScreens[fx.Mode]
	for _, name := range screens {
		require.NoError(t, os.RemoveAll(filepath.Join(shots, name+".png")))
	}
	file := filepath.Join(t.TempDir(), "fixture.json")
	b, err := json.MarshalIndent(fx, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, b, 0o600))

	cmd := exec.CommandContext(ctx, "node", "e2e/run.mjs", file)
	cmd.Stdout, cmd.Stderr = t.Output(), t.Output()
	cmd.WaitDelay = 10 * time.Second
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("the browser steps failed (exit %d); screenshots in %s", exit.ExitCode(), shots)
	}
	require.NoError(t, err)
	for _, name := range screens {
		st, err := os.Stat(filepath.Join(shots, name+".png"))
		require.NoError(t, err, "no screenshot of %s", name)
		require.Greater(t, st.Size(), int64(1000), "screenshot of %s", name)
	}
}

// runScreens are the screenshots a run of each mode must take.
var runScreens = map[string][]string{"full": fullRunScreens, "renewals": renewalsRunScreens}

// fullRunScreens are the screenshots a full run takes: every screen of the
// console, and the states after its actions.
var fullRunScreens = []string{
	"login", "dashboard",
	"payments", "payments-page-2", "payment-detail", "audit-log", "payment-refunded", "payment-transfer-confirmed",
	"payment-refund-pending", "dashboard-refund-pending", "refunds-pending",
	"refund-outcome-dialog", "refund-outcome-confirm", "payment-refund-resolved", "refunds",
	"dashboard-money-to-return", "payments-money-to-return", "payment-credited-to-balance", "payment-returned-through-gateway",
	"payments-after",
	"orders", "order-detail", "products", "customers", "customer-detail", "customer-disabled",
	"gateways", "gateway-detail", "gateway-config-form",
	"plugins", "plugin-detail", "plugin-disabled",
	"events", "events-failed", "events-retried", "event-detail", "notifications",
	"api-keys", "account-password-changed",
}

// The console at the default [server].admin_path: log in, check the
// dashboard's figures against the world the test made, page and filter the
// payments created through the API, refund part of one, confirm a bank
// transfer, refund it (pending: sent back by hand; the dashboard counts it),
// follow the dashboard's figure to the refunds list and on to the payment,
// record its outcome (the list then shows none pending), see a gateway
// interface's secret stay masked, open a plugin's detail (its hostile
// admin_page shown as text) and disable and enable it, filter events and
// retry a failed one, open an event and the notifications; with the money
// to return on the dashboard (its amount, count and oldest age held to the
// world: a late transfer the test confirmed, then one the browser
// confirms), credit one to the balance and return the other through the
// gateway (confirmed, sent back by hand, recorded) until nothing is left;
// deep-link to a payment and reload, log out. Any failed
// API call the page makes that the step did not expect fails the test, and
// so does a "not available" block. Screenshots of every screen go to
// admin-ui/e2e/screenshots/ (and, with PAYMENTD_E2E_DOCS_SCREENSHOT=1, the
// payments list, the audit log, the refunds list and the dashboard's money
// to return to docs/screenshots/).
func TestConsoleEndToEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("browser test: not in -short mode")
	}
	s := startService(t, "/admin")
	fx := world(t, s)
	fx.Mode, fx.BaseURL, fx.AdminPath = "full", s.baseURL, "/admin"
	runBrowser(t, fx)

	// The browser changed the admin's password, which ended every session
	// of the admin, the test's own too: it logs in with the new one.
	ctx := context.Background()
	ids := identitypbconnect.NewIdentityServiceClient(s.admin, s.baseURL)
	_, err := ids.GetMe(ctx, connect.NewRequest(&identitypb.GetMeRequest{}))
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "the password change ended the test's session")
	_, err = ids.AdminLogin(ctx, connect.NewRequest(&identitypb.AdminLoginRequest{Username: "admin", Password: fx.NewPassword}))
	require.NoError(t, err)

	// The customer the browser disabled, enabled and signed out everywhere
	// with the API keys: enabled, the token and the key refused.
	c, err := identitypbconnect.NewCustomerAdminServiceClient(s.admin, s.baseURL).GetCustomer(ctx, connect.NewRequest(&identitypb.GetCustomerRequest{Id: fx.CustomerID}))
	require.NoError(t, err)
	require.Empty(t, c.Msg.GetCustomer().GetDisabledAt())
	for _, h := range []http.Header{{"Authorization": {"Bearer " + fx.customerToken}}, {"X-Api-Key": {fx.customerKey}}} {
		req := connect.NewRequest(&identitypb.GetMeRequest{})
		for k, v := range h {
			req.Header()[k] = v
		}
		_, err := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, s.baseURL).GetMe(ctx, req)
		require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "%v", h)
	}
	trail, err := paymentpbconnect.NewPaymentAdminServiceClient(s.admin, s.baseURL).ListAuditEntries(ctx, connect.NewRequest(&paymentpb.ListAuditEntriesRequest{
		EntityType: "customer", EntityId: fx.CustomerID, Pagination: &paymentpb.PageRequest{PageSize: 20},
	}))
	require.NoError(t, err)
	actions := map[string]string{}
	for _, e := range trail.Msg.GetEntries() {
		actions[e.GetAction()] = e.GetAfter()
	}
	require.Contains(t, actions["customer.disabled"], fx.DisableReason, "the reason the admin gave is audited")
	require.Contains(t, actions, "customer.enabled")
	require.Contains(t, actions["customer.signed_out_everywhere"], `"api_keys_revoked": 1`)

	// What the browser did, as the service has it: the bank transfer's
	// refund recorded as succeeded, with the admin's reason, reference and
	// note, and nothing pending any more.
	admin := paymentpbconnect.NewPaymentAdminServiceClient(s.admin, s.baseURL)
	rs, err := admin.ListRefunds(ctx, connect.NewRequest(&paymentpb.ListRefundsRequest{PaymentId: fx.PendingPayment.ID}))
	require.NoError(t, err)
	require.Len(t, rs.Msg.GetRefunds(), 1)
	r := rs.Msg.GetRefunds()[0]
	require.Equal(t, "succeeded", r.GetStatus())
	require.Equal(t, fx.PendingPayment.Amount, r.GetAmount())
	require.Equal(t, fx.ManualRefund.Reason, r.GetReason())
	require.Equal(t, fx.ManualRefund.Reference, r.GetGatewayRefundId())
	p, err := paymentpbconnect.NewPaymentServiceClient(s.admin, s.baseURL).GetPayment(ctx, connect.NewRequest(&paymentpb.GetPaymentRequest{Id: fx.PendingPayment.ID}))
	require.NoError(t, err)
	require.Equal(t, "refunded", p.Msg.GetPayment().GetStatus())
	// Every money action of the console carried an Idempotency-Key: the
	// refunds, the transfer's confirmation, the refund's outcome.
	var keyed []string
	require.NoError(t, s.app.Pool().QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT procedure ORDER BY procedure), '{}') FROM idempotency_keys`).Scan(&keyed))
	require.Subset(t, keyed, []string{
		"/billing.gateway.GatewayAdminService/ConfirmBankTransfer",
		"/billing.payment.PaymentAdminService/ResolveRefund",
		"/billing.payment.PaymentService/RefundPayment",
	})
	require.Equal(t, fx.PendingPayment.Amount, p.Msg.GetPayment().GetRefundedAmount())
	entries, err := admin.ListAuditEntries(ctx, connect.NewRequest(&paymentpb.ListAuditEntriesRequest{
		EntityType: "refund", EntityId: r.GetId(), Pagination: &paymentpb.PageRequest{PageSize: 20},
	}))
	require.NoError(t, err)
	var note string
	for _, e := range entries.Msg.GetEntries() {
		if e.GetAction() == "refund.resolve" {
			var after struct {
				Note string `json:"note"`
			}
			require.NoError(t, json.Unmarshal([]byte(e.GetAfter()), &after))
			note = after.Note
		}
	}
	require.Equal(t, fx.ManualRefund.Note, note, "the refund.resolve audit entry carries the admin's note")
	stats, err := admin.GetPaymentStats(ctx, connect.NewRequest(&paymentpb.GetPaymentStatsRequest{}))
	require.NoError(t, err)
	require.Zero(t, stats.Msg.GetRefundsPending())

	// The captured money the browser returned from the dashboard: the late
	// transfer credited to the balance, the other sent back through its
	// gateway (by hand, recorded as succeeded); nothing left to return.
	require.Empty(t, stats.Msg.GetToReturn(), "no money to return")
	back, err := paymentpbconnect.NewPaymentServiceClient(s.admin, s.baseURL).ListPayments(ctx, connect.NewRequest(&paymentpb.ListPaymentsRequest{
		ToReturn: true, Pagination: &paymentpb.PageRequest{PageSize: 20},
	}))
	require.NoError(t, err)
	require.Empty(t, back.Msg.GetPayments())
	for _, c := range []struct {
		payment     payment
		destination string
	}{{fx.FailedPayment, "balance"}, {fx.ReturnedPayment.payment, "gateway"}} {
		p, err := paymentpbconnect.NewPaymentServiceClient(s.admin, s.baseURL).GetPayment(ctx, connect.NewRequest(&paymentpb.GetPaymentRequest{Id: c.payment.ID}))
		require.NoError(t, err)
		require.Equal(t, "failed", p.Msg.GetPayment().GetStatus(), c.destination)
		require.Equal(t, c.payment.Amount, p.Msg.GetPayment().GetCapturedAmount(), c.destination)
		require.Equal(t, c.payment.Amount, p.Msg.GetPayment().GetRefundedAmount(), c.destination)
		rs, err := admin.ListRefunds(ctx, connect.NewRequest(&paymentpb.ListRefundsRequest{PaymentId: c.payment.ID}))
		require.NoError(t, err)
		require.Len(t, rs.Msg.GetRefunds(), 1, c.destination)
		require.Equal(t, "succeeded", rs.Msg.GetRefunds()[0].GetStatus(), c.destination)
		require.Equal(t, c.destination, rs.Msg.GetRefunds()[0].GetDestination())
		require.Equal(t, c.payment.Amount, rs.Msg.GetRefunds()[0].GetAmount(), c.destination)
	}

	// The callback URL the browser copied is the notify URL a payment
	// through that interface gives the gateway.
	copied, err := os.ReadFile(fx.CallbackOut)
	require.NoError(t, err, "the browser did not copy the callback URL")
	gws := gatewaypbconnect.NewGatewayAdminServiceClient(s.admin, s.baseURL)
	_, err = gws.EnableGatewayInterface(ctx, connect.NewRequest(&gatewaypb.EnableGatewayInterfaceRequest{Id: fx.SecretInterface.ID}))
	require.NoError(t, err)
	prod, err := orderpbconnect.NewOrderServiceClient(s.admin, s.baseURL).CreateProduct(ctx, connect.NewRequest(&orderpb.CreateProductRequest{Name: "callback (e2e)", Price: "1.00", Currency: "CNY"}))
	require.NoError(t, err)
	reg, err := ids.Register(ctx, connect.NewRequest(&identitypb.RegisterRequest{Email: fmt.Sprintf("e2e-cb-%s@example.com", uuid.NewString()[:8]), Password: "customer-password", Name: "E2E Callback"}))
	require.NoError(t, err)
	buyer := &http.Client{Transport: bearer{reg.Msg.GetAccessToken()}}
	o, err := orderpbconnect.NewOrderServiceClient(buyer, s.baseURL).CreateOrder(ctx, connect.NewRequest(&orderpb.CreateOrderRequest{ProductId: prod.Msg.GetProduct().GetId()}))
	require.NoError(t, err)
	pay, err := paymentpbconnect.NewPaymentServiceClient(buyer, s.baseURL).CreatePayment(ctx, connect.NewRequest(&paymentpb.CreatePaymentRequest{
		OrderId: o.Msg.GetOrder().GetId(), GatewayInterfaceId: fx.SecretInterface.ID, ReturnUrl: "https://shop.example.com/return",
	}))
	require.NoError(t, err)
	sent, ok := fx.epay.Order(pay.Msg.GetPayment().GetId())
	require.True(t, ok, "the payment reached the fake epay")
	require.Equal(t, sent.NotifyURL, string(copied))
	require.True(t, strings.HasSuffix(sent.NotifyURL, "/callbacks/"+fx.SecretInterface.ID), sent.NotifyURL)
}

// The same build served under another [server].admin_path: assets, deep
// links and navigation follow it.
func TestConsoleUnderAnotherAdminPath(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("browser test: not in -short mode")
	}
	s := startService(t, "/ops/console")
	fx := smokeWorld(t, s)
	fx.Mode, fx.BaseURL, fx.AdminPath = "smoke", s.baseURL, "/ops/console"
	runBrowser(t, fx)

	resp, err := http.Get(s.baseURL + "/admin/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "the default path is free when another is configured")
}
