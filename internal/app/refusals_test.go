package app_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/secretpass"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// moneyState is a digest of every row that holds or moves money or drives
// an order: payments, refunds, orders, invoices, events, balances. The
// audit log is left out on purpose: a refused callback that may mean money
// moved is recorded there for an admin.
func moneyState(t *testing.T, e *payBundle) string {
	t.Helper()
	var digest string
	require.NoError(t, e.r.app.Pool().QueryRow(context.Background(), `SELECT md5(concat_ws('|',
		(SELECT string_agg(row(id, status, amount, refunded_amount, gateway_payment_id, gateway_tx_id, paid_at, failure_reason)::text, ',' ORDER BY id) FROM payments),
		(SELECT string_agg(row(id, status, amount)::text, ',' ORDER BY id) FROM refunds),
		(SELECT string_agg(row(id, status, paid_at, cancel_reason)::text, ',' ORDER BY id) FROM orders),
		(SELECT string_agg(row(id, status, paid_amount)::text, ',' ORDER BY id) FROM invoices),
		(SELECT string_agg(row(id, event_type, payload)::text, ',' ORDER BY id) FROM events),
		(SELECT string_agg(row(id, balance)::text, ',' ORDER BY id) FROM customers),
		(SELECT count(*) FROM balance_transactions)))`).Scan(&digest))
	return digest
}

func requireLedgerClean(t *testing.T, e *payBundle) {
	t.Helper()
	r, err := ledger.Verify(context.Background(), e.r.app.Pool())
	require.NoError(t, err)
	require.True(t, r.OK(), "%s", r)
}

// notifyOf is the fake gateway's signed notification for a paid payment.
func notifyOf(t *testing.T, e *payBundle, paymentID string) url.Values {
	t.Helper()
	o, ok := e.fake.Order(paymentID)
	require.True(t, ok)
	v, err := url.ParseQuery(signedNotify(paymentID, o.TradeNo, o.Money))
	require.NoError(t, err)
	return v
}

func resign(v url.Values) string {
	q := url.Values{}
	for k, vals := range v {
		if k != "sign" && k != "sign_type" {
			q[k] = vals
		}
	}
	q.Set("sign", epay.Sign(q, epay.DefaultKey))
	q.Set("sign_type", "MD5")
	return q.Encode()
}

func (e *payBundle) callbackTo(gw, payload string) error {
	_, err := e.payments.HandleCallback(context.Background(), connect.NewRequest(&paymentpb.PaymentCallbackRequest{
		GatewayInterfaceId: gw, Payload: payload,
	}))
	return err
}

// A gateway notification replayed, reordered, with a changed amount, sent
// to another interface, or carrying a valid signature for another payment:
// every one is refused, and no payment, order, event or balance changes.
func TestHostileCallbacksAreRefusedAndChangeNothing(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	e.fake.DropNotify(true) // the test delivers every notification itself
	ctx := context.Background()

	// Payment A is paid and settled by its genuine notification.
	a := e.createPayment(t, e.order(t)).GetPayment().GetId()
	require.NoError(t, e.fake.Pay(a))
	genuine := notifyOf(t, e, a)
	require.NoError(t, e.callback(genuine.Encode()))
	require.Equal(t, "success", e.getPayment(t, a).GetStatus())
	e.waitOrderStatus(t, e.getPayment(t, a).GetOrderId(), "active") // the event worker is done with it
	// Payment B stays pending; its order is paid by nothing.
	b := e.createPayment(t, e.order(t)).GetPayment().GetId()

	// A second interface of the same plugin and merchant account.
	other := e.addGateway(t, "epay", "Alipay 2", e.epayConfig())

	set := func(v url.Values, k, val string) url.Values {
		c := url.Values{}
		for key, vals := range v {
			c[key] = append([]string(nil), vals...)
		}
		c.Set(k, val)
		return c
	}
	before := moneyState(t, e)
	for _, tc := range []struct {
		name    string
		gateway string
		payload string
		want    connect.Code
	}{
		{"replayed", e.epayGW, genuine.Encode(), connect.CodeAlreadyExists},
		{"amount changed and signed again", e.epayGW, resign(set(genuine, "money", "12.31")), connect.CodeInvalidArgument},
		{"amount changed, old signature", e.epayGW, set(genuine, "money", "0.01").Encode(), connect.CodeInvalidArgument},
		{"amount with three decimals", e.epayGW, resign(set(genuine, "money", "12.300")), connect.CodeInvalidArgument},
		{"another interface of the same account", other, genuine.Encode(), connect.CodeInvalidArgument},
		{"an interface that does not exist", uuid.NewString(), genuine.Encode(), connect.CodeNotFound},
		{"A's signature pointed at B", e.epayGW, set(genuine, "out_trade_no", b).Encode(), connect.CodeInvalidArgument},
		{"a valid signature for B with A's gateway order", e.epayGW, resign(set(genuine, "out_trade_no", b)), connect.CodeInvalidArgument},
		{"a payment that does not exist", e.epayGW, resign(set(genuine, "out_trade_no", uuid.NewString())), connect.CodeNotFound},
		{"not a payment id at all", e.epayGW, resign(set(genuine, "out_trade_no", "1' OR '1'='1")), connect.CodeNotFound},
		{"another merchant", e.epayGW, resign(set(genuine, "pid", "9999")), connect.CodeInvalidArgument},
		{"no signature", e.epayGW, set(genuine, "sign", "").Encode(), connect.CodeInvalidArgument},
		{"garbage", e.epayGW, "\x00%%%&&==\u202e", connect.CodeInvalidArgument},
	} {
		err := e.callbackTo(tc.gateway, tc.payload)
		require.Equal(t, tc.want, connect.CodeOf(err), "%s: %v", tc.name, err)
		require.Equal(t, before, moneyState(t, e), "%s changed money state", tc.name)
	}
	require.Equal(t, "pending", e.getPayment(t, b).GetStatus())

	// Reordered: C's order is cancelled (its payment fails), then C's
	// success arrives. A final state is never left: the money is recorded
	// as captured, to return, and its replay changes nothing more.
	cOrder := e.order(t)
	c := e.createPayment(t, cOrder).GetPayment().GetId()
	_, err := e.orders.CancelOrder(ctx, with(&orderpb.CancelOrderRequest{OrderId: cOrder}, e.c.customer))
	require.NoError(t, err)
	require.Equal(t, "failed", e.getPayment(t, c).GetStatus())
	require.NoError(t, e.fake.Pay(c))
	err = e.callback(notifyOf(t, e, c).Encode())
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	late := e.getPayment(t, c)
	require.Equal(t, "failed", late.GetStatus())
	require.Equal(t, late.GetAmount(), late.GetCapturedAmount(), "recorded as captured money to return")
	before = moneyState(t, e)
	err = e.callback(notifyOf(t, e, c).Encode())
	require.Equal(t, connect.CodeAlreadyExists, connect.CodeOf(err), "%v", err)
	require.Equal(t, before, moneyState(t, e))
	require.Equal(t, "cancelled", e.orderStatus(t, cOrder))
	require.Positive(t, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.anomaly' AND entity_id = $1`, c),
		"the money paid after the cancellation is recorded for an admin")

	// Over the plain HTTP route the same answers in the gateway's terms.
	post := func(gw, body string) (int, string) {
		resp, err := http.Post(e.r.baseURL+"/callbacks/"+gw, "application/x-www-form-urlencoded", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post(e.epayGW, genuine.Encode())
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "success", body, "a replay is acknowledged again, so the gateway stops")
	code, _ = post(e.epayGW, resign(set(genuine, "money", "99.00")))
	require.Equal(t, http.StatusBadRequest, code)
	code, _ = post("not-a-uuid", genuine.Encode())
	require.Equal(t, http.StatusNotFound, code)
	code, _ = post(e.epayGW, strings.Repeat("a", 65<<10))
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
	require.Equal(t, before, moneyState(t, e))

	requireLedgerClean(t, e)
}

// Requests beyond the limits are refused before any handler: a body over
// [server].max_request_bytes (1 MiB) is ResourceExhausted, headers over
// 64 KiB are 431, and an id that is not a UUID never reaches SQL.
func TestOversizedAndMalformedRequestsAreRefusedAtTheEdge(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()

	// 1 MiB + 1 KiB of payload, over Connect and gRPC alike.
	_, err := e.payments.HandleCallback(ctx, connect.NewRequest(&paymentpb.PaymentCallbackRequest{
		GatewayInterfaceId: e.epayGW, Payload: strings.Repeat("a", 1<<20+1<<10),
	}))
	require.Equal(t, connect.CodeResourceExhausted, connect.CodeOf(err), "%v", err)
	// Under the limit but over the field's own bound (64 KiB): InvalidArgument.
	_, err = e.payments.HandleCallback(ctx, connect.NewRequest(&paymentpb.PaymentCallbackRequest{
		GatewayInterfaceId: e.epayGW, Payload: strings.Repeat("a", 65<<10),
	}))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)

	// Headers over 64 KiB: 431 from the listener, before every layer (on a
	// connection of its own).
	fresh := &http.Client{Transport: &http.Transport{}}
	defer fresh.CloseIdleConnections()
	for _, path := range []string{"/health", "/billing.payment.PaymentService/GetPayment"} {
		req, err := http.NewRequest(http.MethodPost, e.r.baseURL+path, strings.NewReader("{}"))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Padding", strings.Repeat("x", 70<<10))
		resp, err := fresh.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode, path)
	}

	// Not a UUID: refused by validation, naming the field.
	for _, id := range []string{"1 OR 1=1", "'; DROP TABLE payments; --", strings.Repeat("7", 36), "7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f\x00"} {
		_, err := e.payments.GetPayment(ctx, with(&paymentpb.GetPaymentRequest{Id: id}, e.c.admin))
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%q: %v", id, err)
		require.ErrorContains(t, err, "id")
	}
	_, err = e.payments.ListPayments(ctx, with(&paymentpb.ListPaymentsRequest{
		Pagination: &paymentpb.PageRequest{}, OrderId: ptr("x' OR 'a'='a"),
	}, e.c.customer))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: uuid.NewString(), Amount: "1e3"}, e.c.admin))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
}

