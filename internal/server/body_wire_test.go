package server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/server"
)

// bodies is a server whose limit layer is a stand-in that records what
// reaches it: every request, and those that arrive while their client has
// not yet sent all of their body (marked sent by the test, per X-Body-Id).
type bodies struct {
	srv     *server.Server
	addr    string
	url     string
	entered atomic.Int64
	unread  atomic.Int64
	sent    sync.Map // X-Body-Id → *atomic.Bool: the client has sent it all
}

const echoPath = "/echo"

func setupBodies(t *testing.T, mutate func(*server.Options)) *bodies {
	t.Helper()
	o := server.Options{ShutdownTimeout: 5 * time.Second}
	mutate(&o)
	opts, err := server.HandlerOptions(o, nil)
	require.NoError(t, err)
	path, h := paymentpbconnect.NewPaymentServiceHandler(unimplementedPayments{}, opts...)
	b := &bodies{}
	o.DB = &fakeDB{}
	o.Logger = slog.New(slog.NewTextHandler(t.Output(), nil))
	o.Services = []server.Service{{Name: paymentpbconnect.PaymentServiceName, Path: path, Handler: h}}
	o.Routes = []server.Route{{Pattern: "POST " + echoPath, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusTeapot)
			return
		}
		_, _ = w.Write(body)
	})}}
	o.Limits = []server.Middleware{func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b.entered.Add(1)
			if v, ok := b.sent.Load(r.Header.Get("X-Body-Id")); ok && !v.(*atomic.Bool).Load() {
				b.unread.Add(1)
			}
			next.ServeHTTP(w, r)
		})
	}}
	b.srv = server.New(o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	b.addr = ln.Addr().String()
	b.url = "http://" + b.addr
	return b
}

// h2cClient speaks HTTP/2 without TLS (prior knowledge), each its own
// connections.
func h2cClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http2.Transport{
		AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// h1Client speaks HTTP/1.1, its own connections.
func h1Client(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// stalled is a request body that sends start and then nothing until the
// test ends.
func stalled(t *testing.T, start string) io.Reader {
	t.Helper()
	pr, pw := io.Pipe()
	t.Cleanup(func() { _ = pw.Close() })
	go func() { _, _ = io.WriteString(pw, start) }()
	return pr
}

// grpcStatus is the grpc-status and grpc-message of a gRPC answer: in its
// headers (a trailers-only answer) or its trailers.
func grpcStatus(t *testing.T, resp *http.Response) (string, string) {
	t.Helper()
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if s := resp.Header.Get("Grpc-Status"); s != "" {
		return s, resp.Header.Get("Grpc-Message")
	}
	return resp.Trailer.Get("Grpc-Status"), resp.Trailer.Get("Grpc-Message")
}

// rawHTTP1 sends head (a request's line and headers, without the blank
// line) and then the first bytes of its body, and returns the answer and
// whether the connection closed after it.
func rawHTTP1(t *testing.T, addr, head, start string) (*http.Response, string, bool) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = io.WriteString(conn, head+"\r\n\r\n"+start)
	require.NoError(t, err)
	// A bound on a broken server, not a measure: every answer expected
	// here comes well before it.
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err, "no answer")
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	_, err = br.ReadByte()
	return resp, string(body), err == io.EOF
}

