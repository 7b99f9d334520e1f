package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/pgcluster"
	"github.com/rustbill/paymentd/internal/secretpass"
	"github.com/rustbill/paymentd/internal/secrets"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// A second key for rotations: "test-key-2-test-key-2-test-key-2".
const (
	testKeyID2 = "test2"
	testKey2   = "dGVzdC1rZXktMi10ZXN0LWtleS0yLXRlc3Qta2V5LTI="
)

func keyring(t testing.TB, current string, keys map[string]string) *secrets.Keyring {
	t.Helper()
	k, err := config.Secrets{Current: current, Keys: keys}.Keyring()
	require.NoError(t, err)
	return k
}

// storedSecret is the stored value of an interface's "key".
func (e *payBundle) storedSecret(t testing.TB, gw string) string {
	t.Helper()
	var k string
	require.NoError(t, e.r.app.Pool().QueryRow(context.Background(), `SELECT config->>'key' FROM gateway_interfaces WHERE id = $1`, gw).Scan(&k))
	return k
}

// createEpayInterface configures an enabled epay interface on fake with
// merchant pid and key, as an admin does, and returns its id.
func (e *payBundle) createEpayInterface(t testing.TB, name string, fake *epay.Server, pid, key string) string {
	t.Helper()
	return e.addGateway(t, "epay", name, map[string]any{"api_url": fake.URL() + "/", "pid": pid, "key": key})
}

// notifyAs is an epay notification for a payment of fake, signed with key
// as merchant pid.
func notifyAs(t testing.TB, fake *epay.Server, paymentID, pid, key string) string {
	t.Helper()
	o, ok := fake.Order(paymentID)
	require.True(t, ok)
	v := url.Values{}
	v.Set("pid", pid)
	v.Set("trade_no", o.TradeNo)
	v.Set("out_trade_no", paymentID)
	v.Set("type", "alipay")
	v.Set("name", "VPS")
	v.Set("money", o.Money)
	v.Set("trade_status", "TRADE_SUCCESS")
	v.Set("sign", epay.Sign(v, key))
	v.Set("sign_type", "MD5")
	return v.Encode()
}

// postCallback sends a gateway notification to base's /callbacks/gw and
// returns the status and body.
func postCallback(t testing.TB, base, gw, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(base+"/callbacks/"+gw, "application/x-www-form-urlencoded", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// pgDump is pg_dump of the database at dbURL, as plain SQL.
func pgDump(t *testing.T, dbURL string) string {
	t.Helper()
	dir, err := pgcluster.FindBinaries()
	require.NoError(t, err, "pg_dump is needed: install PostgreSQL's client programs")
	var out, errb bytes.Buffer
	cmd := exec.Command(filepath.Join(dir, "pg_dump"), "--no-owner", "--dbname", dbURL)
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), "%s", errb.String())
	return out.String()
}

func dbURLOf(r *running) string { return r.app.Pool().Config().ConnString() }

func TestPgDumpOfADatabaseWithConfiguredInterfacesHoldsNoSecretValue(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	// Interfaces configured through the API, one of them updated with a new
	// key (the old value must be gone too), a payment made through the
	// first: every table a secret could reach has rows.
	alpha := e.createEpayInterface(t, "alpha", e.fake, "3003", "merchant-key-alpha-7Qe2")
	e.createEpayInterface(t, "beta", e.fake, "4004", "merchant-key-beta-9Zx4")
	_, err := e.admin.UpdateGatewayInterface(ctx, with(&gatewaypb.UpdateGatewayInterfaceRequest{
		Id: alpha, Config: mustStruct(t, map[string]any{"api_url": e.fake.URL() + "/", "pid": "3003", "key": "merchant-key-gamma-3Kp1"}),
	}, e.c.admin))
	require.NoError(t, err)
	e.createPayment(t, e.order(t))

	dump := pgDump(t, dbURLOf(e.r))
	require.Contains(t, dump, "COPY public.gateway_interfaces", "the dump has the table")
	require.Contains(t, dump, `"key": "enc:v1:`+testKeyID+`:`, "the secrets are there, encrypted")
	for _, secret := range []string{`"` + epay.DefaultKey + `"`, "merchant-key-alpha-7Qe2", "merchant-key-beta-9Zx4", "merchant-key-gamma-3Kp1"} {
		require.NotContains(t, dump, secret)
	}
	require.NotContains(t, dump, testKey, "nor the key that encrypts them")
}

