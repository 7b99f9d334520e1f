package main

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/testdb"
)

// upgradeFromFile names the commit the upgrade test upgrades from: the
// last landed one, updated each round, so that CI runs the upgrade from
// what was landed before the change under test.
const upgradeFromFile = ".ci/upgrade-from"

// The upgrade an operator makes: the previous landed commit's binary makes
// and fills a database through its API (a customer, an order, a payment
// paid by an epay callback), stops on SIGTERM, and this code starts on
// that database. Either the upgrade works — /ready, the old data reads
// back, a new customer registers and pays, the trends answer, no error is
// logged, `paymentd verify` is clean — or the start is refused by the
// schema check in one line with exit 2. Never a start that serves and
// fails later (issue 30: /ready 200, then Register failing on a missing
// column).
func TestUpgradeFromTheLastLandedCommitWorksOrIsRefusedInOneLine(t *testing.T) {
	t.Parallel()
	began := time.Now()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	from := upgradeFrom(t, root)

	old := filepath.Join(t.TempDir(), "src")
	extractCommit(t, root, from, old)
	oldBin := buildPaymentd(t, old)
	t.Logf("built %s in %s", from[:12], time.Since(began).Round(time.Second))

	fake := epay.New(epay.Options{})
	require.NoError(t, fake.Start())
	t.Cleanup(fake.Close)
	dbURL := testdb.EmptyURL(t)
	port := freeTCPPort(t)

	// The previous build makes and fills the database.
	prev := startPaymentd(t, "previous", oldBin, upgradeEnv(dbURL, port, filepath.Join(old, "plugins")))
	require.True(t, prev.waitReady(t), "the previous build did not start:\n%s", prev.logTail())
	api := newUpgradeAPI(prev.baseURL)
	made := api.fill(t, fake.URL())
	prev.stop(t)
	t.Logf("the previous build made and filled the database; %s so far", time.Since(began).Round(time.Second))

	// This code on that database: served, or refused in one line.
	self, err := os.Executable()
	require.NoError(t, err)
	cur := startPaymentd(t, "current", self, append(upgradeEnv(dbURL, port, repoPlugins(t)), runMainEnv+"=1"))
	if !cur.waitReady(t) {
		code := cur.exitCode()
		last := lastLine(cur.output())
		require.Equal(t, exitUsage, code, "neither served nor refused by the schema check:\n%s", cur.logTail())
		require.True(t, strings.HasPrefix(last, "paymentd: schema check: "), "the refusal is the schema check's line: %s", last)
		t.Logf("refused, as the schema check does on a database it does not serve (%s in all): %s", time.Since(began).Round(time.Second), last)
		return
	}
	api = newUpgradeAPI(cur.baseURL)
	api.checkUpgraded(t, made)
	cur.stop(t)
	require.Empty(t, errorLines(cur.output()), "the upgraded service logged errors")

	verify := exec.Command(self, "verify")
	verify.Env = append(childEnv(upgradeEnv(dbURL, port, repoPlugins(t))), runMainEnv+"=1")
	out, err := verify.CombinedOutput()
	require.NoError(t, err, "paymentd verify after the upgrade:\n%s", out)
	t.Logf("upgraded from %s: served, old data read back, new payment settled, verify clean (%s in all)",
		from[:12], time.Since(began).Round(time.Second))
}

// upgradeFrom reads the commit of .ci/upgrade-from and makes sure the
// checkout has it.
func upgradeFrom(t *testing.T, root string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, upgradeFromFile))
	require.NoError(t, err)
	var commit string
	for _, l := range strings.Split(string(raw), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			commit = l
			break
		}
	}
	require.Regexp(t, `^[0-9a-f]{40}$`, commit, "%s names a full commit id", upgradeFromFile)
	out, err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput()
	if err != nil {
		t.Fatalf("the upgrade test starts from commit %s (%s), which this checkout does not have (%v: %s): "+
			"run the tests in a full clone of the repository (git fetch --unshallow in a shallow one)",
			commit, upgradeFromFile, err, strings.TrimSpace(string(out)))
	}
	return commit
}

