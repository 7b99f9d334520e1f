package deploy_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/testkit"
)

// The addresses the test's clients connect from: the operator network of
// the example is 127.0.0.2 here; the others are somewhere on the internet.
var (
	operatorIP = net.ParseIP("127.0.0.2")
	outsiderIP = net.ParseIP("127.0.0.3")
	customerIP = net.ParseIP("127.0.0.5")
	floodIP    = net.ParseIP("127.0.0.4")
	directIP   = net.ParseIP("127.0.0.7")
)

// proxied is deploy/nginx/paymentd.conf running in front of a paymentd.
type proxied struct {
	svc      *service
	fake     *epay.Server
	ca       *x509.CertPool
	httpsURL string // the proxy's TLS server
	httpURL  string // its port-80 server
	dir      string
}

// nginxBinary finds nginx, installing Debian's as root when it is missing
// (deploy/nginx/ensure-nginx.sh), as admin-ui/ensure-deps.sh does Chromium.
func nginxBinary(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("./nginx/ensure-nginx.sh")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		t.Fatalf("%s", lines[len(lines)-1])
	}
	return strings.TrimSpace(string(out))
}

// selfSigned writes a certificate for 127.0.0.1 and its key to dir and
// returns a pool that trusts it.
func selfSigned(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "paymentd proxy test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// replaceN replaces old by new in s and fails unless old occurs n times:
// the example must still say what the test rewrites.
func replaceN(t *testing.T, s, old, new string, n int) string {
	t.Helper()
	require.Equal(t, n, strings.Count(s, old), "deploy/nginx/paymentd.conf: %q", old)
	return strings.ReplaceAll(s, old, new)
}

// startProxied runs a fake epay gateway, a paymentd behind the example's
// trusted proxy setting, and nginx with deploy/nginx/paymentd.conf rewritten
// only where it names addresses and files: the upstreams, the listeners,
// the certificate and the operator network.
func startProxied(t *testing.T) *proxied {
	t.Helper()
	bin := nginxBinary(t)
	dir := t.TempDir()
	// nginx's workers read nothing from dir (the master opens the files), but
	// the directory must be reachable when they run as another user.
	require.NoError(t, os.Chmod(dir, 0o755))
	ca := selfSigned(t, dir)
	p443, p80 := testkit.FreePort(t), testkit.FreePort(t)
	p := &proxied{ca: ca, dir: dir,
		httpsURL: "https://127.0.0.1:" + strconv.Itoa(p443), httpURL: "http://127.0.0.1:" + strconv.Itoa(p80)}

	// The gateway sends its notifications to the public URL: the proxy.
	p.fake = epay.New(epay.Options{NotifyScale: 0.0001, Client: &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca}},
	}})
	require.NoError(t, p.fake.Start())
	t.Cleanup(p.fake.Close)

	p.svc = startService(t, func(c *config.Config) {
		c.Server.PublicURL = p.httpsURL
		c.Session.CookieSecure = true
		// What the example's comment asks for: the proxy's address as the
		// instances see it.
		c.Server.TrustedProxies = []string{"127.0.0.1/32"}
		c.RateLimit = config.RateLimit{Enabled: true, LoginPerSec: 5, RegisterPerSec: 1}
	})

	conf := readRepoFile(t, "deploy/nginx/paymentd.conf")
	conf = replaceN(t, conf, "    server 10.0.1.11:50051;\n    server 10.0.1.12:50051;\n", "    server "+p.svc.addr+";\n", 2)
	conf = replaceN(t, conf, "listen 80;", fmt.Sprintf("listen 127.0.0.1:%d;", p80), 1)
	conf = replaceN(t, conf, "listen 443 ssl http2;", fmt.Sprintf("listen 127.0.0.1:%d ssl http2;", p443), 1)
	conf = replaceN(t, conf, "/etc/nginx/tls/pay.example.com.crt", filepath.Join(dir, "cert.pem"), 1)
	conf = replaceN(t, conf, "/etc/nginx/tls/pay.example.com.key", filepath.Join(dir, "key.pem"), 1)
	conf = replaceN(t, conf, "allow 10.8.0.0/24;", "allow "+operatorIP.String()+";", 3)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "paymentd.conf"), []byte(conf), 0o644))

	user := ""
	if os.Geteuid() == 0 {
		user = "user root root;" // the workers need nothing of nobody's
	}
	main := fmt.Sprintf(`%s
daemon off;
worker_processes 1;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log notice;
events { worker_connections 256; }
http {
    access_log %[2]s/access.log;
    client_body_temp_path %[2]s/body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    include %[2]s/paymentd.conf;
}
`, user, dir)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main), 0o644))

	check := exec.Command(bin, "-t", "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))
	out, err := check.CombinedOutput()
	require.NoError(t, err, "nginx -t: %s", out)

	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))
	cmd.Stdout, cmd.Stderr = t.Output(), t.Output()
	cmd.WaitDelay = 5 * time.Second
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT) // finish requests, then exit
		_ = cmd.Wait()
		if t.Failed() {
			for _, f := range []string{"error.log", "access.log"} {
				b, _ := os.ReadFile(filepath.Join(dir, f))
				t.Logf("nginx %s:\n%s", f, b)
			}
		}
	})
	require.Eventually(t, func() bool {
		c, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p443), &tls.Config{RootCAs: ca})
		if err != nil {
			return false
		}
		c.Close()
		return true
	}, 10*time.Second, 20*time.Millisecond, "nginx does not answer on its TLS port")
	return p
}

