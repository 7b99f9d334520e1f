package plugin

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/outbound"
)

// sent is one request as the fake doer received it.
type sent struct {
	Method      string
	URL         string
	Idempotent  bool
	Header      http.Header
	Body        string
	HasDeadline bool
	Deadline    time.Time
}

// fakeDoer stands in for the outbound client: it records each request and
// forwards it to an httptest server (or answers with respond).
type fakeDoer struct {
	mu      sync.Mutex
	sent    []sent
	client  *http.Client
	respond func(req *http.Request) (*Response, error)
}

func (f *fakeDoer) Do(req *http.Request, idempotent bool) (*Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
	}
	dl, ok := req.Context().Deadline()
	f.mu.Lock()
	f.sent = append(f.sent, sent{req.Method, req.URL.String(), idempotent, req.Header.Clone(), string(body), ok, dl})
	f.mu.Unlock()
	if f.respond != nil {
		return f.respond(req)
	}
	fwd, err := http.NewRequestWithContext(req.Context(), req.Method, req.URL.String(), strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	fwd.Header = req.Header
	resp, err := f.client.Do(fwd)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: rb}, nil
}

func (f *fakeDoer) requests() []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sent(nil), f.sent...)
}

type httpBundle struct {
	*bundle
	doer *fakeDoer
	url  string
}

// setupHTTP serves an echo handler: it answers the request's method, query,
// body and Content-Type as JSON, with an X-Echo header.
func setupHTTP(t *testing.T, edit ...func(*Options)) *httpBundle {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo", "yes")
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		_ = json.NewEncoder(w).Encode(map[string]string{
			"method": r.Method, "query": r.URL.RawQuery, "body": string(body),
			"content_type": r.Header.Get("Content-Type"), "auth": r.Header.Get("Authorization"),
		})
	}))
	doer := &fakeDoer{client: &http.Client{Transport: &http.Transport{}}}
	t.Cleanup(func() {
		doer.client.CloseIdleConnections()
		srv.Close()
	})
	edit = append([]func(*Options){func(o *Options) { o.HTTP = doer }}, edit...)
	return &httpBundle{bundle: setup(t, edit...), doer: doer, url: srv.URL}
}

// echo is the decoded response JSON with its body decoded too.
type echo struct {
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    map[string]string `json:"-"`
}