// extractCommit writes commit's tree into dir with git archive, which
// reads the repository and changes nothing in it (a worktree would be
// registered in .git until pruned, and left behind by a killed test).
func extractCommit(t *testing.T, root, commit, dir string) {
	t.Helper()
	cmd := exec.Command("git", "-C", root, "archive", "--format=tar", commit)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	tr := tar.NewReader(bufio.NewReader(stdout))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		require.True(t, strings.HasPrefix(path, dir+string(filepath.Separator)), "archive entry %q", h.Name)
		switch h.Typeflag {
		case tar.TypeDir:
			require.NoError(t, os.MkdirAll(path, 0o755))
		case tar.TypeSymlink:
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			require.NoError(t, os.Symlink(h.Linkname, path))
		case tar.TypeReg:
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			require.NoError(t, err)
			_, err = io.Copy(f, tr)
			require.NoError(t, errors.Join(err, f.Close()))
		}
	}
	require.NoError(t, cmd.Wait(), "git archive %s: %s", commit, stderr.String())
}

// buildPaymentd builds dir's paymentd as deploy/build.sh compiles it
// (static, -trimpath, grpcnotrace), so that Go's build cache serves every
// package the commits share.
func buildPaymentd(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "paymentd")
	build := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-tags", "grpcnotrace", "-o", bin, "./cmd/paymentd")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building the previous commit's paymentd:\n%s", out)
	return bin
}

// upgradeEnv is the configuration both builds run with: keys both know.
func upgradeEnv(dbURL string, port int, plugins string) []string {
	return []string{
		"PAYMENTD_DB__URL=" + dbURL,
		"PAYMENTD_SERVER__HOST=127.0.0.1",
		"PAYMENTD_SERVER__PORT=" + strconv.Itoa(port),
		fmt.Sprintf("PAYMENTD_SERVER__PUBLIC_URL=http://127.0.0.1:%d", port),
		"PAYMENTD_JWT__SECRET=" + cliSecret,
		"PAYMENTD_BOOTSTRAP__ADMIN_PASSWORD=" + upgradeAdminPassword,
		"PAYMENTD_PLUGINS__DIR=" + plugins,
		"PAYMENTD_METRICS__ENABLED=false",
		"PAYMENTD_RATE_LIMIT__ENABLED=false",
		"PAYMENTD_LOG__FORMAT=json",
		// The merchant key is stored encrypted, as in production.
		"PAYMENTD_SECRETS__CURRENT=up1",
		"PAYMENTD_SECRETS__KEYS__UP1=" + b64Key(7),
	}
}

const upgradeAdminPassword = "upgrade-bootstrap-password"

// childEnv is ours without PAYMENTD_* variables, then env.
func childEnv(env []string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PAYMENTD_") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// paymentdProcess is a paymentd serve started by the test.
type paymentdProcess struct {
	name    string
	baseURL string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
}

func startPaymentd(t *testing.T, name, bin string, env []string) *paymentdProcess {
	t.Helper()
	dir := t.TempDir()
	p := &paymentdProcess{name: name, logPath: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PAYMENTD_SERVER__PUBLIC_URL="); ok {
			p.baseURL = v
		}
	}
	f, err := os.Create(p.logPath)
	require.NoError(t, err)
	p.cmd = exec.Command(bin, "serve")
	p.cmd.Dir = dir
	p.cmd.Env = childEnv(env)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	require.NoError(t, p.cmd.Start())
	go func() {
		p.waitErr = p.cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitReady waits for /ready to answer 200 (true) or the process to exit
// (false).
func (p *paymentdProcess) waitReady(t *testing.T) bool {
	t.Helper()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return false
		default:
		}
		if resp, err := client.Get(p.baseURL + "/ready"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case <-p.done:
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%s paymentd neither ready nor stopped within 90 s:\n%s", p.name, p.logTail())
	return false
}

// stop sends SIGTERM and requires a clean exit.
func (p *paymentdProcess) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s paymentd did not stop within 60 s of SIGTERM:\n%s", p.name, p.logTail())
	}
	require.NoError(t, p.waitErr, "%s paymentd's exit:\n%s", p.name, p.logTail())
}

