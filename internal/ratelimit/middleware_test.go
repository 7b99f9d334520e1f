package ratelimit

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/rustbill/paymentd/internal/testkit"
)

const otherProcedure = "/billing.payment.PaymentService/GetPayment"

// service is a stand-in for the identity service: every procedure answers
// an empty message.
func service() http.Handler {
	mux := http.NewServeMux()
	for _, proc := range []string{LoginProcedure, AdminLoginProcedure, RegisterProcedure, ChangePasswordProcedure, otherProcedure} {
		mux.Handle(proc, connect.NewUnaryHandler(proc,
			func(context.Context, *connect.Request[emptypb.Empty]) (*connect.Response[emptypb.Empty], error) {
				return connect.NewResponse(&emptypb.Empty{}), nil
			}))
	}
	return mux
}

// server is one service instance: the stand-in behind the rate limit layer,
// serving HTTP/1.1 and cleartext HTTP/2 (for gRPC). The test reaches it
// through 127.0.0.1, which is trusted as a proxy, so each call names its
// client IP in X-Forwarded-For.
type server struct {
	srv  *httptest.Server
	h1   *http.Client
	h2c  *http.Client
	logs *testkit.Logs
}

func newServer(t *testing.T, l Limiter, rules map[string]int) *server {
	t.Helper()
	return newServerLogging(t, l, rules, &testkit.Logs{})
}

func newServerLogging(t *testing.T, l Limiter, rules map[string]int, logs *testkit.Logs) *server {
	t.Helper()
	s := &server{logs: logs}
	clientIP := ClientIP([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")})
	h := Middleware(l, rules, clientIP, s.logs.Text())(service())
	s.srv = httptest.NewUnstartedServer(h)
	var serve http.Protocols
	serve.SetHTTP1(true)
	serve.SetUnencryptedHTTP2(true)
	s.srv.Config.Protocols = &serve
	s.srv.Start()

	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	s.h1 = &http.Client{Transport: &http.Transport{}}
	s.h2c = &http.Client{Transport: &http.Transport{Protocols: &h2c}}
	t.Cleanup(func() {
		s.h1.CloseIdleConnections()
		s.h2c.CloseIdleConnections()
		s.srv.Close()
	})
	return s
}

type protocol int

const (
	protoConnect protocol = iota
	protoGRPC
	protoGRPCWeb
)

func (p protocol) String() string { return [...]string{"connect", "grpc", "grpc-web"}[p] }

// call makes one RPC from ip and returns its error.
func (s *server) call(t *testing.T, p protocol, procedure, ip string) error {
	t.Helper()
	httpClient, opts := s.h1, []connect.ClientOption(nil)
	switch p {
	case protoGRPC:
		httpClient, opts = s.h2c, append(opts, connect.WithGRPC())
	case protoGRPCWeb:
		opts = append(opts, connect.WithGRPCWeb())
	}
	client := connect.NewClient[emptypb.Empty, emptypb.Empty](httpClient, s.srv.URL+procedure, opts...)
	req := connect.NewRequest(&emptypb.Empty{})
	req.Header().Set("X-Forwarded-For", ip)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := client.CallUnary(ctx, req)
	return err
}

func (s *server) callN(t *testing.T, n int, procedure, ip string) {
	t.Helper()
	for i := range n {
		require.NoError(t, s.call(t, protoConnect, procedure, ip), "request %d of %d", i+1, n)
	}
}

// requireExhausted checks a refusal: the code, Retry-After and RetryInfo.
func requireExhausted(t *testing.T, err error, wantRetry time.Duration) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, connect.CodeResourceExhausted, connect.CodeOf(err), "%v", err)
	var cerr *connect.Error
	require.ErrorAs(t, err, &cerr)
	require.Equal(t, "1", cerr.Meta().Get("Retry-After"))
	require.Len(t, cerr.Details(), 1)
	v, derr := cerr.Details()[0].Value()
	require.NoError(t, derr)
	info, ok := v.(*errdetails.RetryInfo)
	require.True(t, ok, "detail is %T", v)
	require.Equal(t, wantRetry, info.GetRetryDelay().AsDuration())
}

func loginRules() map[string]int {
	return Rules(Limits{Enabled: true})
}

func TestSixthLoginFromOneIPInOneSecondIsRefusedWhileAnotherIPIsNot(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	s := newServer(t, NewMemory(WithClock(clk.Now)), loginRules())

	s.callN(t, 5, LoginProcedure, "198.51.100.1")
	requireExhausted(t, s.call(t, protoConnect, LoginProcedure, "198.51.100.1"), 200*time.Millisecond)
	s.callN(t, 5, LoginProcedure, "198.51.100.2")

	clk.Advance(time.Second)
	s.callN(t, 5, LoginProcedure, "198.51.100.1")
	requireExhausted(t, s.call(t, protoConnect, LoginProcedure, "198.51.100.1"), 200*time.Millisecond)
}

func TestLoginAndAdminLoginAreCountedSeparately(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	s := newServer(t, NewMemory(WithClock(clk.Now)), loginRules())
	s.callN(t, 5, LoginProcedure, "198.51.100.1")
	s.callN(t, 5, AdminLoginProcedure, "198.51.100.1")
	requireExhausted(t, s.call(t, protoConnect, AdminLoginProcedure, "198.51.100.1"), 200*time.Millisecond)
}