// The procedure of docs/operations.md: every instance holds the new key,
// the new key encrypts, `secrets rotate` (secretpass.Rotate, which the
// command runs) re-encrypts, the old key is removed. An instance that has
// only the new key then serves every interface: payments are created and
// callbacks verified through the fake epay gateway, including a payment
// made before the rotation.
func TestRotationToANewKeyLeavesEveryInterfaceWorking(t *testing.T) {
	t.Parallel()
	both := map[string]string{testKeyID: testKey, testKeyID2: testKey2}
	e := startPayments(t, func(c *config.Config) { c.Secrets.Keys = both })
	e.fake.DropNotify(true)
	ctx := context.Background()
	dollar := e.dollarGateway(t)
	for _, gw := range []string{e.epayGW, dollar} {
		require.True(t, strings.HasPrefix(e.storedSecret(t, gw), "enc:v1:"+testKeyID+":"))
	}
	before := e.createPayment(t, e.order(t)).GetPayment().GetId()

	rep, err := secretpass.Rotate(ctx, e.r.app.Pool(), keyring(t, testKeyID2, both), audit.System("cli:test"), time.Now())
	require.NoError(t, err)
	require.Equal(t, 2, rep.Resealed)
	require.Equal(t, map[string]int{testKeyID2: 2}, rep.ByKey)
	require.Empty(t, rep.Unreadable)
	for _, gw := range []string{e.epayGW, dollar} {
		require.True(t, strings.HasPrefix(e.storedSecret(t, gw), "enc:v1:"+testKeyID2+":"))
	}

	// Another instance on the same database, with the new key alone.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := testConfig(dbURLOf(e.r))
	cfg.Plugins.Dir = e.pluginDir
	cfg.Server.PublicURL = "http://" + ln.Addr().String()
	cfg.Secrets = config.Secrets{Current: testKeyID2, Keys: map[string]string{testKeyID2: testKey2}}
	r2 := startOn(t, cfg, ln)
	payments2 := paymentpbconnect.NewPaymentServiceClient(http.DefaultClient, r2.baseURL)

	// The payment made before the rotation settles through it.
	require.NoError(t, e.fake.Pay(before))
	status, body := postCallback(t, r2.baseURL, e.epayGW, notifyOf(t, e, before).Encode())
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "success", body)
	require.Equal(t, "success", e.getPayment(t, before).GetStatus())

	// A new payment through it, paid, verified.
	res, err := payments2.CreatePayment(ctx, with(&paymentpb.CreatePaymentRequest{
		OrderId: e.order(t), GatewayInterfaceId: e.epayGW, ReturnUrl: "https://shop.example/done",
	}, e.c.customer))
	require.NoError(t, err)
	after := res.Msg.GetPayment().GetId()
	o, ok := e.fake.Order(after)
	require.True(t, ok, "the gateway got the order, signed with the merchant key")
	require.Equal(t, r2.baseURL+"/callbacks/"+e.epayGW, o.NotifyURL)
	require.NoError(t, e.fake.Pay(after))
	_, err = payments2.HandleCallback(ctx, connect.NewRequest(&paymentpb.PaymentCallbackRequest{
		GatewayInterfaceId: e.epayGW, Payload: notifyOf(t, e, after).Encode(),
	}))
	require.NoError(t, err)
	require.Equal(t, "success", e.getPayment(t, after).GetStatus())

	// The other interface answers its test through it too.
	tested, err := gatewaypbconnect.NewGatewayAdminServiceClient(http.DefaultClient, r2.baseURL).TestGatewayInterface(ctx, with(&gatewaypb.TestGatewayInterfaceRequest{Id: dollar}, e.c.admin))
	require.NoError(t, err)
	require.True(t, tested.Msg.GetOk(), tested.Msg.GetMessage())
	require.Equal(t, 2, e.count(t, `SELECT count(*) FROM audit_log WHERE action = $1 AND actor_id = 'cli:test'`, secretpass.GatewayInterfaces.RotateAction()))
	requireLedgerClean(t, e)
}

