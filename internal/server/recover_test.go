package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/concurrency"
	"github.com/rustbill/paymentd/internal/server"
	"github.com/rustbill/paymentd/internal/testkit"
)

// The ids panickingPayments.GetPayment acts on.
const (
	panicID = "00000000-0000-4000-8000-00000000dead"
	holdID  = "00000000-0000-4000-8000-0000000000b1"
	// panicSecret stands for whatever a handler holds when it panics: it
	// must reach the log, never the client.
	panicSecret = "merchant-key-s3cr3t"
)

// panickingPayments panics in GetPayment for panicID, holds it for holdID
// until released, and answers every other id.
type panickingPayments struct {
	paymentpbconnect.UnimplementedPaymentServiceHandler
	entered chan<- struct{}
	release <-chan struct{}
}

func (p panickingPayments) GetPayment(_ context.Context, req *connect.Request[paymentpb.GetPaymentRequest]) (*connect.Response[paymentpb.GetPaymentResponse], error) {
	switch req.Msg.GetId() {
	case panicID:
		panic("handler bug while holding " + panicSecret)
	case holdID:
		p.entered <- struct{}{}
		<-p.release
	}
	return connect.NewResponse(&paymentpb.GetPaymentResponse{Payment: &paymentpb.PaymentRecord{Id: req.Msg.GetId()}}), nil
}

// panics is a server whose handlers panic on demand: GetPayment
// (panickingPayments), /callbacks/ (before writing anything; /callbacks/ok
// answers), /export/payments.csv (after its header row went out),
// /abort/ (http.ErrAbortHandler), and any request with X-Panic-In-Layer
// in a credential layer, in front of the Connect handler.
type panics struct {
	url     string
	logs    *testkit.Logs
	limiter *concurrency.Limiter
	release chan struct{}
	entered chan struct{}

	mu     sync.Mutex
	counts map[string]int
}

func (p *panics) count(route string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[route]
}

func setupPanics(t *testing.T) *panics {
	t.Helper()
	p := &panics{
		logs: &testkit.Logs{}, limiter: concurrency.New(4),
		release: make(chan struct{}), entered: make(chan struct{}, 1), counts: map[string]int{},
	}
	o := server.Options{ShutdownTimeout: 5 * time.Second, Logger: p.logs.JSON()}
	o.Panicked = func(route string) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.counts[route]++
	}
	opts, err := server.HandlerOptions(o, o.Logger)
	require.NoError(t, err)
	path, h := paymentpbconnect.NewPaymentServiceHandler(panickingPayments{entered: p.entered, release: p.release}, opts...)
	o.Services = []server.Service{{Name: paymentpbconnect.PaymentServiceName, Path: path, Handler: h}}
	o.Limits = []server.Middleware{p.limiter.Middleware()}
	o.Credentials = []server.Middleware{func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Panic-In-Layer") != "" {
				panic("credential layer bug")
			}
			next.ServeHTTP(w, r)
		})
	}}
	o.Routes = []server.Route{
		{Pattern: "/callbacks/", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/callbacks/ok" {
				_, _ = io.WriteString(w, "success")
				return
			}
			// Headers for an answer that never comes: none may be left
			// on the 500.
			w.Header().Set("Cache-Control", "public, max-age=86400")
			w.Header().Set("Content-Length", "7")
			panic(errors.New("callback handler bug holding " + panicSecret))
		})},
		{Pattern: "GET /export/payments.csv", Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/csv")
			_, _ = io.WriteString(w, "id,amount\r\n")
			w.(http.Flusher).Flush()
			panic("export bug")
		})},
		{Pattern: "/abort/", Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			panic(http.ErrAbortHandler)
		})},
	}
	srv := server.New(o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	p.url = "http://" + ln.Addr().String()
	return p
}

// pooledClient is an HTTP client (h2c, or HTTP/1.1 with keep-alive) with
// the usual connection pool.
func pooledClient(t *testing.T, h2c bool) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	if h2c {
		var protocols http.Protocols
		protocols.SetUnencryptedHTTP2(true)
		tr.Protocols = &protocols
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// panicLines are the log's "handler panicked" lines.
func (p *panics) panicLines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range p.logs.Lines(t) {
		if l["msg"] == "handler panicked" {
			out = append(out, l)
		}
	}
	return out
}