// client is an HTTPS client of the proxy connecting from src, over HTTP/2
// (h2) or HTTP/1.1.
func (p *proxied) client(t *testing.T, src net.IP, h2 bool) *http.Client {
	t.Helper()
	tr := &http.Transport{
		DialContext:       (&net.Dialer{LocalAddr: &net.TCPAddr{IP: src}}).DialContext,
		TLSClientConfig:   &tls.Config{RootCAs: p.ca},
		ForceAttemptHTTP2: h2,
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		tr.TLSClientConfig.NextProtos = []string{"http/1.1"}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 15 * time.Second}
}

// grpcConn is a grpc-go connection to the proxy over TLS (HTTP/2) from src.
func (p *proxied) grpcConn(t *testing.T, src net.IP) *grpc.ClientConn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: src}}
	conn, err := grpc.NewClient("passthrough:///"+strings.TrimPrefix(p.httpsURL, "https://"),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: p.ca})),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// post sends a Connect unary call with a JSON body and returns the answer.
func post(t *testing.T, c *http.Client, url, body string, header http.Header) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// refusedByProxy says whether an answer is nginx's 403 rather than
// anything paymentd says.
func refusedByProxy(code int, h http.Header, body string) bool {
	return code == http.StatusForbidden && strings.HasPrefix(h.Get("Content-Type"), "text/html") && strings.Contains(body, "nginx")
}

func withHeader[T any](msg *T, k, v string) *connect.Request[T] {
	r := connect.NewRequest(msg)
	r.Header().Set(k, v)
	return r
}

