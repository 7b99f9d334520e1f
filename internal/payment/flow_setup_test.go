package payment_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/payment/paymentrpc"
	"github.com/rustbill/paymentd/internal/payment/reconcile"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
	"github.com/rustbill/paymentd/internal/rpc"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
	"github.com/rustbill/paymentd/internal/testkit"
)

// gateways is a payment.Gateways over plugins loaded from the shipped
// scripts, standing in for the registry in domain tests.
type gateways struct {
	mu sync.Mutex
	m  map[uuid.UUID]payment.Gateway
}

func (g *gateways) Get(_ context.Context, id uuid.UUID) (payment.Gateway, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gw, ok := g.m[id]
	if !ok {
		return payment.Gateway{}, apperr.New(apperr.NotFound, "gateway interface %s not found", id)
	}
	return gw, nil
}

func (g *gateways) set(gw payment.Gateway) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.m[gw.InterfaceID] = gw
}

// flowBundle is one test's world: a database, the fake epay gateway, an epay and
// a bank transfer interface loaded from plugins/, the service, its
// /callbacks route and PaymentService served over real HTTP, two customers
// and an admin.
type flowBundle struct {
	pool     *pgxpool.Pool
	fake     *epay.Server
	gws      *gateways
	clock    *testkit.Clock
	svc      *payment.Service
	callback *httptest.Server // serves /callbacks/ and PaymentService
	client   paymentpbconnect.PaymentServiceClient

	epayGW, bankGW        uuid.UUID
	alice, bob, adminID   uuid.UUID
	asAlice, asBob, admin context.Context
	epayPlugin            *plugin.Plugin
}

const reconcileAfter = 10 * time.Minute

func setupFlow(t *testing.T) *flowBundle {
	t.Helper()
	f := &flowBundle{pool: testdb.Pool(t), gws: &gateways{m: map[uuid.UUID]payment.Gateway{}}, clock: testkit.NewClockAt(time.Now())}
	log := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	}

	f.fake = epay.New(epay.Options{NotifyScale: 0.0001, Logger: log})
	require.NoError(t, f.fake.Start())
	t.Cleanup(f.fake.Close)

	mux := http.NewServeMux()
	f.callback = httptest.NewServer(mux)
	t.Cleanup(f.callback.Close)

	f.svc = payment.NewService(f.pool, log,
		payment.WithGateways(f.gws), payment.WithPublicURL(f.callback.URL),
		payment.WithReconcileAfter(reconcileAfter), payment.WithClock(f.clock.Now))
	mux.Handle(payment.CallbackPath, paymentrpc.NewCallbackHandler(f.svc, log))
	path, h := paymentpbconnect.NewPaymentServiceHandler(paymentrpc.NewHandler(f.svc), connect.WithInterceptors(rpc.NewErrorInterceptor(log)))
	mux.Handle(path, h)
	f.client = paymentpbconnect.NewPaymentServiceClient(f.callback.Client(), f.callback.URL)

	f.epayPlugin = plugintest.Load(t, "gateway/epay.lua", plugin.Options{})
	f.epayGW = testfixture.GatewayInterface(t, f.pool, "epay")
	f.gws.set(payment.Gateway{
		InterfaceID: f.epayGW, PluginName: "epay", DisplayName: "epay", Enabled: true,
		ConfigJSON: mustJSON(map[string]any{"api_url": f.fake.URL() + "/", "pid": epay.DefaultPID, "key": epay.DefaultKey}),
		Plugin:     f.epayPlugin, Currencies: []string{"CNY"},
	})
	f.bankGW = testfixture.GatewayInterface(t, f.pool, "bank_transfer")
	f.gws.set(payment.Gateway{
		InterfaceID: f.bankGW, PluginName: "bank_transfer", DisplayName: "Bank", Enabled: true,
		ConfigJSON: mustJSON(map[string]any{"bank_name": "Test Bank", "account_name": "Rustbill Ltd", "account_number": "DE00 1234", "currencies": []string{"CNY"}}),
		Plugin:     plugintest.Load(t, "gateway/bank_transfer.lua", plugin.Options{}), Currencies: []string{"CNY"},
	})

	f.alice = testfixture.Customer(t, f.pool)
	f.bob = testfixture.Customer(t, f.pool)
	require.NoError(t, f.pool.QueryRow(context.Background(),
		`INSERT INTO admin_users (username, password_hash) VALUES ($1, 'x') RETURNING id`,
		"admin-"+uuid.NewString()[:8]).Scan(&f.adminID))
	f.asAlice = as(auth.RoleCustomer, f.alice)
	f.asBob = as(auth.RoleCustomer, f.bob)
	f.admin = as(auth.RoleAdmin, f.adminID)
	return f
}