// A declared length over the limit is refused at once, in the caller's
// protocol, without a byte of the body read and without the request
// reaching the concurrency limit: before, such a request went on to the
// limit with its body unread and held a slot for the read timeout (the
// outside probe's 32 connections declaring 5,000,000 bytes).
func TestDeclaredLengthOverTheLimitIsRefusedAtOnceBeforeTheLimit(t *testing.T) {
	t.Parallel()
	b := setupBodies(t, func(o *server.Options) { o.MaxRequestBytes = 4096; o.ReadTimeout = 20 * time.Second })

	// HTTP/1.1, a plain request (a gateway's callback): 413, and the
	// connection closes (its body is unread).
	resp, _, closed := rawHTTP1(t, b.addr,
		"POST "+echoPath+" HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 5000000", "x")
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.True(t, closed, "the connection closes")

	// HTTP/1.1, Connect JSON: resource_exhausted.
	resp, body, _ := rawHTTP1(t, b.addr,
		"POST "+paymentpbconnect.PaymentServiceGetPaymentProcedure+" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000000", "{")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, body)
	require.Contains(t, body, `"code":"resource_exhausted"`)

	// h2c: plain 413, gRPC RESOURCE_EXHAUSTED (8).
	h2 := h2cClient(t)
	req, err := http.NewRequest(http.MethodPost, b.url+echoPath, stalled(t, "x"))
	require.NoError(t, err)
	req.ContentLength = 5_000_000
	resp, err = h2.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, 2, resp.ProtoMajor)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)

	req, err = http.NewRequest(http.MethodPost, b.url+paymentpbconnect.PaymentServiceGetPaymentProcedure, stalled(t, "\x00"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/grpc")
	req.ContentLength = 5_000_000
	resp, err = h2.Do(req)
	require.NoError(t, err)
	code, _ := grpcStatus(t, resp)
	require.Equal(t, "8", code, "RESOURCE_EXHAUSTED")

	require.Zero(t, b.entered.Load(), "no request reached the limit")
	require.EqualValues(t, 4, b.srv.TooLargeRequests())
	require.Zero(t, b.srv.SlowRequests())
}

// A body of no declared length (HTTP/1.1 chunked, HTTP/2 without
// content-length) is refused the moment it grows past the limit, while
// its client is still sending, without reaching the limit.
func TestUndeclaredBodyIsRefusedOnceItGrowsPastTheLimit(t *testing.T) {
	t.Parallel()
	b := setupBodies(t, func(o *server.Options) { o.MaxRequestBytes = 4096; o.ReadTimeout = 20 * time.Second })
	over := strings.Repeat("z", 4096+64<<10+1)
	for name, client := range map[string]*http.Client{"HTTP/1.1": h1Client(t), "h2c": h2cClient(t)} {
		req, err := http.NewRequest(http.MethodPost, b.url+echoPath, stalled(t, over))
		require.NoError(t, err)
		req.ContentLength = -1
		resp, err := client.Do(req)
		require.NoError(t, err, name)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, name)
	}
	require.Zero(t, b.entered.Load(), "no request reached the limit")
	require.EqualValues(t, 2, b.srv.TooLargeRequests())
}