func ptr[T any](v T) *T { return &v }

// jwtWith signs claims with alg and key ("" for none) the way a forger would.
func jwtWith(t *testing.T, alg string, key []byte, claims map[string]any) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	unsigned := enc(map[string]string{"alg": alg, "typ": "JWT"}) + "." + enc(claims)
	if key == nil {
		return unsigned + "."
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(unsigned))
	return unsigned + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Forged and stale credentials of every kind are Unauthenticated, and a
// credential that fails never falls through to a weaker layer.
func TestForgedRevokedAndGuessedCredentialsAreRefused(t *testing.T) {
	t.Parallel()
	r := start(t, testConfig(testdb.URL(t)))
	c := login(t, r)
	ctx := context.Background()
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, r.baseURL)
	me := func(cr credential) error {
		_, err := ids.GetMe(ctx, with(&identitypb.GetMeRequest{}, cr))
		return err
	}
	random := func(n int) string {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	claims := map[string]any{
		"sub": c.customerID.String(), "iss": "paymentd", "iat": time.Now().Unix(),
		"exp": time.Now().Add(time.Hour).Unix(), "jti": uuid.NewString(), "gen": 0,
	}
	secret := []byte(testConfig("").JWT.Secret)

	// The genuine ones work (the test would prove nothing otherwise); a
	// token is taken only in its canonical form (unpadded base64url).
	require.NoError(t, me(c.customer))
	require.NoError(t, me(c.admin))
	require.NoError(t, me(c.key))
	require.NoError(t, me(bearer(jwtWith(t, "HS256", secret, claims))), "a token signed with the right key is accepted")

	keyRes, err := ids.CreateApiKey(ctx, with(&identitypb.CreateApiKeyRequest{Name: "to revoke"}, c.customer))
	require.NoError(t, err)
	_, err = ids.RevokeApiKey(ctx, with(&identitypb.RevokeApiKeyRequest{Id: keyRes.Msg.GetApiKey().GetId()}, c.customer))
	require.NoError(t, err)
	realKey := keyRes.Msg.GetKey()
	adminKeyRes, err := ids.CreateAdminApiKey(ctx, with(&identitypb.CreateAdminApiKeyRequest{Name: "to revoke", Scope: "admin"}, c.admin))
	require.NoError(t, err)
	_, err = ids.RevokeAdminApiKey(ctx, with(&identitypb.RevokeAdminApiKeyRequest{Id: adminKeyRes.Msg.GetApiKey().GetId()}, c.admin))
	require.NoError(t, err)
	realAdminKey := adminKeyRes.Msg.GetKey()

	for name, cr := range map[string]credential{
		"forged session cookie":              cookie("paymentd_session=" + random(32)),
		"session cookie of another shape":    cookie("paymentd_session=" + strings.Repeat("A", 4000)),
		"JWT signed with another key":        bearer(jwtWith(t, "HS256", []byte("another-secret-another-secret-!!"), claims)),
		"JWT with alg none":                  bearer(jwtWith(t, "none", nil, claims)),
		"JWT with alg HS512":                 bearer(jwtWith(t, "HS512", secret, claims)),
		"JWT expired":                        bearer(jwtWith(t, "HS256", secret, map[string]any{"sub": c.customerID.String(), "iss": "paymentd", "iat": time.Now().Add(-2 * time.Hour).Unix(), "exp": time.Now().Add(-time.Hour).Unix(), "jti": "x"})),
		"JWT of another issuer":              bearer(jwtWith(t, "HS256", secret, map[string]any{"sub": c.customerID.String(), "iss": "evil", "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(), "jti": "x"})),
		"JWT truncated":                      bearer(jwtWith(t, "HS256", secret, claims)[:40]),
		"JWT with its signature padded":      bearer(jwtWith(t, "HS256", secret, claims) + "="),
		"JWT with header and payload padded": bearer(strings.Replace(jwtWith(t, "HS256", secret, claims), ".", "=.", 2)),
		"customer's own token, padded":       bearer(strings.TrimPrefix(customerAuth(c), "Bearer ") + "="),
		"revoked API key":                    apiKey(realKey),
		"guessed API key":                    apiKey("pk_" + strings.ReplaceAll(uuid.NewString(), "-", "") + "_" + random(32)),
		"real key id, guessed secret":        apiKey(realKey[:36] + random(32)),
		"not an API key":                     apiKey("' OR 1=1 --"),
		"revoked admin API key":              apiKey(realAdminKey),
		"guessed admin API key":              apiKey("ak_" + strings.ReplaceAll(uuid.NewString(), "-", "") + "_" + random(32)),
		"real admin key id, guessed secret":  apiKey(realAdminKey[:36] + random(32)),
		"customer key's id as an admin key":  apiKey("ak_" + realKey[3:]),
		"admin key's id as a customer key":   apiKey("pk_" + realAdminKey[3:]),
	} {
		err := me(cr)
		require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "%s: %v", name, err)
	}
	// A bad credential next to a good one of a later layer: refused, never
	// passed on to the weaker layer.
	both := func(h http.Header) { cookie("paymentd_session=" + random(32))(h); c.key(h) }
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(me(both)))
}

// hostileGateway is a gateway plugin that tries, per return_url, to read a
// file, run a command, load code, loop forever or answer garbage.
const hostileGateway = `
function version() return "6.6.6" end
function info(c, i) return json_encode({display_name = "Hostile", currencies = {"CNY"}}) end
function config_schema(c, i) return json_encode({type = "object", properties = {}}) end
function test_config(c, i) return json_encode({ok = true, message = ""}) end
function query_payment(c, i) return json_encode({status = "pending"}) end
function parse_callback(c, i) return json_encode({valid = false, reason = "no"}) end
function refund(c, i) return json_encode({status = "failed", message = "no"}) end
function create_payment(c, i)
  local input = json_decode(i)
  local what = string.match(input.return_url, "/([a-z_]+)$")
  if what == "read" then
    local f = io.open("/etc/passwd")
    return json_encode({payment_url = f:read("*a")})
  elseif what == "exec" then
    os.execute("touch /tmp/pwned-by-plugin")
  elseif what == "require" then
    local io2 = require("io")
    return json_encode({payment_url = io2.open("/etc/passwd"):read("*a")})
  elseif what == "dofile" then
    dofile("/etc/passwd")
  elseif what == "load" then
    loadstring("return 1")()
  elseif what == "loop" then
    while true do end
  elseif what == "recurse" then
    local function f(n) return f(n + 1) + 1 end
    return f(1)
  elseif what == "memory" then
    local s = "x"
    while true do s = s .. s end
  elseif what == "garbage" then
    return "this is not json"
  elseif what == "wrong_types" then
    return json_encode({payment_url = {1, 2, 3}, qr_code = true})
  end
  return json_encode({payment_url = "https://pay.example/ok"})
end
`

// A gateway plugin cannot read files, run commands, load code or hang the
// service: each attempt fails its own call (Internal, nothing leaked), and
// the service and the plugin keep working. The endless loop is cut off by
// the instruction budget (plugin.DefaultLimits) or the call timeout,
// whichever comes first: the budget's 10 million instructions take 4 s
// under -race on the loaded 2-core machine, so the call timeout is 1 s
// here instead of the service's 10 s (plugin.Limits has the unit tests of
// each bound); the plugin's other calls take milliseconds.
func TestHostilePluginCannotReadFilesOrHangTheService(t *testing.T) {
	t.Parallel()
	e := startPaymentsWith(t, []app.Option{app.WithPluginLimits(plugin.Limits{CallTimeout: time.Second})}, func(c *config.Config) {
		require.NoError(t, os.WriteFile(filepath.Join(c.Plugins.Dir, "gateway", "hostile.lua"), []byte(hostileGateway), 0o644))
	})
	ctx := context.Background()
	hostile := e.addGateway(t, "hostile", "Hostile", map[string]any{})

	create := func(what string) (*paymentpb.CreatePaymentResponse, error) {
		res, err := e.payments.CreatePayment(ctx, with(&paymentpb.CreatePaymentRequest{
			OrderId: e.order(t), GatewayInterfaceId: hostile, ReturnUrl: "https://shop.example/" + what,
		}, e.c.customer))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	_ = os.Remove("/tmp/pwned-by-plugin")
	for _, what := range []string{"read", "exec", "require", "dofile", "load", "loop", "recurse", "memory", "garbage", "wrong_types"} {
		start := time.Now()
		_, err := create(what)
		took := time.Since(start)
		require.Equal(t, connect.CodeInternal, connect.CodeOf(err), "%s: %v", what, err)
		require.NotContains(t, err.Error(), "root:", "%s leaked a file", what)
		require.Less(t, took, 15*time.Second, "%s is stopped by the plugin's budget", what)
		t.Logf("%s: %v after %s", what, err, took.Round(time.Millisecond))
	}
	_, statErr := os.Stat("/tmp/pwned-by-plugin")
	require.True(t, os.IsNotExist(statErr), "the plugin ran a command")

	// The plugin and the service still work.
	res, err := create("fine")
	require.NoError(t, err)
	require.Equal(t, "https://pay.example/ok", res.GetPaymentUrl())
	require.Equal(t, "pending", e.createPayment(t, e.order(t)).GetPayment().GetStatus())
	requireLedgerClean(t, e)
}

// No secret — passwords, the JWT secret, session cookies, access tokens,
// API keys, a gateway's merchant key, the SMTP password, a webhook secret,
// the key that encrypts merchant keys —
// appears in any log line or in any error a caller receives, even when the
// calls that carry them fail.
func TestSecretsNeverAppearInLogsOrErrors(t *testing.T) {
	t.Parallel()
	const (
		merchantKey   = "merchant-key-Zq8sV1xK"
		smtpPassword  = "smtp-password-Yt7wQ2"
		webhookSecret = "webhook-secret-Hd9e3Lq0pX"
		customerPass  = "customer-password-Kv5rT8"
		newPass       = "customer-password-Nw3pQ9"
		providerToken = "provider-token-Rm4vX7"
	)
	logs := &testkit.Logs{}
	fake := epay.New(epay.Options{NotifyScale: 0.0001, Merchants: map[string]string{"2002": merchantKey}})
	require.NoError(t, fake.Start())
	t.Cleanup(fake.Close)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := testConfig(testdb.URL(t))
	cfg.Plugins.Dir = pluginDir(t)
	require.NoError(t, os.MkdirAll(filepath.Join(cfg.Plugins.Dir, "notifier"), 0o755))
	src, err := os.ReadFile(filepath.Join("..", "..", "plugins", "notifier", "webhook.lua"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(cfg.Plugins.Dir, "notifier", "webhook.lua"), src, 0o644))
	addProviderPlugin(t, cfg.Plugins.Dir)
	cfg.Server.PublicURL = "http://" + ln.Addr().String()
	cfg.Log.Level = "debug"
	cfg.Notify.SMTP = config.NotifySMTP{Host: "127.0.0.1", Port: testkit.FreePort(t), From: "billing@example.com", TLSPolicy: "none",
		Auth: "plain", Username: "billing", Password: smtpPassword, Timeout: time.Second}
	cfg.Notify.RetryBase, cfg.Notify.RetryMax, cfg.Notify.PollInterval = 100*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
	cfg.Notify.Webhooks = []config.NotifyWebhook{{Name: "ops", URL: "http://127.0.0.1:" + fmt.Sprint(testkit.FreePort(t)) + "/hook", Secret: webhookSecret}}
	cfg.Events.PollInterval = 100 * time.Millisecond
	log := slog.New(slog.NewJSONHandler(io.MultiWriter(logs, t.Output()), &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := app.New(context.Background(), cfg, log)
	require.NoError(t, err)
	serveCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(serveCtx, ln) }()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		cancel()
		require.NoError(t, <-done)
		a.Close()
	})
	r := &running{app: a, baseURL: "http://" + ln.Addr().String()}
	c := login(t, r)
	e := &payBundle{r: r, c: c, fake: fake}
	e.payments, e.orders, e.admin = paymentClients(r.baseURL)
	ctx := context.Background()
	var errs []string
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}

	// A customer with a password of their own, logging in right and wrong.
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, r.baseURL)
	reg, err := ids.Register(ctx, connect.NewRequest(&identitypb.RegisterRequest{Email: "carol@example.com", Password: customerPass, Name: "Carol"}))
	require.NoError(t, err)
	_, err = ids.Login(ctx, connect.NewRequest(&identitypb.LoginRequest{Email: "carol@example.com", Password: customerPass + "x"}))
	note(err)
	_, err = ids.AdminLogin(ctx, connect.NewRequest(&identitypb.AdminLoginRequest{Username: "admin", Password: "bootstrap-password-wrong"}))
	note(err)
	key, err := ids.CreateApiKey(ctx, with(&identitypb.CreateApiKeyRequest{Name: "ci"}, c.customer))
	require.NoError(t, err)
	_, err = ids.GetMe(ctx, with(&identitypb.GetMeRequest{}, apiKey(key.Msg.GetKey()[:len(key.Msg.GetKey())-2]+"zz")))
	note(err)
	// The customer changes the password, once wrongly; the admin uses an
	// API key, once tampered with.
	_, err = ids.ChangePassword(ctx, with(&identitypb.ChangePasswordRequest{CurrentPassword: newPass, NewPassword: customerPass}, bearer(reg.Msg.GetAccessToken())))
	note(err)
	changed, err := ids.ChangePassword(ctx, with(&identitypb.ChangePasswordRequest{CurrentPassword: customerPass, NewPassword: newPass}, bearer(reg.Msg.GetAccessToken())))
	require.NoError(t, err)
	_, err = ids.GetMe(ctx, with(&identitypb.GetMeRequest{}, bearer(reg.Msg.GetAccessToken())))
	note(err)
	adminK := newAdminKey(t, r.baseURL, c.admin, "read")
	adminKeyRes, err := ids.CreateAdminApiKey(ctx, with(&identitypb.CreateAdminApiKeyRequest{Name: "ops", Scope: "operate"}, c.admin))
	require.NoError(t, err)
	adminKeyText := adminKeyRes.Msg.GetKey()
	_, err = ids.GetMe(ctx, with(&identitypb.GetMeRequest{}, apiKey(adminKeyText)))
	require.NoError(t, err)
	_, err = ids.GetMe(ctx, with(&identitypb.GetMeRequest{}, apiKey(adminKeyText[:len(adminKeyText)-2]+"zz")))
	note(err)
	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: uuid.NewString()}, adminK.cred))
	note(err)

	// A gateway with a merchant key: payments created, paid, notified,
	// refunded; then the gateway fails and its errors are logged.
	gw, err := e.admin.CreateGatewayInterface(ctx, with(&gatewaypb.CreateGatewayInterfaceRequest{
		PluginName: "epay", DisplayName: "Alipay",
		Config: mustStruct(t, map[string]any{"api_url": fake.URL() + "/", "pid": "2002", "key": merchantKey}),
	}, c.admin))
	require.NoError(t, err)
	e.epayGW = gw.Msg.GetGatewayInterface().GetId()
	_, err = e.admin.EnableGatewayInterface(ctx, with(&gatewaypb.EnableGatewayInterfaceRequest{Id: e.epayGW}, c.admin))
	require.NoError(t, err)
	got, err := e.admin.GetGatewayInterface(ctx, with(&gatewaypb.GetGatewayInterfaceRequest{Id: e.epayGW}, c.admin))
	require.NoError(t, err)
	require.NotContains(t, got.Msg.String(), merchantKey, "the config's secret is write-only")
	prod, err := e.orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{Name: "VPS", Price: "12.30", Currency: "CNY"}, c.admin))
	require.NoError(t, err)
	e.product = prod.Msg.GetProduct().GetId()
	pay := e.createPayment(t, e.order(t)).GetPayment().GetId()
	require.NoError(t, fake.Pay(pay))
	e.waitSettled(t, pay)
	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: pay, Amount: "1.00"}, c.admin))
	require.NoError(t, err)
	fake.InjectFault(epay.Fault{Status: 500})
	_, err = e.payments.CreatePayment(ctx, with(&paymentpb.CreatePaymentRequest{
		OrderId: e.order(t), GatewayInterfaceId: e.epayGW, ReturnUrl: "https://shop.example/done",
	}, c.customer))
	note(err)
	_, err = e.payments.QueryPaymentStatus(ctx, with(&paymentpb.QueryPaymentStatusRequest{PaymentId: pay}, c.admin))
	note(err)
	fake.ClearFaults()

	// A provider product with a token, whose provider is down: the paid
	// order's provisioning fails and is logged; and a product whose stored
	// token was replaced by another product's cannot be ordered.
	provider := func(name string) string {
		res, err := e.orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{
			Name: name, Price: "12.30", Currency: "CNY", ProviderPlugin: ptr("http_provider"),
			ProviderConfig: mustStruct(t, map[string]any{"api_url": "http://127.0.0.1:" + fmt.Sprint(testkit.FreePort(t)) + "/", "token": providerToken}),
		}, c.admin))
		require.NoError(t, err)
		return res.Msg.GetProduct().GetId()
	}
	vps, victim := provider("VPS down"), provider("VPS moved")
	_, err = a.Pool().Exec(ctx, `UPDATE products SET provider_config = jsonb_set(provider_config, '{token}',
		(SELECT provider_config->'token' FROM products WHERE id = $1)) WHERE id = $2`, vps, victim)
	require.NoError(t, err)
	_, err = e.orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: victim}, c.customer))
	note(err)
	require.Error(t, err)
	e.product = vps
	provisioned := e.createPayment(t, e.order(t)).GetPayment().GetId()
	require.NoError(t, fake.Pay(provisioned))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.GreaterOrEqual(c, e.count(c, `SELECT count(*) FROM events WHERE event_type = 'order_paid' AND attempts >= 1 AND last_error <> ''`), 1)
	}, 20*time.Second, 100*time.Millisecond, "provisioning failed against the closed port")
	var eventErrors string
	require.NoError(t, a.Pool().QueryRow(ctx, `SELECT string_agg(last_error, ' ') FROM events`).Scan(&eventErrors))
	errs = append(errs, eventErrors)

	// Notifications fail against the closed SMTP and webhook ports.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.GreaterOrEqual(c, e.count(c, `SELECT count(*) FROM notifications WHERE attempts >= 1 AND last_error <> ''`), 2)
	}, 20*time.Second, 100*time.Millisecond)

	cookieValue := ""
	h := http.Header{}
	c.admin(h)
	cookieValue = strings.TrimPrefix(h.Get("Cookie"), "paymentd_session=")
	secrets := map[string]string{
		"customer password":  customerPass,
		"bootstrap password": "bootstrap-password",
		"JWT secret":         cfg.JWT.Secret,
		"merchant key":       merchantKey,
		"provider token":     providerToken,
		"SMTP password":      smtpPassword,
		"webhook secret":     webhookSecret,
		"[secrets] key":      testKey,
		"API key":            key.Msg.GetKey(),
		"API key secret":     key.Msg.GetKey()[36:],
		"admin API key":      adminKeyText,
		"admin key secret":   adminKeyText[36:],
		"changed password":   newPass,
		"token of a change":  changed.Msg.GetAccessToken(),
		"session cookie":     cookieValue,
		"access token":       reg.Msg.GetAccessToken(),
		"token signature":    reg.Msg.GetAccessToken()[strings.LastIndex(reg.Msg.GetAccessToken(), ".")+1:],
	}
	captured := logs.String()
	require.Contains(t, captured, "gateway plugin epay", "the failures were logged")
	for name, s := range secrets {
		require.NotEmpty(t, s, name)
		require.NotContains(t, captured, s, "the %s is in the logs", name)
		for _, msg := range errs {
			require.NotContains(t, msg, s, "the %s is in an error message", name)
		}
	}
	var stored int
	require.NoError(t, a.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE before::text LIKE '%'||$1||'%' OR after::text LIKE '%'||$1||'%'`, merchantKey).Scan(&stored))
	require.Zero(t, stored, "the merchant key is not in the audit log")
	for name, secret := range map[string]string{"admin key secret": adminKeyText[36:], "changed password": newPass, "customer password": customerPass, "provider token": providerToken} {
		require.NoError(t, a.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE before::text LIKE '%'||$1||'%' OR after::text LIKE '%'||$1||'%'`, secret).Scan(&stored))
		require.Zero(t, stored, "the %s is not in the audit log", name)
	}
}