func as(role auth.Role, id uuid.UUID) context.Context {
	kind := auth.KindJWT
	if role == auth.RoleAdmin {
		kind = auth.KindSession
	}
	return auth.WithPrincipal(context.Background(), auth.Principal{Role: role, ID: id, Kind: kind})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// order inserts a pending CNY order of alice for amount.
func (f *flowBundle) order(t *testing.T, amount string) uuid.UUID {
	t.Helper()
	return testfixture.Order(t, f.pool, f.alice, amount)
}

// invoice issues an invoice of amount for an order (or for alice when
// orderID is nil), due in a day.
func (f *flowBundle) invoice(t *testing.T, orderID *uuid.UUID, amount string) uuid.UUID {
	t.Helper()
	id := uuid.New()
	now := time.Now().UTC().Truncate(time.Microsecond)
	due := now.Add(24 * time.Hour)
	err := store.WithTx(context.Background(), f.pool, func(tx pgx.Tx) error {
		_, err := store.InsertInvoice(context.Background(), tx, store.NewInvoice{
			ID: id, CustomerID: f.alice, OrderID: orderID, Number: "INV-" + id.String()[:12], Status: "issued",
			Amount: money.MustParse(amount), Currency: "CNY", IssuedAt: &now, DueAt: &due, CreatedAt: now,
			Lines: []store.NewInvoiceLine{{Description: "invoice", Quantity: 1, UnitAmount: money.MustParse(amount)}},
		})
		return err
	})
	require.NoError(t, err)
	return id
}

// pay creates an epay payment of an order as alice.
func (f *flowBundle) pay(t *testing.T, orderID uuid.UUID) store.Payment {
	t.Helper()
	p, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &orderID, GatewayInterfaceID: f.epayGW, ReturnURL: "https://shop.example/done"})
	require.NoError(t, err)
	return p
}

// notify is an epay notification for a payment, signed with the merchant
// key as the gateway signs it.
func notify(paymentID uuid.UUID, tradeNo, amount string) string {
	v := url.Values{}
	v.Set("pid", epay.DefaultPID)
	v.Set("trade_no", tradeNo)
	v.Set("out_trade_no", paymentID.String())
	v.Set("type", "alipay")
	v.Set("name", "VPS")
	v.Set("money", amount)
	v.Set("trade_status", "TRADE_SUCCESS")
	return notifyValues(v)
}

// notifyValues signs v with the merchant key and encodes it.
func notifyValues(v url.Values) string {
	v.Set("sign", epay.Sign(v, epay.DefaultKey))
	v.Set("sign_type", "MD5")
	return v.Encode()
}

// loggedService is a service of the flow's pool, gateways and clock whose
// log lines go to logs, as JSON.
func (f *flowBundle) loggedService(logs io.Writer) *payment.Service {
	return payment.NewService(f.pool, slog.New(slog.NewJSONHandler(logs, nil)),
		payment.WithGateways(f.gws), payment.WithClock(f.clock.Now))
}

func (f *flowBundle) callbackOf(payload string) payment.Callback {
	return payment.Callback{GatewayInterfaceID: f.epayGW, Method: http.MethodGet, Payload: payload}
}

func (f *flowBundle) payment(t *testing.T, id uuid.UUID) store.Payment {
	t.Helper()
	p, err := store.Q(f.pool).GetPayment(context.Background(), id)
	require.NoError(t, err)
	return p
}

func (f *flowBundle) orderStatus(t *testing.T, id uuid.UUID) string {
	t.Helper()
	o, err := store.Q(f.pool).GetOrder(context.Background(), id)
	require.NoError(t, err)
	return o.Status
}

func (f *flowBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, f.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func (f *flowBundle) orderPaidEvents(t *testing.T, orderID uuid.UUID) int {
	t.Helper()
	return f.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_paid'`, orderID)
}

func (f *flowBundle) anomalies(t *testing.T, paymentID uuid.UUID) int {
	t.Helper()
	return f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND entity_id = $1`, paymentID.String())
}

// eventually polls cond every 10 ms for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 10*time.Millisecond, what)
}

func kindOf(err error) string {
	k, ok := apperr.KindOf(err)
	if !ok {
		return fmt.Sprintf("not a domain error: %v", err)
	}
	return k.String()
}

// reconciler is the reconciler over the flow's service and database.
func (f *flowBundle) reconciler(o reconcile.Options) *reconcile.Reconciler {
	return reconcile.New(f.pool, f.svc, o)
}