// The limiter's slot of a request that panicked is given back (its defer
// runs after the answer has gone, so wait for it).
func (p *panics) requireNoSlotHeld(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool { return p.limiter.InFlight() == 0 }, 5*time.Second, time.Millisecond,
		"a panicking request left a slot of the concurrency limit taken")
}

// A procedure that panics answers Internal "internal error" over Connect,
// gRPC and gRPC-Web on one HTTP/2 connection, while another call is open
// on that connection: that call, and every call after, is answered, and
// the client never needs a second connection. Each panic is one ERROR
// line naming the procedure with the value and the stack, and one count;
// no slot of the concurrency limit stays taken.
func TestPanickingProcedureAnswersInternalInEveryProtocolOnALiveConnection(t *testing.T) {
	t.Parallel()
	p := setupPanics(t)
	client, conn := testkit.OneConnection(t, true)
	protocols := map[string][]connect.ClientOption{
		"connect":  nil,
		"grpc":     {connect.WithGRPC()},
		"grpc-web": {connect.WithGRPCWeb()},
	}
	get := func(opts []connect.ClientOption, id string) (*connect.Response[paymentpb.GetPaymentResponse], error) {
		c := paymentpbconnect.NewPaymentServiceClient(client, p.url, opts...)
		return c.GetPayment(context.Background(), connect.NewRequest(&paymentpb.GetPaymentRequest{Id: id}))
	}

	held := make(chan error, 1)
	go func() {
		_, err := get(protocols["grpc"], holdID)
		held <- err
	}()
	testkit.WaitOrTimeout(t, p.entered, "the held call in its handler")

	for name, opts := range protocols {
		_, err := get(opts, panicID)
		require.Equal(t, connect.CodeInternal, connect.CodeOf(err), "%s: %v", name, err)
		var ce *connect.Error
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "internal error", ce.Message(), "%s: the client learns nothing of the panic", name)
		require.NotContains(t, err.Error(), panicSecret, name)
	}
	close(p.release)
	require.NoError(t, testkit.WaitOrTimeout(t, held, "the held call's answer"), "the stream open during the panics is answered")
	for name, opts := range protocols {
		res, err := get(opts, validID)
		require.NoError(t, err, "%s after the panics", name)
		require.Equal(t, validID, res.Msg.GetPayment().GetId())
	}
	require.NoError(t, conn.Err(), "every call on the one connection, still open")

	require.Equal(t, 3, p.count(paymentpbconnect.PaymentServiceGetPaymentProcedure))
	lines := p.panicLines(t)
	require.Len(t, lines, 3)
	for _, l := range lines {
		require.Equal(t, "ERROR", l["level"])
		require.Equal(t, paymentpbconnect.PaymentServiceGetPaymentProcedure, l["procedure"])
		require.Contains(t, l["panic"], panicSecret, "the value goes to the log")
		require.Contains(t, l["stack"], "panickingPayments.GetPayment", "the stack holds the frame that panicked")
		require.Contains(t, l["stack"], "recover_test.go")
	}
	p.requireNoSlotHeld(t)
}

// A plain route that panics before writing answers 500 "internal error"
// as plain text (what a gateway's callback gets for any failure, so it
// retries), without the headers the handler had set for its own answer,
// and the HTTP/1.1 connection carries the next request: net/http alone
// would close it.
func TestPanickingRouteAnswers500AndKeepsTheHTTP1Connection(t *testing.T) {
	t.Parallel()
	p := setupPanics(t)
	client, conn := testkit.OneConnection(t, false)
	do := func(path string) (*http.Response, string) {
		resp, err := client.Get(p.url + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(body)
	}

	resp, body := do("/callbacks/7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f?trade_status=TRADE_SUCCESS")
	require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	require.Equal(t, "internal error\n", body)
	require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	require.Empty(t, resp.Header.Get("Cache-Control"), "the handler's headers are not on the 500")
	require.False(t, resp.Close, "the connection stays open")

	resp, body = do("/callbacks/ok")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "success", body)
	require.NoError(t, conn.Err(), "the next request went on the same connection, still open")

	require.Equal(t, 1, p.count("/callbacks/"))
	lines := p.panicLines(t)
	require.Len(t, lines, 1)
	require.Equal(t, "ERROR", lines[0]["level"])
	require.Equal(t, "/callbacks/", lines[0]["route"])
	require.Equal(t, "/callbacks/7b0f1c3e-8a7d-4f51-9d1e-2a3b4c5d6e7f", lines[0]["path"], "the path, not the query (a callback's payload)")
	require.Contains(t, lines[0]["panic"], panicSecret)
	require.Contains(t, lines[0]["stack"], "recover_test.go")
	require.Equal(t, false, lines[0]["answer_started"])
	p.requireNoSlotHeld(t)
}