func paymentClients(base string) (paymentpbconnect.PaymentServiceClient, orderpbconnect.OrderServiceClient, gatewaypbconnect.GatewayAdminServiceClient) {
	return paymentpbconnect.NewPaymentServiceClient(http.DefaultClient, base),
		orderpbconnect.NewOrderServiceClient(http.DefaultClient, base),
		gatewaypbconnect.NewGatewayAdminServiceClient(http.DefaultClient, base)
}

// Unsigned junk — 6,150 short pairs, 54 KiB, under the 64 KiB bound — used
// to run epay's parse_callback out of its instruction budget: a 500,
// counted as a gateway error, firing PaymentdCallbacksFailing for whoever
// sent it. More parameters than any gateway sends are refused before the
// plugin runs: 400 on the route, InvalidArgument over gRPC, counted as
// malformed, nothing changed; a real notification still settles.
func TestJunkCallbacksAreMalformedNotGatewayErrors(t *testing.T) {
	t.Parallel()
	o := startObserved(t, nil)
	e := o.payBundle
	p := e.createPayment(t, e.order(t)).GetPayment().GetId()
	series := func(outcome string) string {
		return `paymentd_callbacks_total{gateway="epay",outcome="` + outcome + `"}`
	}
	var junk strings.Builder
	for i := range 6150 {
		fmt.Fprintf(&junk, "k%04d=v&", i)
	}
	payload := strings.TrimSuffix(junk.String(), "&")
	require.Less(t, len(payload), payment.MaxCallbackBytes)
	// The same count of parts, none of them a parameter, is no cheaper.
	empty := strings.Repeat("&", 6150)
	before := moneyState(t, e)

	for _, q := range []string{payload, empty} {
		code, body := o.callbackGET(t, q)
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Contains(t, body, "malformed callback")
		resp, err := http.Post(e.r.baseURL+"/callbacks/"+e.epayGW, "application/x-www-form-urlencoded", strings.NewReader(q))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		err = e.callback(q)
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
		require.ErrorContains(t, err, "malformed callback: more than 128 parameters")
	}
	m := o.scrape(t)
	require.Equal(t, 6.0, m[series("malformed")])
	require.Zero(t, m[series("error")], "junk is not a gateway failure")
	require.Equal(t, before, moneyState(t, e))

	// Unsigned junk within the bound is a bad signature, as before.
	code, _ := o.callbackGET(t, "k=v&pid="+epay.DefaultPID+"&sign=x")
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, 1.0, o.scrape(t)[series("bad_signature")])

	// The gateway's own notification, signed, still settles the payment.
	code, body := o.callbackGET(t, signedNotify(p, "T-1", "12.30"))
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "success", body)
	require.Equal(t, "success", e.getPayment(t, p).GetStatus())
	m = o.scrape(t)
	require.Equal(t, 1.0, m[series("accepted")])
	require.Equal(t, 6.0, m[series("malformed")])
	require.Zero(t, m[series("error")])
}