// exitCode is the code of an exited process.
func (p *paymentdProcess) exitCode() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

func (p *paymentdProcess) output() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

func (p *paymentdProcess) logTail() string {
	lines := strings.Split(strings.TrimSpace(p.output()), "\n")
	return strings.Join(lines[max(0, len(lines)-30):], "\n")
}

// errorLines are the JSON log lines at level ERROR.
func errorLines(log string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		var rec struct {
			Level string `json:"level"`
		}
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Level == "ERROR" {
			out = append(out, l)
		}
	}
	return out
}

// upgradeAPI is a client of a running paymentd, as the shop, the console
// and a gateway call it.
type upgradeAPI struct {
	base     string
	ids      identitypbconnect.IdentityServiceClient
	gateways gatewaypbconnect.GatewayAdminServiceClient
	orders   orderpbconnect.OrderServiceClient
	payments paymentpbconnect.PaymentServiceClient
	stats    paymentpbconnect.PaymentAdminServiceClient
}

func newUpgradeAPI(base string) *upgradeAPI {
	c := http.DefaultClient
	return &upgradeAPI{
		base:     base,
		ids:      identitypbconnect.NewIdentityServiceClient(c, base),
		gateways: gatewaypbconnect.NewGatewayAdminServiceClient(c, base),
		orders:   orderpbconnect.NewOrderServiceClient(c, base),
		payments: paymentpbconnect.NewPaymentServiceClient(c, base),
		stats:    paymentpbconnect.NewPaymentAdminServiceClient(c, base),
	}
}

// filled is what the previous build wrote.
type filled struct {
	customerEmail, gateway, product, order, payment string
}

const upgradeCustomerPassword = "a long enough password"

func authed[T any](msg *T, header, value string) *connect.Request[T] {
	r := connect.NewRequest(msg)
	r.Header().Set(header, value)
	return r
}

// adminCookie signs the bootstrap admin in.
func (a *upgradeAPI) adminCookie(t *testing.T) string {
	t.Helper()
	res, err := a.ids.AdminLogin(context.Background(), connect.NewRequest(&identitypb.AdminLoginRequest{
		Username: "admin", Password: upgradeAdminPassword}))
	require.NoError(t, err)
	c := res.Header().Get("Set-Cookie")
	require.NotEmpty(t, c)
	return strings.SplitN(c, ";", 2)[0]
}

// fill makes an epay interface, a product, a customer, an order and a
// payment the gateway's callback settles.
func (a *upgradeAPI) fill(t *testing.T, epayURL string) filled {
	t.Helper()
	ctx := context.Background()
	admin := a.adminCookie(t)
	cfg, err := structpb.NewStruct(map[string]any{"api_url": epayURL + "/", "pid": epay.DefaultPID, "key": epay.DefaultKey})
	require.NoError(t, err)
	gw, err := a.gateways.CreateGatewayInterface(ctx, authed(&gatewaypb.CreateGatewayInterfaceRequest{
		PluginName: "epay", DisplayName: "Alipay", Config: cfg}, "Cookie", admin))
	require.NoError(t, err)
	f := filled{customerEmail: "alice@example.com", gateway: gw.Msg.GetGatewayInterface().GetId()}
	_, err = a.gateways.EnableGatewayInterface(ctx, authed(&gatewaypb.EnableGatewayInterfaceRequest{Id: f.gateway}, "Cookie", admin))
	require.NoError(t, err)
	prod, err := a.orders.CreateProduct(ctx, authed(&orderpb.CreateProductRequest{Name: "VPS 1个月", Price: "12.30", Currency: "CNY"}, "Cookie", admin))
	require.NoError(t, err)
	f.product = prod.Msg.GetProduct().GetId()
	reg, err := a.ids.Register(ctx, connect.NewRequest(&identitypb.RegisterRequest{
		Email: f.customerEmail, Password: upgradeCustomerPassword, Name: "Alice"}))
	require.NoError(t, err)
	f.order, f.payment = a.payOrder(t, reg.Msg.GetAccessToken(), f.product, f.gateway, "T-UPGRADE-1")
	return f
}

