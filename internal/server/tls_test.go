package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/server"
)

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths and a pool that trusts it.
func selfSigned(t *testing.T) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "paymentd test"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

func TestTLSServesGRPCOverHTTP2AndHealthOverHTTP1(t *testing.T) {
	t.Parallel()
	certFile, keyFile, roots := selfSigned(t)
	opts, err := server.HandlerOptions(server.Options{}, nil)
	require.NoError(t, err)
	path, h := paymentpbconnect.NewPaymentServiceHandler(unimplementedPayments{}, opts...)
	srv := server.New(server.Options{
		TLSCertFile: certFile, TLSKeyFile: keyFile,
		DB:       &fakeDB{},
		Logger:   slog.New(slog.NewTextHandler(t.Output(), nil)),
		Services: []server.Service{{Name: paymentpbconnect.PaymentServiceName, Path: path, Handler: h}},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	base := "https://" + ln.Addr().String()

	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}
	client := &http.Client{Transport: tr}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		cancel()
		require.NoError(t, <-done)
	})

	resp, err := client.Get(base + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, 2, resp.ProtoMajor, "ALPN negotiates HTTP/2 over TLS")

	payments := paymentpbconnect.NewPaymentServiceClient(client, base, connect.WithGRPC())
	_, err = payments.GetPayment(context.Background(), connect.NewRequest(&paymentpb.GetPaymentRequest{Id: validID}))
	require.Equal(t, connect.CodeUnimplemented, connect.CodeOf(err), "%v", err)

	// A plain-text client gets no answer from the TLS port.
	resp, err = http.Get("http://" + ln.Addr().String() + "/health")
	if err == nil {
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	}
}

func TestBadTLSFilesFailServeNamingTheKeys(t *testing.T) {
	t.Parallel()
	srv := server.New(server.Options{
		TLSCertFile: filepath.Join(t.TempDir(), "missing.pem"), TLSKeyFile: "missing.key",
		DB: &fakeDB{}, Logger: slog.New(slog.DiscardHandler),
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	err = srv.Serve(context.Background(), ln)
	require.ErrorContains(t, err, "[server].tls_cert_file")
}