// A password change checks a password as a login does: it shares the login
// limit, with a counter of its own.
func TestPasswordChangesShareTheLoginLimitWithACounterOfTheirOwn(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	s := newServer(t, NewMemory(WithClock(clk.Now)), loginRules())
	s.callN(t, 5, LoginProcedure, "198.51.100.1")
	s.callN(t, 5, ChangePasswordProcedure, "198.51.100.1")
	requireExhausted(t, s.call(t, protoConnect, ChangePasswordProcedure, "198.51.100.1"), 200*time.Millisecond)
}

func TestRegisterIsLimitedToOnePerSecond(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	s := newServer(t, NewMemory(WithClock(clk.Now)), loginRules())
	s.callN(t, 1, RegisterProcedure, "198.51.100.1")
	requireExhausted(t, s.call(t, protoConnect, RegisterProcedure, "198.51.100.1"), time.Second)
	clk.Advance(time.Second)
	s.callN(t, 1, RegisterProcedure, "198.51.100.1")
}

func TestGRPCAndGRPCWebClientsSeeResourceExhausted(t *testing.T) {
	t.Parallel()
	for _, p := range []protocol{protoConnect, protoGRPC, protoGRPCWeb} {
		t.Run(p.String(), func(t *testing.T) {
			t.Parallel()
			clk := testkit.NewClock()
			s := newServer(t, NewMemory(WithClock(clk.Now)), loginRules())
			require.NoError(t, s.call(t, p, RegisterProcedure, "198.51.100.1"))
			requireExhausted(t, s.call(t, p, RegisterProcedure, "198.51.100.1"), time.Second)
		})
	}
}

func TestPlainHTTPPostIsRefusedWith429AndRetryAfter(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	s := newServer(t, NewMemory(WithClock(clk.Now)), loginRules())
	post := func(contentType string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, s.srv.URL+RegisterProcedure, strings.NewReader("x"))
		require.NoError(t, err)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		req.Header.Set("X-Forwarded-For", "198.51.100.1")
		resp, err := s.h1.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	// The first one is let through to the Connect handler, which refuses
	// a text body; only the limit matters here.
	require.NotEqual(t, http.StatusTooManyRequests, post("text/plain").StatusCode)

	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded"} {
		resp := post(ct)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "content type %q", ct)
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
	}
	resp := post("text/plain")
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "too many requests, retry after 1s\n", string(body))
	require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
}

func TestOtherProceduresAreNotLimited(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	s := newServer(t, NewMemory(WithClock(clk.Now)), loginRules())
	s.callN(t, 50, otherProcedure, "198.51.100.1")
}

func TestDisabledRateLimitIsANoOp(t *testing.T) {
	t.Parallel()
	off := Limits{LoginPerSec: DefaultLoginPerSec, RegisterPerSec: DefaultRegisterPerSec}
	require.Nil(t, Rules(off))
	clk := testkit.NewClock()
	s := newServer(t, NewMemory(WithClock(clk.Now)), Rules(off))
	s.callN(t, 20, RegisterProcedure, "198.51.100.1")

	// Neither empty rules nor a missing limiter touch a request.
	for _, mw := range []func(http.Handler) http.Handler{
		Middleware(NewMemory(), nil, nil, nil),
		Middleware(nil, loginRules(), nil, nil),
	} {
		served := 0
		h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
		for range 3 {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, RegisterProcedure, nil))
		}
		require.Equal(t, 3, served)
	}
}

// bodyReader fails the test when the limiter reads a refused request's body.
type bodyReader struct{ read bool }

func (b *bodyReader) Read([]byte) (int, error) { b.read = true; return 0, io.EOF }
func (b *bodyReader) Close() error             { return nil }

func TestRefusedRequestBodyIsNeverRead(t *testing.T) {
	t.Parallel()
	clk := testkit.NewClock()
	h := Middleware(NewMemory(WithClock(clk.Now)), map[string]int{RegisterProcedure: 1}, nil, slog.New(slog.DiscardHandler))(service())
	for i := range 2 {
		body := &bodyReader{}
		req := httptest.NewRequest(http.MethodPost, RegisterProcedure, nil)
		req.Body = body
		req.Header.Set("Content-Type", "application/grpc")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if i == 1 {
			require.False(t, body.read, "the refused request's body was read")
			require.Equal(t, "8", rec.Header().Get("Grpc-Status"), "ResourceExhausted")
			require.Equal(t, "1", rec.Header().Get("Retry-After"))
		}
	}
}

type failingLimiter struct{}

func (failingLimiter) Allow(context.Context, string, int) (bool, time.Duration, error) {
	return false, 0, errors.New("counters unreachable")
}

func TestLimiterErrorLetsTheRequestThroughWithAWarning(t *testing.T) {
	t.Parallel()
	s := newServer(t, failingLimiter{}, loginRules())
	s.callN(t, 10, LoginProcedure, "198.51.100.1")
	require.Equal(t, 10, s.logs.Count(slog.LevelWarn, "rate limit not checked"))
}

func TestRuleBelowOnePanicsNamingTheProcedure(t *testing.T) {
	t.Parallel()
	require.PanicsWithValue(t,
		"ratelimit: rule "+RegisterProcedure+": limit must be at least 1 per second, got 0",
		func() { Middleware(NewMemory(), map[string]int{RegisterProcedure: 0}, nil, nil) })
}