// A trickled body never reaches the limit; at the read deadline it is
// answered in the caller's own protocol, and its connection ends. Before,
// every caller got a plain-text 408, which a gRPC client reports as
// UNKNOWN "Received HTTP status code 408".
//
// The code is DEADLINE_EXCEEDED: the request ran out of time before it
// was handled, as when its own deadline passes in the limiter's queue.
// Not UNAVAILABLE, which gRPC clients retry on their own (a broken or
// hostile client would be sent straight back), nor RESOURCE_EXHAUSTED,
// which says a quota is spent.
func TestTrickledBodyIsCutOffInTheCallersProtocolAndEndsItsConnection(t *testing.T) {
	t.Parallel()
	b := setupBodies(t, func(o *server.Options) { o.ReadTimeout = time.Second })

	// gRPC over h2c: DEADLINE_EXCEEDED (4); then GOAWAY, so the client's
	// next request goes on a new connection.
	h2 := h2cClient(t)
	var reused []bool
	trace := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { reused = append(reused, info.Reused) },
	})
	req, err := http.NewRequestWithContext(trace, http.MethodPost, b.url+paymentpbconnect.PaymentServiceGetPaymentProcedure, stalled(t, "\x00\x00\x00"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	resp, err := h2.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	code, msg := grpcStatus(t, resp)
	require.Equal(t, "4", code, "DEADLINE_EXCEEDED")
	require.Contains(t, msg, "not received")
	req, err = http.NewRequestWithContext(trace, http.MethodPost, b.url+echoPath, strings.NewReader("next"))
	require.NoError(t, err)
	resp, err = h2.Do(req)
	require.NoError(t, err)
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, "next", string(got))
	require.Equal(t, []bool{false, false}, reused, "the next request went on a new connection: the first got GOAWAY")

	// Connect JSON over HTTP/1.1: deadline_exceeded (504), connection closed.
	h1 := h1Client(t)
	req, err = http.NewRequest(http.MethodPost, b.url+paymentpbconnect.PaymentServiceGetPaymentProcedure, stalled(t, `{"id":`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = 100
	resp, err = h1.Do(req)
	require.NoError(t, err)
	got, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusGatewayTimeout, resp.StatusCode)
	require.Contains(t, string(got), `"code":"deadline_exceeded"`)
	require.True(t, resp.Close, "Connection: close")

	// A plain request (a gateway's callback): 408, connection closed.
	req, err = http.NewRequest(http.MethodPost, b.url+echoPath, stalled(t, "a=1&"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = h1.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
	require.True(t, resp.Close, "Connection: close")

	require.EqualValues(t, 1, b.entered.Load(), "only the complete request reached the limit")
	require.EqualValues(t, 3, b.srv.SlowRequests())
}

// Bodies are charged to the buffer budget by what arrives, not by what
// they declare: connections declaring bodies of the largest length
// buffered, and sending none of it, took the whole budget before, and
// every later body went on to the limit unread (the outside probe's 64
// connections of 1,114,111 bytes, then 32 trickled bodies holding every
// slot). Now bodies of several chunks, sent in two halves, are still read
// whole before the limit, however many such connections wait.
func TestBodiesDeclaredButNotSentDoNotSpendTheBufferBudget(t *testing.T) {
	t.Parallel()
	b := setupBodies(t, func(o *server.Options) { o.MaxRequestBytes = 4096; o.ReadTimeout = 30 * time.Second })
	largest := 4096 + 64<<10
	// More than the budget holds of such bodies (64). Each asks for 100
	// Continue, which the server sends when it starts reading the body:
	// once all have it, every one is being read.
	var hostile []*bufio.Reader
	for range 70 {
		conn, err := net.Dial("tcp", b.addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", echoPath, largest)
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(20*time.Second)))
		hostile = append(hostile, bufio.NewReader(conn))
	}
	for i, br := range hostile {
		line, err := br.ReadString('\n')
		require.NoError(t, err, "hostile connection %d", i)
		require.Contains(t, line, "100 Continue", "hostile connection %d", i)
	}

	body := strings.Repeat("0123456789abcdef", 3<<10) // 48 KiB: three chunks
	var wg sync.WaitGroup
	results := make([]string, 8)
	for i := range results {
		wg.Go(func() {
			id := strconv.Itoa(i)
			sent := &atomic.Bool{}
			b.sent.Store(id, sent)
			pr, pw := io.Pipe()
			go func() {
				_, _ = io.WriteString(pw, body[:len(body)/2])
				// The second half comes a little later. A server that hands
				// the request on before it has the whole body is caught in
				// this gap; one that waits is not, however long it is.
				time.Sleep(300 * time.Millisecond)
				sent.Store(true)
				_, _ = io.WriteString(pw, body[len(body)/2:])
				_ = pw.Close()
			}()
			req, err := http.NewRequest(http.MethodPost, b.url+echoPath, pr)
			if err != nil {
				results[i] = err.Error()
				return
			}
			req.Header.Set("X-Body-Id", id)
			req.ContentLength = int64(len(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				results[i] = err.Error()
				return
			}
			got, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			results[i] = string(got)
		})
	}
	wg.Wait()
	for i, got := range results {
		require.True(t, got == body, "request %d: the handler read the whole body (%.80q)", i, got)
	}
	require.Zero(t, b.unread.Load(), "no request reached the limit before its client had sent all its body")
	require.Zero(t, b.srv.BufferBusyRequests())
}

// h2cRaw is one cleartext HTTP/2 connection driven frame by frame.
type h2cRaw struct {
	conn   net.Conn
	framer *http2.Framer
}

func dialH2CRaw(t *testing.T, addr string) *h2cRaw {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = io.WriteString(conn, http2.ClientPreface)
	require.NoError(t, err)
	fr := http2.NewFramer(conn, conn)
	require.NoError(t, fr.WriteSettings())
	return &h2cRaw{conn: conn, framer: fr}
}

func (h *h2cRaw) post(t *testing.T, id uint32, addr, path string, data []byte) {
	t.Helper()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", addr}, {":path", path}} {
		require.NoError(t, enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}))
	}
	require.NoError(t, h.framer.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true}))
	require.NoError(t, h.framer.WriteData(id, false, data))
}

// goAway reads frames until a GOAWAY (true) or the end of the connection.
func (h *h2cRaw) goAway(t *testing.T) bool {
	t.Helper()
	require.NoError(t, h.conn.SetReadDeadline(time.Now().Add(20*time.Second)))
	for {
		f, err := h.framer.ReadFrame()
		if err != nil {
			return false
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			return true
		case *http2.SettingsFrame:
			if !f.IsAck() {
				require.NoError(t, h.framer.WriteSettingsAck())
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				require.NoError(t, h.framer.WritePing(true, f.Data))
			}
		}
	}
}

// A stream that breaks its body off (RST_STREAM) ends its connection with
// GOAWAY, like one cut off at the read deadline: before, only HTTP/1.1
// closed, and one HTTP/2 connection could open and drop streams without
// end.
func TestStreamResetMidBodyEndsTheConnectionWithGOAWAY(t *testing.T) {
	t.Parallel()
	b := setupBodies(t, func(o *server.Options) { o.ReadTimeout = 20 * time.Second })
	h := dialH2CRaw(t, b.addr)
	h.post(t, 1, b.addr, echoPath, []byte("a=1"))
	require.NoError(t, h.framer.WriteRSTStream(1, http2.ErrCodeCancel))
	require.True(t, h.goAway(t), "GOAWAY after the broken-off body")
	require.Zero(t, b.entered.Load())
}