// payOrder places an order as the customer, pays it through gw and has the
// gateway's callback settle it; it returns the order and payment ids.
func (a *upgradeAPI) payOrder(t *testing.T, token, product, gw, tradeNo string) (orderID, paymentID string) {
	t.Helper()
	ctx := context.Background()
	bearer := "Bearer " + token
	o, err := a.orders.CreateOrder(ctx, authed(&orderpb.CreateOrderRequest{ProductId: product}, "Authorization", bearer))
	require.NoError(t, err)
	p, err := a.payments.CreatePayment(ctx, authed(&paymentpb.CreatePaymentRequest{
		OrderId: o.Msg.GetOrder().GetId(), GatewayInterfaceId: gw, ReturnUrl: "https://shop.example/done"}, "Authorization", bearer))
	require.NoError(t, err)
	paymentID = p.Msg.GetPayment().GetId()

	v := url.Values{}
	for k, s := range map[string]string{"pid": epay.DefaultPID, "trade_no": tradeNo, "out_trade_no": paymentID,
		"type": "alipay", "name": "VPS", "money": "12.30", "trade_status": "TRADE_SUCCESS"} {
		v.Set(k, s)
	}
	v.Set("sign", epay.Sign(v, epay.DefaultKey))
	v.Set("sign_type", "MD5")
	resp, err := http.Get(a.base + "/callbacks/" + gw + "?" + v.Encode())
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, errors.Join(err, resp.Body.Close()))
	require.Equal(t, http.StatusOK, resp.StatusCode, "the gateway's callback: %s", body)

	got, err := a.payments.GetPayment(ctx, authed(&paymentpb.GetPaymentRequest{Id: paymentID}, "Authorization", bearer))
	require.NoError(t, err)
	require.Equal(t, "success", got.Msg.GetPayment().GetStatus())
	return o.Msg.GetOrder().GetId(), paymentID
}

// checkUpgraded reads the previous build's data back and takes a new
// customer's payment.
func (a *upgradeAPI) checkUpgraded(t *testing.T, f filled) {
	t.Helper()
	ctx := context.Background()
	login, err := a.ids.Login(ctx, connect.NewRequest(&identitypb.LoginRequest{Email: f.customerEmail, Password: upgradeCustomerPassword}))
	require.NoError(t, err, "the previous build's customer signs in")
	bearer := "Bearer " + login.Msg.GetAccessToken()
	p, err := a.payments.GetPayment(ctx, authed(&paymentpb.GetPaymentRequest{Id: f.payment}, "Authorization", bearer))
	require.NoError(t, err)
	require.Equal(t, "success", p.Msg.GetPayment().GetStatus())
	require.Equal(t, "12.30", p.Msg.GetPayment().GetAmount())
	o, err := a.orders.GetOrder(ctx, authed(&orderpb.GetOrderRequest{Id: f.order}, "Authorization", bearer))
	require.NoError(t, err)
	require.NotEqual(t, "pending", o.Msg.GetOrder().GetStatus(), "the paid order stays paid")

	reg, err := a.ids.Register(ctx, connect.NewRequest(&identitypb.RegisterRequest{
		Email: "bob@example.com", Password: upgradeCustomerPassword, Name: "Bob"}))
	require.NoError(t, err, "a new customer registers")
	a.payOrder(t, reg.Msg.GetAccessToken(), f.product, f.gateway, "T-UPGRADE-2")

	admin := a.adminCookie(t)
	success := "success"
	list, err := a.payments.ListPayments(ctx, authed(&paymentpb.ListPaymentsRequest{Pagination: &paymentpb.PageRequest{}, Status: &success}, "Cookie", admin))
	require.NoError(t, err)
	require.Len(t, list.Msg.GetPayments(), 2, "both builds' payments")
	trends, err := a.stats.GetPaymentTrends(ctx, authed(&paymentpb.GetPaymentTrendsRequest{}, "Cookie", admin))
	require.NoError(t, err)
	var succeeded uint64
	for _, c := range trends.Msg.GetCurrencies() {
		for _, d := range c.GetDays() {
			succeeded += d.GetSucceeded()
		}
	}
	require.EqualValues(t, 2, succeeded, "the trends count both payments")
}