// Through the example's nginx: gRPC (grpc-go over TLS, HTTP/2), gRPC-Web
// and Connect (HTTP/1.1) reach paymentd over h2c; a gateway's callback
// through the public URL settles a payment; every admin procedure of the
// policy, the admin login, the console and the exports are refused by the
// proxy to an address outside the operator network and reach paymentd from
// inside it, while every other procedure reaches paymentd from anywhere;
// paymentd counts a client behind the proxy by its own address, whatever
// X-Forwarded-For the client sends, and believes X-Forwarded-For from no
// one but the proxy.
func TestNginxExampleFrontsPaymentdAndKeepsAdminsToTheOperatorNetwork(t *testing.T) {
	t.Parallel()
	p := startProxied(t)
	ctx := context.Background()
	operatorH1 := p.client(t, operatorIP, false)

	// An admin signs in from the operator network and sets up a gateway
	// interface and a product, over Connect through the proxy.
	ids := identitypbconnect.NewIdentityServiceClient(operatorH1, p.httpsURL)
	login, err := ids.AdminLogin(ctx, connect.NewRequest(&identitypb.AdminLoginRequest{Username: "admin", Password: "bootstrap-password"}))
	require.NoError(t, err)
	adminCookie := strings.SplitN(login.Header().Get("Set-Cookie"), ";", 2)[0]
	require.NotEmpty(t, adminCookie)
	gws := gatewaypbconnect.NewGatewayAdminServiceClient(operatorH1, p.httpsURL)
	cfg, err := structpb.NewStruct(map[string]any{"api_url": p.fake.URL() + "/", "pid": epay.DefaultPID, "key": epay.DefaultKey})
	require.NoError(t, err)
	gw, err := gws.CreateGatewayInterface(ctx, withHeader(&gatewaypb.CreateGatewayInterfaceRequest{PluginName: "epay", DisplayName: "Alipay", Config: cfg}, "Cookie", adminCookie))
	require.NoError(t, err)
	gwID := gw.Msg.GetGatewayInterface().GetId()
	_, err = gws.EnableGatewayInterface(ctx, withHeader(&gatewaypb.EnableGatewayInterfaceRequest{Id: gwID}, "Cookie", adminCookie))
	require.NoError(t, err)
	orders := orderpbconnect.NewOrderServiceClient(operatorH1, p.httpsURL)
	prod, err := orders.CreateProduct(ctx, withHeader(&orderpb.CreateProductRequest{Name: "VPS", Price: "12.30", Currency: "CNY"}, "Cookie", adminCookie))
	require.NoError(t, err)

	// A customer from the internet: registers over gRPC (HTTP/2 only, with
	// trailers), orders over gRPC-Web, pays over Connect on HTTP/1.1.
	conn := p.grpcConn(t, customerIP)
	var reg identitypb.RegisterResponse
	require.NoError(t, conn.Invoke(ctx, identitypbconnect.IdentityServiceRegisterProcedure,
		&identitypb.RegisterRequest{Email: "alice@example.com", Password: "long enough password", Name: "Alice"}, &reg))
	bearer := "Bearer " + reg.GetAccessToken()
	require.NotEmpty(t, reg.GetAccessToken())
	webOrders := orderpbconnect.NewOrderServiceClient(p.client(t, customerIP, true), p.httpsURL, connect.WithGRPCWeb())
	order, err := webOrders.CreateOrder(ctx, withHeader(&orderpb.CreateOrderRequest{ProductId: prod.Msg.GetProduct().GetId()}, "Authorization", bearer))
	require.NoError(t, err)
	payments := paymentpbconnect.NewPaymentServiceClient(p.client(t, customerIP, false), p.httpsURL, connect.WithProtoJSON())
	pay, err := payments.CreatePayment(ctx, withHeader(&paymentpb.CreatePaymentRequest{
		OrderId: order.Msg.GetOrder().GetId(), GatewayInterfaceId: gwID, ReturnUrl: "https://shop.example/done",
	}, "Authorization", bearer))
	require.NoError(t, err)
	paymentID := pay.Msg.GetPayment().GetId()

	// The buyer pays; the gateway notifies the public URL, the proxy.
	require.NoError(t, p.fake.Pay(paymentID))
	require.Eventually(t, func() bool {
		got, err := payments.GetPayment(ctx, withHeader(&paymentpb.GetPaymentRequest{Id: paymentID}, "Authorization", bearer))
		return err == nil && got.Msg.GetPayment().GetStatus() == "success"
	}, 20*time.Second, 50*time.Millisecond, "the callback through the proxy settles the payment")
	for _, n := range p.fake.Notifications() {
		require.True(t, strings.HasPrefix(n.URL, p.httpsURL+"/callbacks/"+gwID), n.URL)
	}
	// The payment is settled when its transaction commits, a moment before
	// the answer crosses the proxy back to the gateway: wait for that too.
	require.Eventually(t, func() bool {
		for _, n := range p.fake.Notifications() {
			if n.Acked {
				return true
			}
		}
		return false
	}, 20*time.Second, 20*time.Millisecond, "the gateway got paymentd's acknowledgement through the proxy")

	// Every procedure of the policy, from outside and from the operator
	// network: the admin ones (and the admin login) stop at the proxy
	// outside; everything reaches paymentd inside.
	policy, err := app.Policy()
	require.NoError(t, err)
	procedures := make([]string, 0, len(policy))
	for proc := range policy {
		procedures = append(procedures, proc)
	}
	sort.Strings(procedures)
	outsiderH1 := p.client(t, outsiderIP, false)
	var adminOnly int
	for _, proc := range procedures {
		operatorOnly := policy[proc] == auth.AdminOnly || proc == identitypbconnect.IdentityServiceAdminLoginProcedure
		code, h, body := post(t, outsiderH1, p.httpsURL+proc, "{}", nil)
		if operatorOnly {
			adminOnly++
			require.True(t, refusedByProxy(code, h, body), "%s from outside the operator network reached paymentd (%d %s)", proc, code, body)
		} else {
			require.True(t, strings.HasPrefix(h.Get("Content-Type"), "application/json"), "%s from outside must reach paymentd, got %d %s", proc, code, body)
		}
		code, h, body = post(t, operatorH1, p.httpsURL+proc, "{}", nil)
		require.True(t, strings.HasPrefix(h.Get("Content-Type"), "application/json"), "%s from the operator network must reach paymentd, got %d %s", proc, code, body)
	}
	require.Greater(t, adminOnly, 40)
	// Spelled otherwise, still refused: nginx matches the decoded path, the
	// admin services in any letter case.
	for _, path := range []string{"/billing.payment.Payment%41dminService/ListRefunds", "/billing.payment.paymentadminservice/ListRefunds", "//billing.payment.PaymentAdminService/ListRefunds"} {
		code, h, body := post(t, outsiderH1, p.httpsURL+path, "{}", nil)
		require.True(t, refusedByProxy(code, h, body), "%s: %d %s", path, code, body)
	}
	// Over gRPC the refusal is PermissionDenied.
	var refunds paymentpb.ListRefundsResponse
	err = p.grpcConn(t, outsiderIP).Invoke(ctx, paymentpbconnect.PaymentAdminServiceListRefundsProcedure, &paymentpb.ListRefundsRequest{}, &refunds)
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	var got paymentpb.GetPaymentResponse
	require.NoError(t, conn.Invoke(metadata.AppendToOutgoingContext(ctx, "authorization", bearer),
		paymentpbconnect.PaymentServiceGetPaymentProcedure, &paymentpb.GetPaymentRequest{Id: paymentID}, &got))
	require.Equal(t, "success", got.GetPayment().GetStatus(), "a customer's call over gRPC")

	// The console and the exports.
	get := func(c *http.Client, path string) (int, http.Header, string) {
		resp, err := c.Get(p.httpsURL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, resp.Header, string(b)
	}
	for _, path := range []string{"/admin/", "/admin/payments", "/export/payments.csv"} {
		code, h, body := get(outsiderH1, path)
		require.True(t, refusedByProxy(code, h, body), "%s from outside: %d", path, code)
	}
	code, h, _ := get(operatorH1, "/admin/")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, h.Get("Content-Type"), "text/html")
	code, _, _ = get(operatorH1, "/export/payments.csv")
	require.Equal(t, http.StatusUnauthorized, code, "the export reaches paymentd, which asks for a credential")
	// Nothing else is served, and plain HTTP is sent to HTTPS.
	code, _, _ = get(outsiderH1, "/health")
	require.Equal(t, http.StatusNotFound, code)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(p.httpURL + "/admin/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusPermanentRedirect, resp.StatusCode)
	require.Equal(t, "https://127.0.0.1/admin/", resp.Header.Get("Location"))

	// Client addresses. Registration is limited to one a second per client:
	// from one address behind the proxy, each call claiming another address
	// in X-Forwarded-For, the limit still trips, on the client's own address.
	floodH1 := p.client(t, floodIP, false)
	limitedAs := func(c *http.Client, url string) string {
		t.Helper()
		for i := range 50 {
			code, _, _ := post(t, c, url+identitypbconnect.IdentityServiceRegisterProcedure, "{}",
				http.Header{"X-Forwarded-For": {fmt.Sprintf("198.51.100.%d", i+1)}})
			if code == http.StatusTooManyRequests {
				var ip string
				for _, l := range p.svc.logs.Lines(t) {
					if l["msg"] == "rate limited" && l["procedure"] == identitypbconnect.IdentityServiceRegisterProcedure {
						ip, _ = l["client_ip"].(string)
					}
				}
				return ip
			}
		}
		t.Fatalf("50 registrations from one client and none was rate limited")
		return ""
	}
	require.Equal(t, floodIP.String(), limitedAs(floodH1, p.httpsURL), "behind the proxy a client is its own address, never the proxy's nor what it claims")
	// Straight to paymentd from an address that is not the proxy, the
	// header is not believed either.
	direct := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: directIP}}).DialContext}}
	t.Cleanup(direct.CloseIdleConnections)
	require.Equal(t, directIP.String(), limitedAs(direct, p.svc.baseURL), "X-Forwarded-For from a peer that is not a trusted proxy is ignored")
}