// customerAuth is the Authorization header a credential sets.
func customerAuth(c callers) string {
	h := http.Header{}
	c.customer(h)
	return h.Get("Authorization")
}

// An operator-side attacker (write access to the database, no key) moves
// one interface's encrypted merchant key into another, or forges one, so
// that the other would verify notifications with a key the attacker knows.
// The moved value does not decrypt: the interface refuses every use over
// the wire, no money moves, its reads stay masked, the other interfaces
// work; an admin sending the key again repairs it. The API refuses values
// that look encrypted.
func TestForgedOrMovedCiphertextsAreRefusedAndChangeNothing(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	e.fake.DropNotify(true)
	ctx := context.Background()
	pool := e.r.app.Pool()

	// A second merchant on a gateway of its own, with a payment pending.
	fake2 := epay.New(epay.Options{Merchants: map[string]string{"2002": "merchant-2002-key"}, NotifyScale: 0.0001})
	require.NoError(t, fake2.Start())
	t.Cleanup(fake2.Close)
	fake2.DropNotify(true)
	gw2 := e.createEpayInterface(t, "merchant 2002", fake2, "2002", "merchant-2002-key")
	p2 := e.createPaymentVia(t, e.order(t), gw2).GetPayment().GetId()
	require.NoError(t, fake2.Pay(p2))

	// The first interface's sealed key copied over gw2's.
	_, err := pool.Exec(ctx, `UPDATE gateway_interfaces SET config = jsonb_set(config, '{key}', to_jsonb($2::text)) WHERE id = $1`,
		gw2, e.storedSecret(t, e.epayGW))
	require.NoError(t, err)
	unpaid := e.order(t)
	before := moneyState(t, e)

	// Whatever this instance read of gw2 before expires within a second.
	require.Eventually(t, func() bool {
		_, err := e.admin.TestGatewayInterface(ctx, with(&gatewaypb.TestGatewayInterfaceRequest{Id: gw2}, e.c.admin))
		return connect.CodeOf(err) == connect.CodeFailedPrecondition
	}, 5*time.Second, 50*time.Millisecond)

	// A notification signed with the first merchant's key (what the move
	// was for) and one with gw2's genuine key: neither is applied.
	status, body := postCallback(t, e.r.baseURL, gw2, notifyAs(t, fake2, p2, "2002", epay.DefaultKey))
	require.Equal(t, http.StatusInternalServerError, status, body)
	require.NotEqual(t, "success", body)
	status, _ = postCallback(t, e.r.baseURL, gw2, notifyAs(t, fake2, p2, "2002", "merchant-2002-key"))
	require.Equal(t, http.StatusInternalServerError, status, "unusable, so the gateway retries later")
	_, err = e.payments.HandleCallback(ctx, connect.NewRequest(&paymentpb.PaymentCallbackRequest{
		GatewayInterfaceId: gw2, Payload: notifyAs(t, fake2, p2, "2002", epay.DefaultKey),
	}))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "cannot be used: its secrets do not decrypt with the keys of [secrets]")
	_, err = e.payments.CreatePayment(ctx, with(&paymentpb.CreatePaymentRequest{
		OrderId: unpaid, GatewayInterfaceId: gw2, ReturnUrl: "https://shop.example/done",
	}, e.c.customer))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
	_, err = e.payments.QueryPaymentStatus(ctx, with(&paymentpb.QueryPaymentStatusRequest{PaymentId: p2}, e.c.admin))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
	got, err := e.admin.GetGatewayInterface(ctx, with(&gatewaypb.GetGatewayInterfaceRequest{Id: gw2}, e.c.admin))
	require.NoError(t, err, "reads still answer")
	require.Equal(t, "********", got.Msg.GetGatewayInterface().GetConfig().GetFields()["key"].GetStringValue())
	require.Equal(t, before, moneyState(t, e), "no money moved")
	require.Equal(t, "pending", e.getPayment(t, p2).GetStatus())

	// A forged value (well formed, under the right key id) on a fresh
	// interface: the same.
	gw3 := e.createEpayInterface(t, "forged", e.fake, epay.DefaultPID, epay.DefaultKey)
	forged := "enc:v1:" + testKeyID + ":" + base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{7}, 40))
	_, err = pool.Exec(ctx, `UPDATE gateway_interfaces SET config = jsonb_set(config, '{key}', to_jsonb($2::text)) WHERE id = $1`, gw3, forged)
	require.NoError(t, err)
	_, err = e.payments.CreatePayment(ctx, with(&paymentpb.CreatePaymentRequest{
		OrderId: unpaid, GatewayInterfaceId: gw3, ReturnUrl: "https://shop.example/done",
	}, e.c.customer))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)

	// The API takes no encrypted-looking value: an admin cannot plant one.
	var interfaces int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM gateway_interfaces`).Scan(&interfaces))
	_, err = e.admin.CreateGatewayInterface(ctx, with(&gatewaypb.CreateGatewayInterfaceRequest{
		PluginName: "epay", DisplayName: "planted",
		Config: mustStruct(t, map[string]any{"api_url": e.fake.URL() + "/", "pid": epay.DefaultPID, "key": e.storedSecret(t, e.epayGW)}),
	}, e.c.admin))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, `config.key: a value may not start with "enc:"`)
	require.Equal(t, interfaces, e.count(t, `SELECT count(*) FROM gateway_interfaces`))

	// The first interface never stopped working.
	e.createPayment(t, e.order(t))

	// The admin sends gw2's key again: the genuine notification lands.
	_, err = e.admin.UpdateGatewayInterface(ctx, with(&gatewaypb.UpdateGatewayInterfaceRequest{
		Id: gw2, Config: mustStruct(t, map[string]any{"api_url": fake2.URL() + "/", "pid": "2002", "key": "merchant-2002-key"}),
	}, e.c.admin))
	require.NoError(t, err)
	status, body = postCallback(t, e.r.baseURL, gw2, notifyAs(t, fake2, p2, "2002", "merchant-2002-key"))
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "success", body)
	require.Equal(t, "success", e.getPayment(t, p2).GetStatus())
	requireLedgerClean(t, e)
}

// Products' provider tokens and the copies orders keep are bound to their
// row like gateway secrets: a product's encrypted token copied over another
// product's makes that product unorderable (nothing created, no money
// moved) until an admin sends its token again; an order's copy moved to
// another order is named by the pass over stored secrets and left as it
// is; the API takes no value that looks encrypted; the product whose token
// was copied keeps provisioning.
func TestMovedProviderCiphertextsAreRefusedAndChangeNothing(t *testing.T) {
	t.Parallel()
	e, prov := startProvisioning(t, "")
	ctx := context.Background()
	pool := e.r.app.Pool()
	good := e.product
	const otherToken = "other-account-token-4Lm2"
	other := func() string {
		res, err := e.orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{
			Name: "VPS other account", Price: "12.30", Currency: "CNY", ProviderPlugin: ptr("http_provider"),
			ProviderConfig: mustStruct(t, map[string]any{"api_url": prov.URL(), "token": otherToken}),
		}, e.c.admin))
		require.NoError(t, err)
		return res.Msg.GetProduct().GetId()
	}()

	// The first product's encrypted token copied over the other's.
	_, err := pool.Exec(ctx, `UPDATE products SET provider_config = jsonb_set(provider_config, '{token}',
		(SELECT provider_config->'token' FROM products WHERE id = $1)) WHERE id = $2`, good, other)
	require.NoError(t, err)
	orders := e.count(t, `SELECT count(*) FROM orders`)
	before := moneyState(t, e)
	_, err = e.orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: other}, e.c.customer))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "cannot be ordered: its provider settings do not decrypt with the keys of [secrets]")
	require.Equal(t, orders, e.count(t, `SELECT count(*) FROM orders`), "nothing created")
	require.Equal(t, before, moneyState(t, e), "no money moved")

	// An update cannot keep it, and no admin can plant a ciphertext.
	_, err = e.orders.UpdateProduct(ctx, with(&orderpb.UpdateProductRequest{
		Id: other, ProviderConfig: mustStruct(t, map[string]any{"api_url": prov.URL()}),
	}, e.c.admin))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, "provider_config.token: the stored secret does not decrypt")
	products := e.count(t, `SELECT count(*) FROM products`)
	_, err = e.orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{
		Name: "planted", Price: "1.00", Currency: "CNY", ProviderPlugin: ptr("http_provider"),
		ProviderConfig: mustStruct(t, map[string]any{"api_url": prov.URL(), "token": e.storedProductToken(t, good)}),
	}, e.c.admin))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	require.ErrorContains(t, err, `provider_config.token: a value may not start with "enc:"`)
	require.Equal(t, products, e.count(t, `SELECT count(*) FROM products`))

	// One order's copy moved to another order: `secrets rotate` (the pass
	// that opens every value) names it, and the other product, and
	// rewrites neither.
	o1, o2 := e.order(t), e.order(t)
	_, err = pool.Exec(ctx, `UPDATE orders SET item = jsonb_set(item, '{provider_config,token}',
		(SELECT item->'provider_config'->'token' FROM orders WHERE id = $1)) WHERE id = $2`, o1, o2)
	require.NoError(t, err)
	moved, otherStored := e.storedOrderToken(t, o2), e.storedProductToken(t, other)
	rep, err := secretpass.Rotate(ctx, pool, keyring(t, testKeyID, map[string]string{testKeyID: testKey}), audit.System("cli:test"), time.Now())
	require.NoError(t, err)
	require.Zero(t, rep.Changed())
	require.Len(t, rep.Unreadable, 2, "%v", rep.Unreadable)
	require.Contains(t, strings.Join(rep.Unreadable, "\n"), "product "+other)
	require.Contains(t, strings.Join(rep.Unreadable, "\n"), "order "+o2)
	require.Equal(t, moved, e.storedOrderToken(t, o2))
	require.Equal(t, otherStored, e.storedProductToken(t, other))

	// The first product never stopped working.
	e.payUntilActive(t, prov, o1)

	// The admin sends the other product's token again: it can be ordered.
	_, err = e.orders.UpdateProduct(ctx, with(&orderpb.UpdateProductRequest{
		Id: other, ProviderConfig: mustStruct(t, map[string]any{"api_url": prov.URL(), "token": otherToken}),
	}, e.c.admin))
	require.NoError(t, err)
	_, err = e.orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: other}, e.c.customer))
	require.NoError(t, err)
	requireLedgerClean(t, e)
}

// publicProcedures need no credential: a refused one does not stop them.
var publicProcedures = map[string]bool{
	"/billing.identity.IdentityService/Register":     true,
	"/billing.identity.IdentityService/Login":        true,
	"/billing.identity.IdentityService/AdminLogin":   true,
	"/billing.payment.PaymentService/HandleCallback": true,
}

// Tokens ended by a sign-out everywhere, a password change or disabling,
// and the API key of a disabled customer, are refused by every procedure of
// every service with Unauthenticated — the ones that need no credential
// aside — never passed on as someone, never another code.
func TestEndedCustomerAccessIsRefusedByEveryProcedure(t *testing.T) {
	t.Parallel()
	r := start(t, testConfig(testdb.URL(t)))
	c := login(t, r)
	ctx := context.Background()
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, r.baseURL)
	admins := identitypbconnect.NewCustomerAdminServiceClient(http.DefaultClient, r.baseURL)
	ended := map[string]credential{}

	ended["token of a customer signed out everywhere"] = c.customer
	_, err := admins.SignOutEverywhere(ctx, with(&identitypb.SignOutEverywhereRequest{CustomerId: c.customerID.String()}, c.admin))
	require.NoError(t, err)

	res, err := ids.Login(ctx, connect.NewRequest(&identitypb.LoginRequest{Email: "alice@example.com", Password: "long enough password"}))
	require.NoError(t, err)
	before := bearer(res.Msg.GetAccessToken())
	changed, err := ids.ChangePassword(ctx, with(&identitypb.ChangePasswordRequest{CurrentPassword: "long enough password", NewPassword: "a new long password"}, before))
	require.NoError(t, err)
	ended["token issued before a password change"] = before
	_, err = ids.ChangePassword(ctx, with(&identitypb.ChangePasswordRequest{CurrentPassword: "a new long password", NewPassword: "a third long password"}, before))
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "an ended token cannot change the password back")

	ended["token of a disabled customer"] = c.other
	ended["API key of a disabled customer"] = c.key
	ended["token issued by the password change, account disabled since"] = bearer(changed.Msg.GetAccessToken())
	for _, id := range []string{c.customerID.String(), c.otherID.String()} {
		_, err = admins.DisableCustomer(ctx, with(&identitypb.DisableCustomerRequest{CustomerId: id}, c.admin))
		require.NoError(t, err)
	}

	for _, p := range billingProcedures(t) {
		if publicProcedures[p.path] {
			continue
		}
		for name, cr := range ended {
			code, msg := callRaw(t, r.baseURL, p.path, cr, true, []byte("{}"))
			require.Equal(t, "unauthenticated", code, "%s with the %s: %s", p.path, name, msg)
		}
	}
	_, err = ids.Login(ctx, connect.NewRequest(&identitypb.LoginRequest{Email: "alice@example.com", Password: "a new long password"}))
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "a disabled customer cannot log in")
}

// Admin API keys outside their scope — a read key refunding, confirming a
// transfer, adjusting a balance or disabling a customer; an operate key
// configuring a gateway or disabling a customer; an admin key minting a
// key, revoking one, changing the password or logging out — are each
// PermissionDenied, and no money, order, event or key changes.
func TestOutOfScopeAdminKeysAreRefusedAndChangeNothing(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	key := func(scope string) adminKey { return newAdminKey(t, e.r.baseURL, e.c.admin, scope) }
	read, operate, admin := key("read"), key("operate"), key("admin")
	p := e.createPayment(t, e.order(t)).GetPayment().GetId()
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, e.r.baseURL)
	customers := identitypbconnect.NewCustomerAdminServiceClient(http.DefaultClient, e.r.baseURL)
	before := moneyState(t, e)
	keysBefore := e.count(t, `SELECT count(*) FROM admin_api_keys WHERE revoked_at IS NULL`)

	calls := map[string]func(credential) error{
		"RefundPayment": func(cr credential) error {
			_, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: p}, cr))
			return err
		},
		"ConfirmBankTransfer": func(cr credential) error {
			_, err := e.admin.ConfirmBankTransfer(ctx, with(&gatewaypb.ConfirmBankTransferRequest{PaymentId: p, Reference: "forged"}, cr))
			return err
		},
		"AdjustBalance": func(cr credential) error {
			_, err := customers.AdjustBalance(ctx, with(&identitypb.AdjustBalanceRequest{CustomerId: e.c.customerID.String(), Amount: "1000.00", Note: "free money"}, cr))
			return err
		},
		"DisableCustomer": func(cr credential) error {
			_, err := customers.DisableCustomer(ctx, with(&identitypb.DisableCustomerRequest{CustomerId: e.c.customerID.String()}, cr))
			return err
		},
		"CreateGatewayInterface": func(cr credential) error {
			_, err := e.admin.CreateGatewayInterface(ctx, with(&gatewaypb.CreateGatewayInterfaceRequest{
				PluginName: "epay", DisplayName: "Attacker's", Config: mustStruct(t, map[string]any{"api_url": "https://evil.example/", "pid": "1", "key": "k"}),
			}, cr))
			return err
		},
		"CreateAdminApiKey": func(cr credential) error {
			_, err := ids.CreateAdminApiKey(ctx, with(&identitypb.CreateAdminApiKeyRequest{Name: "wider", Scope: "admin"}, cr))
			return err
		},
		"RevokeAdminApiKey": func(cr credential) error {
			_, err := ids.RevokeAdminApiKey(ctx, with(&identitypb.RevokeAdminApiKeyRequest{Id: read.id}, cr))
			return err
		},
		"ChangePassword": func(cr credential) error {
			_, err := ids.ChangePassword(ctx, with(&identitypb.ChangePasswordRequest{CurrentPassword: "bootstrap-password", NewPassword: "taken over by a key"}, cr))
			return err
		},
		"Logout": func(cr credential) error {
			_, err := ids.Logout(ctx, with(&identitypb.LogoutRequest{}, cr))
			return err
		},
	}
	for who, tc := range map[string]struct {
		k     adminKey
		calls []string
	}{
		"read key":    {read, []string{"RefundPayment", "ConfirmBankTransfer", "AdjustBalance", "DisableCustomer", "CreateGatewayInterface", "CreateAdminApiKey"}},
		"operate key": {operate, []string{"AdjustBalance", "DisableCustomer", "CreateGatewayInterface", "CreateAdminApiKey", "RevokeAdminApiKey"}},
		"admin key":   {admin, []string{"CreateAdminApiKey", "RevokeAdminApiKey", "ChangePassword", "Logout"}},
	} {
		for _, name := range tc.calls {
			err := calls[name](tc.k.cred)
			require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%s calling %s: %v", who, name, err)
		}
	}
	require.Equal(t, before, moneyState(t, e))
	require.Equal(t, keysBefore, e.count(t, `SELECT count(*) FROM admin_api_keys WHERE revoked_at IS NULL`))
	require.Zero(t, e.count(t, `SELECT count(*) FROM customers WHERE disabled_at IS NOT NULL`))
	require.Zero(t, e.count(t, `SELECT count(*) FROM gateway_interfaces WHERE display_name = 'Attacker''s'`))
	_, err := ids.GetMe(ctx, with(&identitypb.GetMeRequest{}, e.c.admin))
	require.NoError(t, err, "the admin's session and password are untouched")

	// Within its scope a key passes to the operation, which decides: the
	// epay payment is no bank transfer.
	err = calls["ConfirmBankTransfer"](operate.cred)
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
}

// Origins that only look like the allowed one — a suffix, a prefix, another
// scheme or port, the opaque "null" of a sandboxed frame or a file — get no
// CORS headers from any route, on the preflight or the real call, so a page
// there cannot read an answer; nor does the allowed origin get them on the
// routes that are never cross-origin (callbacks, the console, the CSV
// exports), and no answer ever allows credentials.
func TestDisallowedOriginsGetNoCORSHeadersAnywhere(t *testing.T) {
	t.Parallel()
	cfg := testConfig(testdb.URL(t))
	cfg.Server.CORSAllowedOrigins = []string{"https://shop.example"}
	r := start(t, cfg)
	api := []string{
		r.baseURL + identitypbconnect.IdentityServiceGetMeProcedure,
		r.baseURL + paymentpbconnect.PaymentServiceGetPaymentProcedure,
	}
	never := []string{
		r.baseURL + "/callbacks/7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f",
		r.baseURL + cfg.Server.AdminPath + "/",
		r.baseURL + "/export/payments.csv",
	}
	call := func(method, url, origin string) http.Header {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(`{}`))
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		if method == http.MethodOptions {
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "content-type")
		} else {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Cookie", "paymentd_admin=forged")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.Header
	}
	requireNoCORS := func(h http.Header, what string) {
		t.Helper()
		for _, name := range []string{"Access-Control-Allow-Origin", "Access-Control-Allow-Methods", "Access-Control-Allow-Headers", "Access-Control-Expose-Headers", "Access-Control-Allow-Credentials"} {
			require.Empty(t, h.Get(name), "%s: %s", what, name)
		}
	}
	for _, origin := range []string{
		"https://evil.example",
		"https://shop.example.evil.example",
		"https://evilshop.example",
		"http://shop.example",
		"https://shop.example:8443",
		"null",
	} {
		for _, url := range append(append([]string{}, api...), never...) {
			requireNoCORS(call(http.MethodOptions, url, origin), "preflight from "+origin+" to "+url)
			requireNoCORS(call(http.MethodPost, url, origin), "call from "+origin+" to "+url)
		}
	}
	for _, url := range never {
		requireNoCORS(call(http.MethodOptions, url, "https://shop.example"), "preflight to "+url)
		requireNoCORS(call(http.MethodGet, url, "https://shop.example"), "call to "+url)
	}
	// The allowed origin itself is answered, without credentials: the
	// test above would pass on a server without CORS at all.
	h := call(http.MethodPost, api[0], "https://shop.example")
	require.Equal(t, "https://shop.example", h.Get("Access-Control-Allow-Origin"))
	require.Empty(t, h.Get("Access-Control-Allow-Credentials"))
}