func (hb *httpBundle) call(t *testing.T, code string) echo {
	t.Helper()
	out, err := hb.run(t, strings.ReplaceAll(code, "URL", hb.url))
	require.NoError(t, err)
	var e echo
	require.NoError(t, json.Unmarshal([]byte(out), &e), out)
	var raw struct {
		Body string `json:"body"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	require.NoError(t, json.Unmarshal([]byte(raw.Body), &e.Body), raw.Body)
	return e
}

func TestHTTPGetGoesThroughTheDoerAsIdempotent(t *testing.T) {
	t.Parallel()
	hb := setupHTTP(t)
	e := hb.call(t, `return http_get("URL/api.php?act=order&id=1", '{"Authorization":"Bearer x"}')`)
	require.Equal(t, 200, e.Status)
	require.Equal(t, "yes", e.Headers["X-Echo"])
	require.Equal(t, "a, b", e.Headers["X-Multi"])
	require.Equal(t, "GET", e.Body["method"])
	require.Equal(t, "act=order&id=1", e.Body["query"])
	require.Equal(t, "Bearer x", e.Body["auth"])

	reqs := hb.doer.requests()
	require.Len(t, reqs, 1)
	require.True(t, reqs[0].Idempotent)
	require.True(t, reqs[0].HasDeadline, "the request carries the call's deadline")
}

func TestHTTPPostIsIdempotentOnlyWhenRetryIsAsked(t *testing.T) {
	t.Parallel()
	hb := setupHTTP(t)
	e := hb.call(t, `return http_post("URL/mapi.php", "a=1&b=2", "application/x-www-form-urlencoded")`)
	require.Equal(t, "POST", e.Body["method"])
	require.Equal(t, "a=1&b=2", e.Body["body"])
	require.Equal(t, "application/x-www-form-urlencoded", e.Body["content_type"])
	hb.call(t, `return http_post("URL/x", "b", "text/plain", json_encode({retry = false, timeout_ms = 5000}))`)
	hb.call(t, `return http_post("URL/x", "c", "text/plain", '{"retry":true}')`)
	hb.call(t, `return http_post_headers("URL/x", "d", '{"Content-Type":"application/json"}', '{"retry":true}')`)
	hb.call(t, `return http_post_headers("URL/x", "e", '{"Content-Type":"application/json"}')`)

	var got []bool
	for _, r := range hb.doer.requests() {
		got = append(got, r.Idempotent)
	}
	require.Equal(t, []bool{false, false, true, true, false}, got)
}

func TestHTTPPostBinarySendsAndAnswersBase64(t *testing.T) {
	t.Parallel()
	hb := setupHTTP(t)
	hb.doer.respond = func(*http.Request) (*Response, error) {
		return &Response{Status: 201, Header: http.Header{}, Body: []byte{0, 1, 2, 0xff}}, nil
	}
	out, err := hb.run(t, `return http_post_binary("`+hb.url+`/upload", base64_encode("\0\255"), "application/octet-stream", '{"X-Key":"k"}')`)
	require.NoError(t, err)
	require.JSONEq(t, `{"status":201,"headers":{},"body_base64":"AAEC/w=="}`, out)
	r := hb.doer.requests()[0]
	require.Equal(t, "\x00\xff", r.Body)
	require.Equal(t, "application/octet-stream", r.Header.Get("Content-Type"))
	require.Equal(t, "k", r.Header.Get("X-Key"))
	require.False(t, r.Idempotent)
}

func TestHTTPBodyThatIsNotUTF8AlsoComesAsBase64(t *testing.T) {
	t.Parallel()
	hb := setupHTTP(t)
	gbk := []byte{0xc4, 0xe3, 0xba, 0xc3} // "你好" in GBK: not UTF-8
	hb.doer.respond = func(*http.Request) (*Response, error) {
		return &Response{Status: 200, Header: http.Header{"Content-Type": {"text/plain; charset=gbk"}}, Body: gbk}, nil
	}
	out, err := hb.run(t, `return http_get("`+hb.url+`")`)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	require.Equal(t, base64.StdEncoding.EncodeToString(gbk), m["body_base64"])
	require.Contains(t, m["body"], "\uFFFD")
}

// errCircuitOpen stands for outbound.ErrCircuitOpen, wrapped the way the
// outbound client wraps it.
var errCircuitOpen = errors.New("circuit open")

type circuitOpenError struct{ host string }

func (e *circuitOpenError) Error() string        { return "circuit open for " + e.host }
func (e *circuitOpenError) Is(target error) bool { return target == errCircuitOpen }

func TestOpenCircuitSurfacesFromCall(t *testing.T) {
	t.Parallel()
	hb := setupHTTP(t)
	hb.doer.respond = func(*http.Request) (*Response, error) {
		return nil, &circuitOpenError{host: "pay.example.com"}
	}
	p := hb.load(t, gatewaySource(`
		function create_payment(c, i)
			local resp = json_decode(http_post("https://pay.example.com/mapi.php", "a=1", "text/plain"))
			return json_encode({payment_url = resp.body})
		end
		function refund(c, i)
			local ok, err = pcall(http_post, "https://pay.example.com/refund", "", "text/plain")
			error("refund failed: " .. tostring(err))
		end
		function query_payment(c, i)
			local ok, err = pcall(http_get, "https://pay.example.com/q")
			return json_encode({status = "pending", note = tostring(err)})
		end`))
	ctx := context.Background()

	_, err := p.Call(ctx, "create_payment", "{}", "{}")
	ce := requireKind(t, err, KindScriptError, "http_post: circuit open for pay.example.com")
	require.ErrorIs(t, err, errCircuitOpen)
	var coe *circuitOpenError
	require.ErrorAs(t, err, &coe)
	require.Equal(t, "pay.example.com", coe.host)
	require.Equal(t, "create_payment", ce.Function)

	// Caught and re-raised by the script: still recognisable.
	_, err = p.Call(ctx, "refund", "{}", "{}")
	require.ErrorIs(t, err, errCircuitOpen)

	// Caught and handled: the call succeeds.
	out, err := p.Call(ctx, "query_payment", "{}", "{}")
	require.NoError(t, err)
	require.Contains(t, out, "circuit open")
}

func TestHTTPOptionsAndArgumentsAreStrict(t *testing.T) {
	t.Parallel()
	hb := setupHTTP(t)
	for code, want := range map[string]string{
		`http_post("URL", "", "text/plain", '{"retries":true}')`:     `unknown field "retries"`,
		`http_post("URL", "", "text/plain", '{"timeout_ms":-1}')`:    "timeout_ms must be positive",
		`http_post("URL", "", "text/plain", 'nope')`:                 "argument 4 (options_json)",
		`http_get("ftp://example.com/x")`:                            "must be an absolute http or https URL",
		`http_get("/relative")`:                                      "must be an absolute http or https URL",
		`http_get("URL", '{"X":1}')`:                                 "must be a JSON object of strings",
		`http_post_binary("URL", "***", "application/octet-stream")`: "argument 2 (body_base64)",
		`http_mtls("GET", "http://example.com", "", "{}")`:           "needs cert_pem and key_pem",
		`http_mtls("TRACE", "https://example.com", "", "{}")`:        "must be GET, POST, PUT, PATCH or DELETE",
	} {
		_, err := hb.run(t, "return "+strings.ReplaceAll(code, "URL", hb.url))
		requireKind(t, err, KindScriptError, want, code)
	}
	require.Empty(t, hb.doer.requests())
}

func TestHTTPWithoutAConfiguredClientFails(t *testing.T) {
	t.Parallel()
	_, err := setup(t).run(t, `return http_get("https://example.com")`)
	requireKind(t, err, KindScriptError, "http_get: outbound HTTP is not configured")
}

func TestHTTPThatOutlivesTheCallEndsItWithATimeout(t *testing.T) {
	t.Parallel()
	hb := setupHTTP(t, func(o *Options) { o.Limits.CallTimeout = 100 * time.Millisecond })
	hb.doer.respond = func(req *http.Request) (*Response, error) {
		<-req.Context().Done()
		return nil, fmt.Errorf("waiting for the gateway: %w", req.Context().Err())
	}
	start := time.Now()
	// Even a script that swallows the error cannot go on past the deadline.
	_, err := hb.run(t, `pcall(http_get, "https://slow.example.com") while true do end`)
	requireKind(t, err, KindTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestHTTPTimeoutOptionBoundsOneRequest(t *testing.T) {
	t.Parallel()
	hb := setupHTTP(t)
	hb.doer.respond = func(req *http.Request) (*Response, error) {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	got := hb.runOK(t, `
		local ok, err = pcall(http_post, "https://slow.example.com", "", "text/plain", '{"timeout_ms":30}')
		return json_encode({ok = ok, err = err})`)
	require.Equal(t, false, got["ok"])
	require.Contains(t, got["err"], "deadline exceeded")
	r := hb.doer.requests()[0]
	require.WithinDuration(t, time.Now(), r.Deadline, time.Second)
}

func TestHTTPBodyBeyondTheMemoryBoundIsRefused(t *testing.T) {
	t.Parallel()
	hb := setupHTTP(t, func(o *Options) { o.Limits.MemoryBytes = 1 << 20 })
	hb.doer.respond = func(*http.Request) (*Response, error) {
		return &Response{Status: 200, Body: []byte(strings.Repeat("x", 2<<20))}, nil
	}
	_, err := hb.run(t, `return http_get("https://big.example.com")`)
	requireKind(t, err, KindMemory)
}

// certs is a CA and a client certificate it signed, as PEM.
type certs struct {
	caPool           *x509.CertPool
	clientCert       string
	clientKey        string
	otherCert        string // a client certificate from another CA
	otherKey         string
	serverCAPEM      string
	serverCAMismatch string
}

func newCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: fmt.Sprintf("test %v", isCA)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if isCA {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage = x509.KeyUsageCertSign
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return cert, key,
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
}

func TestHTTPMTLSPresentsTheClientCertificate(t *testing.T) {
	t.Parallel()
	ca, caKey, _, _ := newCert(t, nil, nil, true)
	_, _, clientCert, clientKey := newCert(t, ca, caKey, false)
	other, otherKey, _, _ := newCert(t, nil, nil, true)
	_, _, otherCert, otherClientKey := newCert(t, other, otherKey, false)
	pool := x509.NewCertPool()
	pool.AddCert(ca)

	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/broken" {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		body, _ := io.ReadAll(r.Body)
		_, _ = fmt.Fprintf(w, `{"cn":%q,"method":%q,"body":%q,"h":%q}`,
			r.TLS.PeerCertificates[0].Subject.CommonName, r.Method, body, r.Header.Get("X-Sign"))
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes below are expected
	srv.StartTLS()
	t.Cleanup(srv.Close)
	serverCA := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))

	// mTLS goes through the service's one client, like every request.
	client := outbound.New(outbound.Options{Cooldown: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(client.CloseIdleConnections)
	b := setup(t, func(o *Options) { o.HTTP = Outbound(client) })
	request := func(cert, key, ca string) string {
		req, err := json.Marshal(map[string]any{"headers": map[string]string{"X-Sign": "s1"}, "cert_pem": cert, "key_pem": key, "ca_pem": ca})
		require.NoError(t, err)
		return luaQuote(string(req))
	}

	out, err := b.run(t, `return http_mtls("post", "`+srv.URL+`/pay", "amount=1.00", `+request(clientCert, clientKey, serverCA)+`, '{"timeout_ms":5000}')`)
	require.NoError(t, err)
	var resp struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &resp))
	require.Equal(t, 200, resp.Status)
	require.JSONEq(t, `{"cn":"test false","method":"POST","body":"amount=1.00","h":"s1"}`, resp.Body)
	_, err = b.run(t, `return http_mtls("GET", "`+srv.URL+`/again", "", `+request(clientCert, clientKey, serverCA)+`)`)
	require.NoError(t, err)
	require.Equal(t, int32(1), conns.Load(), "calls with one certificate share a kept-alive connection")

	// A certificate the server does not trust, and a server the script does
	// not trust, both fail the call.
	_, err = b.run(t, `return http_mtls("GET", "`+srv.URL+`", "", `+request(otherCert, otherClientKey, serverCA)+`)`)
	requireKind(t, err, KindScriptError, "http_mtls:")
	_, err = b.run(t, `return http_mtls("GET", "`+srv.URL+`", "", `+request(clientCert, clientKey, "")+`)`)
	requireKind(t, err, KindScriptError, "certificate")
	_, err = b.run(t, `return http_mtls("GET", "`+srv.URL+`", "", `+request("garbage", clientKey, serverCA)+`)`)
	requireKind(t, err, KindScriptError, "client certificate")

	// The host's circuit breaker counts mTLS calls like any other: after
	// five 5xx answers it opens, for the certificate's calls and the plain
	// ones to that host alike, and nothing more reaches it. (The refused
	// handshakes above counted as failures too: a success first.)
	_, err = b.run(t, `return http_mtls("GET", "`+srv.URL+`", "", `+request(clientCert, clientKey, serverCA)+`)`)
	require.NoError(t, err)
	for range 5 {
		_, err = b.run(t, `return http_mtls("POST", "`+srv.URL+`/broken", "x", `+request(clientCert, clientKey, serverCA)+`)`)
		require.NoError(t, err, "a 502 is an answer for the script")
	}
	_, err = b.run(t, `return http_mtls("GET", "`+srv.URL+`", "", `+request(clientCert, clientKey, serverCA)+`)`)
	requireKind(t, err, KindScriptError, "circuit open")
	_, err = b.run(t, `return http_get("`+srv.URL+`", "{}")`)
	requireKind(t, err, KindScriptError, "circuit open")
}

func TestHTTPMTLSNeedsAClientThatCanPresentACertificate(t *testing.T) {
	t.Parallel()
	hb := setupHTTP(t) // a plain HTTPDoer
	_, err := hb.run(t, `return http_mtls("GET", "https://example.com", "", '{"cert_pem":"x","key_pem":"y"}')`)
	requireKind(t, err, KindScriptError, "mutual TLS is not configured")
	require.Empty(t, hb.doer.requests(), "nothing was sent")
}

// tlsRecorder is an MTLSDoer that sends nothing: it answers 200 and notes
// whether each request was marked idempotent (may be retried).
type tlsRecorder struct {
	mu         sync.Mutex
	idempotent []bool
}

func (d *tlsRecorder) Do(*http.Request, bool) (*Response, error) {
	return nil, errors.New("plain HTTP is not expected here")
}

func (d *tlsRecorder) DoTLS(_ *http.Request, idempotent bool, _ string, _ *tls.Config) (*Response, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.idempotent = append(d.idempotent, idempotent)
	return &Response{Status: 200, Header: http.Header{}, Body: []byte("ok")}, nil
}

func TestHTTPMTLSIsRetriedByTheRulesOfTheOtherHTTPFunctions(t *testing.T) {
	t.Parallel()
	ca, caKey, _, _ := newCert(t, nil, nil, true)
	_, _, cert, key := newCert(t, ca, caKey, false)
	rec := &tlsRecorder{}
	b := setup(t, func(o *Options) { o.HTTP = rec })
	req, err := json.Marshal(map[string]string{"cert_pem": cert, "key_pem": key})
	require.NoError(t, err)
	for _, call := range []string{
		`http_mtls("GET", "https://bank.example/q", "", REQ)`,
		`http_mtls("POST", "https://bank.example/pay", "x", REQ)`,
		`http_mtls("POST", "https://bank.example/pay", "x", REQ, '{"retry":true}')`,
		`http_mtls("DELETE", "https://bank.example/pay/1", "", REQ)`,
		`http_mtls("PUT", "https://bank.example/pay/1", "x", REQ, '{"retry":true,"timeout_ms":1000}')`,
	} {
		_, err := b.run(t, "return "+strings.Replace(call, "REQ", luaQuote(string(req)), 1))
		require.NoError(t, err, call)
	}
	require.Equal(t, []bool{true, false, true, false, true}, rec.idempotent,
		"a GET may be retried; another method only with \"retry\": true")
}

func TestPostWithThePluginsIdempotencyKeyMayBeResent(t *testing.T) {
	t.Parallel()
	hb := setupHTTP(t)
	hb.call(t, `return http_post_headers("URL/v1/refunds", "amount=500", json_encode({["Idempotency-Key"] = "refund_r1"}))`)
	hb.call(t, `return http_post_headers("URL/v1/refunds", "amount=500", "{}")`)
	_, err := hb.run(t, `return http_post_binary("`+hb.url+`/v1/x", "", "text/plain", json_encode({["idempotency-key"] = "k2"}))`)
	require.NoError(t, err)
	reqs := hb.doer.requests()
	require.Len(t, reqs, 3)
	require.Equal(t, "refund_r1", reqs[0].Header.Get("Idempotency-Key"), "the key travels as the plugin chose it")
	require.Equal(t, []bool{true, false, true}, []bool{reqs[0].Idempotent, reqs[1].Idempotent, reqs[2].Idempotent})
}