// A panic in a layer in front of a Connect handler (a credential layer)
// is answered by the recovery around the handler tree, as an RPC error in
// the caller's protocol, and counted under the service's path.
func TestPanicInFrontOfAConnectHandlerIsAnsweredInTheCallersProtocol(t *testing.T) {
	t.Parallel()
	p := setupPanics(t)
	client, conn := testkit.OneConnection(t, true)
	for _, opts := range [][]connect.ClientOption{nil, {connect.WithGRPC()}, {connect.WithGRPCWeb()}} {
		c := paymentpbconnect.NewPaymentServiceClient(client, p.url, opts...)
		req := connect.NewRequest(&paymentpb.GetPaymentRequest{Id: validID})
		req.Header().Set("X-Panic-In-Layer", "1")
		_, err := c.GetPayment(context.Background(), req)
		require.Equal(t, connect.CodeInternal, connect.CodeOf(err), "%v", err)
		var ce *connect.Error
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "internal error", ce.Message())

		_, err = c.GetPayment(context.Background(), connect.NewRequest(&paymentpb.GetPaymentRequest{Id: validID}))
		require.NoError(t, err)
	}
	require.NoError(t, conn.Err(), "the connection is still open")
	require.Equal(t, 3, p.count("/"+paymentpbconnect.PaymentServiceName+"/"))
	p.requireNoSlotHeld(t)
}

// A panic after part of the answer went out cannot be answered: that
// stream is reset (the client reads an error, never a body that looks
// complete), counted and logged, and the HTTP/2 connection goes on.
func TestPanicAfterTheAnswerStartedResetsOnlyItsStream(t *testing.T) {
	t.Parallel()
	p := setupPanics(t)
	client, conn := testkit.OneConnection(t, true)
	resp, err := client.Get(p.url + "/export/payments.csv")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the status went out before the panic")
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Error(t, err, "the cut answer is an error to the client")

	resp, err = client.Get(p.url + "/callbacks/ok")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, conn.Err(), "the connection is still open")

	require.Equal(t, 1, p.count("/export/payments.csv"))
	lines := p.panicLines(t)
	require.Len(t, lines, 1)
	require.Equal(t, true, lines[0]["answer_started"])
	p.requireNoSlotHeld(t)
}

// http.ErrAbortHandler is how a handler ends its answer on purpose: it is
// no panic to count or log, and net/http handles it as it always does.
func TestErrAbortHandlerIsNeitherCountedNorLogged(t *testing.T) {
	t.Parallel()
	p := setupPanics(t)
	client := pooledClient(t, true)
	resp, err := client.Get(p.url + "/abort/")
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	require.Error(t, err, "the stream is reset")
	require.Zero(t, p.count("/abort/"))
	require.Empty(t, p.panicLines(t))
	require.False(t, strings.Contains(p.logs.String(), "panic"), "%s", p.logs.String())
	p.requireNoSlotHeld(t)
}

// The labels are the mounted paths, never the client's.
func TestPanicCountsAreLabelledByTheMountedPathNeverTheClients(t *testing.T) {
	t.Parallel()
	p := setupPanics(t)
	client := pooledClient(t, false)
	for _, path := range []string{"/callbacks/a", "/callbacks/b", "/callbacks/" + strings.Repeat("x", 100)} {
		resp, err := client.Get(p.url + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	}
	require.Equal(t, 3, p.count("/callbacks/"))
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Len(t, p.counts, 1, "%v", p.counts)
}
