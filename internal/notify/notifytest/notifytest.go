// Package notifytest receives what the notification channels send, for
// tests: an in-process SMTP server (github.com/emersion/go-smtp) with
// STARTTLS and AUTH PLAIN, and a webhook endpoint that verifies the
// webhook notifier's HMAC signature the way a customer's receiver should.
// It is test support, imported from _test files only.
package notifytest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/notify"
)

// Mail is one message the SMTP server accepted.
type Mail struct {
	From string
	To   []string
	// User is who authenticated ("" without AUTH); TLS tells whether the
	// message travelled over TLS (STARTTLS).
	User string
	TLS  bool
	// Header and Body are the parsed message (the body decoded).
	Header mail.Header
	Body   string
}

// SMTPServer is an in-process SMTP server that keeps what it receives.
type SMTPServer struct {
	Host string
	Port int
	// ClientTLS trusts the server's certificate (set SMTP.TLSConfig to it).
	ClientTLS *tls.Config
	Username  string
	Password  string

	srv  *smtp.Server
	mu   sync.Mutex
	msgs []Mail
	// reject answers RCPT for these addresses with a permanent error.
	reject map[string]bool
}

// StartSMTP starts a server on 127.0.0.1 that offers STARTTLS (a fresh
// self-signed certificate) and requires AUTH PLAIN with username and
// password before MAIL. It stops when the test ends.
func StartSMTP(t testing.TB, username, password string) *SMTPServer {
	t.Helper()
	cert, pool := selfSigned(t)
	s := &SMTPServer{
		Host: "127.0.0.1", Username: username, Password: password, reject: map[string]bool{},
		ClientTLS: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12},
	}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{s: s, conn: c}, nil
	}))
	s.srv.Domain = "localhost"
	s.srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	s.srv.ReadTimeout = 10 * time.Second
	s.srv.WriteTimeout = 10 * time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s.Port = l.Addr().(*net.TCPAddr).Port
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.srv.Serve(l)
	}()
	t.Cleanup(func() {
		_ = s.srv.Close()
		<-done
	})
	return s
}

// SMTP is the channel configuration for this server: STARTTLS mandatory,
// AUTH PLAIN.
func (s *SMTPServer) SMTP(from string) notify.SMTP {
	return notify.SMTP{
		Host: s.Host, Port: s.Port, From: from, TLSPolicy: "mandatory", Auth: "plain",
		Username: s.Username, Password: s.Password, Timeout: 5 * time.Second, TLSConfig: s.ClientTLS,
	}
}

// Reject makes the server refuse RCPT TO addr permanently (550).
func (s *SMTPServer) Reject(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reject[strings.ToLower(addr)] = true
}

// Mails returns what was received so far.
func (s *SMTPServer) Mails() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.msgs...)
}

type session struct {
	s    *SMTPServer
	conn *smtp.Conn
	user string
	from string
	to   []string
}

func (x *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (x *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, username, password string) error {
		if username != x.s.Username || password != x.s.Password {
			return errors.New("invalid credentials")
		}
		x.user = username
		return nil
	}), nil
}

func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	if x.user == "" {
		return smtp.ErrAuthRequired
	}
	x.from = from
	return nil
}

func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	x.s.mu.Lock()
	rejected := x.s.reject[strings.ToLower(to)]
	x.s.mu.Unlock()
	if rejected {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
	}
	x.to = append(x.to, to)
	return nil
}

func (x *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	var body io.Reader = m.Body
	if strings.EqualFold(m.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body = quotedprintable.NewReader(m.Body)
	}
	text, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	_, tlsOn := x.conn.TLSConnectionState()
	x.s.mu.Lock()
	x.s.msgs = append(x.s.msgs, Mail{From: x.from, To: x.to, User: x.user, TLS: tlsOn, Header: m.Header, Body: string(text)})
	x.s.mu.Unlock()
	return nil
}

func (x *session) Reset()        { x.from, x.to = "", nil }
func (x *session) Logout() error { return nil }

// selfSigned makes a certificate for 127.0.0.1 and localhost, and a pool
// that trusts it.
func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "notifytest"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// Delivery is one webhook request whose signature verified.
type Delivery struct {
	NotificationID string
	Payload        map[string]any
	Header         http.Header
}

// Webhook is an endpoint that checks every request the way a receiver of
// plugins/notifier/webhook.lua should: HMAC-SHA256 over timestamp "." raw
// body with the shared secret, compared in constant time, and a fresh
// timestamp.
type Webhook struct {
	URL    string
	Secret string

	status   atomic.Int32
	failNext atomic.Int32
	requests atomic.Int32

	mu         sync.Mutex
	deliveries []Delivery
	rejections []string
}

// StartWebhook starts an endpoint for secret; it answers 204 unless told
// otherwise, and stops when the test ends.
func StartWebhook(t testing.TB, secret string) *Webhook {
	t.Helper()
	w := &Webhook{Secret: secret}
	w.status.Store(http.StatusNoContent)
	srv := httptest.NewServer(http.HandlerFunc(w.serve))
	t.Cleanup(srv.Close)
	w.URL = srv.URL + "/hooks"
	return w
}

// Respond makes every later request answer status.
func (w *Webhook) Respond(status int) { w.status.Store(int32(status)) }

// FailNext makes the next n requests answer 503.
func (w *Webhook) FailNext(n int) { w.failNext.Store(int32(n)) }

// Requests is how many requests arrived, verified or not.
func (w *Webhook) Requests() int { return int(w.requests.Load()) }

// Deliveries returns the verified requests.
func (w *Webhook) Deliveries() []Delivery {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Delivery(nil), w.deliveries...)
}

// Rejections returns why requests were refused.
func (w *Webhook) Rejections() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.rejections...)
}

func (w *Webhook) serve(rw http.ResponseWriter, r *http.Request) {
	w.requests.Add(1)
	body, _ := io.ReadAll(r.Body)
	ts := r.Header.Get("X-Paymentd-Timestamp")
	m := hmac.New(sha256.New, []byte(w.Secret))
	m.Write([]byte(ts + "." + string(body)))
	want := "sha256=" + hex.EncodeToString(m.Sum(nil))
	sent, terr := time.Parse(time.RFC3339, ts)
	var payload map[string]any
	reject := ""
	switch {
	case !hmac.Equal([]byte(want), []byte(r.Header.Get("X-Paymentd-Signature"))):
		reject = "bad signature"
	case terr != nil || time.Since(sent).Abs() > 5*time.Minute:
		reject = "stale timestamp"
	case json.Unmarshal(body, &payload) != nil:
		reject = "not json"
	}
	if reject != "" {
		w.mu.Lock()
		w.rejections = append(w.rejections, reject)
		w.mu.Unlock()
		http.Error(rw, reject, http.StatusUnauthorized)
		return
	}
	if w.failNext.Load() > 0 && w.failNext.Add(-1) >= 0 {
		http.Error(rw, "try later", http.StatusServiceUnavailable)
		return
	}
	status := int(w.status.Load())
	if status >= 200 && status < 300 {
		w.mu.Lock()
		w.deliveries = append(w.deliveries, Delivery{
			NotificationID: r.Header.Get("X-Paymentd-Notification-Id"), Payload: payload, Header: r.Header.Clone(),
		})
		w.mu.Unlock()
	}
	rw.Header().Set("X-Status", strconv.Itoa(status))
	rw.WriteHeader(status)
}