func TestClearSecretsAreEncryptedAtTheFirstStartWithAKeyOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig(testdb.URL(t))
	cfg.Plugins.Dir = pluginDir(t)
	keys := cfg.Secrets
	cfg.Secrets = config.Secrets{Keys: map[string]string{}}

	// Without a key, a database without secrets starts (and the plugins
	// table is filled).
	first, err := app.New(ctx, cfg, logger(t))
	require.NoError(t, err)
	pool := first.Pool()
	// A database from before encryption: merchant keys in clear.
	ids := make([]uuid.UUID, 2)
	for i, key := range []string{"clear-merchant-key-1", "clear-merchant-key-2"} {
		raw, err := json.Marshal(map[string]string{"api_url": "http://127.0.0.1:9/", "pid": epay.DefaultPID, "key": key})
		require.NoError(t, err)
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO gateway_interfaces (plugin_name, display_name, config, config_schema, enabled)
			SELECT name, 'old ' || $2, $1, config_schema, true FROM plugins WHERE name = 'epay' RETURNING id`, raw, key).Scan(&ids[i]))
	}
	first.Close()

	// Without a key it no longer starts, and changes nothing.
	_, err = app.New(ctx, cfg, logger(t))
	require.ErrorIs(t, err, secretpass.ErrSecretsWithoutKey)
	require.ErrorContains(t, err, "the database holds 2 secret(s) (gateway interfaces 2, products 0, orders 0; 0 encrypted, 2 in clear) and [secrets].keys is empty")

	// Three instances start together with a key: each value is encrypted
	// once, one audit row per interface, every instance serves them.
	cfg.Secrets = keys
	apps := make([]*app.App, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i := range apps {
		wg.Go(func() { apps[i], errs[i] = app.New(ctx, cfg, logger(t)) })
	}
	wg.Wait()
	for i := range apps {
		require.NoError(t, errs[i])
		defer apps[i].Close()
	}
	pool = apps[0].Pool()
	for i, id := range ids {
		var stored string
		require.NoError(t, pool.QueryRow(ctx, `SELECT config->>'key' FROM gateway_interfaces WHERE id = $1`, id).Scan(&stored))
		require.True(t, strings.HasPrefix(stored, "enc:v1:"+testKeyID+":"), stored)
		for _, a := range apps {
			gw, err := a.Gateways().Get(ctx, id)
			require.NoError(t, err)
			require.Contains(t, gw.ConfigJSON, `"key":"clear-merchant-key-`+string(rune('1'+i))+`"`, "the plugin gets the clear value")
		}
	}
	var rows int
	var trail string
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), string_agg(before::text || after::text, ' ') FROM audit_log WHERE action = $1`,
		secretpass.GatewayInterfaces.SealAction()).Scan(&rows, &trail))
	require.Equal(t, 2, rows)
	require.NotContains(t, trail, "clear-merchant-key")
}

// A key configured under the right id with the wrong bytes opens none of
// the stored secrets: the start is refused in one line naming the setting,
// instead of an instance that answers ready while every interface fails.
// A key id missing altogether (values left under an old key) makes only
// what holds them unusable: the start goes on and says so.
func TestAWrongSecretsKeyUnderTheRightIDRefusesTheStart(t *testing.T) {
	t.Parallel()
	e := startPayments(t) // an epay interface, its key sealed under testKeyID
	require.True(t, strings.HasPrefix(e.storedSecret(t, e.epayGW), "enc:v1:"+testKeyID+":"))
	cfg := testConfig(dbURLOf(e.r))
	cfg.Plugins.Dir = e.pluginDir

	cfg.Secrets = config.Secrets{Current: testKeyID, Keys: map[string]string{testKeyID: testKey2}}
	_, err := app.New(context.Background(), cfg, logger(t))
	require.ErrorIs(t, err, secrets.ErrWrongKey)
	require.ErrorContains(t, err, "[secrets].keys."+testKeyID+" (PAYMENTD_SECRETS__KEYS__TEST1) decrypts none of the 1 stored secrets sealed under key id \"test1\"")

	logs := &testkit.Logs{}
	cfg.Secrets = config.Secrets{Current: testKeyID2, Keys: map[string]string{testKeyID2: testKey2}}
	a, err := app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	require.NoError(t, err, "only the values under the missing key are unusable")
	t.Cleanup(a.Close)
	require.Contains(t, logs.String(), "stored secrets are sealed under a key id that [secrets].keys does not hold")
	require.Contains(t, logs.String(), "key_id="+testKeyID)
}
