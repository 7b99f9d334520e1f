package app_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/testdb"
)

// slowHTTP1 opens a connection that sends a request's headers, declaring a
// body of 1000 bytes of ctype, and one byte of it; then it waits. The answer, when
// one comes, is read by answer.
type slowHTTP1 struct {
	conn net.Conn
	br   *bufio.Reader
}

func openSlowHTTP1(t *testing.T, addr, path, ctype string) *slowHTTP1 {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: 1000\r\n\r\n{", path, addr, ctype)
	require.NoError(t, err)
	return &slowHTTP1{conn: conn, br: bufio.NewReader(conn)}
}

// answer reads the response's status, and then whether the server closed
// the connection after it.
func (s *slowHTTP1) answer(t *testing.T, within time.Duration) (status int, closed bool) {
	t.Helper()
	require.NoError(t, s.conn.SetReadDeadline(time.Now().Add(within)))
	resp, err := http.ReadResponse(s.br, nil)
	require.NoError(t, err, "no answer to the slow request")
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	_, err = s.br.ReadByte()
	return resp.StatusCode, err == io.EOF
}

// slowH2C is one cleartext HTTP/2 connection (prior knowledge) with n
// streams, each a POST that declares no length, sends one byte of body and
// never ends.
type slowH2C struct {
	conn    net.Conn
	framer  *http2.Framer
	streams []uint32
}

func openSlowH2C(t *testing.T, addr, path string, n int) *slowH2C {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = io.WriteString(conn, http2.ClientPreface)
	require.NoError(t, err)
	fr := http2.NewFramer(conn, conn)
	require.NoError(t, fr.WriteSettings())
	s := &slowH2C{conn: conn, framer: fr}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for i := range n {
		block.Reset()
		for _, f := range [][2]string{
			{":method", "POST"}, {":scheme", "http"}, {":authority", addr}, {":path", path},
			{"content-type", "application/grpc"}, {"te", "trailers"},
		} {
			require.NoError(t, enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}))
		}
		id := uint32(2*i + 1)
		require.NoError(t, fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true}))
		require.NoError(t, fr.WriteData(id, false, []byte{0}))
		s.streams = append(s.streams, id)
	}
	return s
}

// answers reads frames until every stream has its response headers and
// grpc-status, or the deadline passes; it returns each stream's :status and grpc-status and
// whether a GOAWAY came.
func (s *slowH2C) answers(t *testing.T, within time.Duration) (map[uint32]string, map[uint32]string, bool) {
	t.Helper()
	require.NoError(t, s.conn.SetReadDeadline(time.Now().Add(within)))
	status := map[uint32]string{}
	grpcStatus := map[uint32]string{}
	goAway := false
	dec := hpack.NewDecoder(4096, nil)
	// A gRPC error comes as headers and then trailers (grpc-status).
	for len(status) < len(s.streams) || len(grpcStatus) < len(s.streams) {
		f, err := s.framer.ReadFrame()
		if err != nil {
			break
		}
		switch f := f.(type) {
		case *http2.HeadersFrame:
			fields, err := dec.DecodeFull(f.HeaderBlockFragment())
			require.NoError(t, err)
			for _, hf := range fields {
				switch hf.Name {
				case ":status":
					status[f.StreamID] = hf.Value
				case "grpc-status":
					grpcStatus[f.StreamID] = hf.Value
				}
			}
		case *http2.GoAwayFrame:
			goAway = true
		case *http2.SettingsFrame:
			if !f.IsAck() {
				require.NoError(t, s.framer.WriteSettingsAck())
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				require.NoError(t, s.framer.WritePing(true, f.Data))
			}
		}
	}
	return status, grpcStatus, goAway
}

// The outside probe's denial of service: 30 connections that send headers
// and one byte of a 1000-byte body used to hold every slot of the
// concurrency limit (30) for as long as they stayed open, and with them
// GetPayment and /ready; over h2c one connection with 40 unfinished streams
// did the same. Bodies are now read before a request takes a slot, under
// [server].read_timeout_secs: while 40 + 40 + 40 such requests wait, other
// clients and /ready are answered as usual, and once the timeout passes the
// slow ones are cut off (HTTP/1.1: the connection closes; HTTP/2: GOAWAY),
// each answered in its own protocol: a gateway's form callback 408, a
// Connect call deadline_exceeded (504), a gRPC one DEADLINE_EXCEEDED.
func TestSlowRequestBodiesNeitherHoldSlotsNorStopOtherClients(t *testing.T) {
	t.Parallel()
	cfg := testConfig(testdb.URL(t))
	cfg.Server.ReadTimeoutSecs = 3
	r := start(t, cfg)
	addr := strings.TrimPrefix(r.baseURL, "http://")
	c := login(t, r)
	payments := paymentpbconnect.NewPaymentServiceClient(http.DefaultClient, r.baseURL)

	began := time.Now()
	var slow []*slowHTTP1
	for i := range 40 {
		path, ctype := paymentpbconnect.PaymentServiceHandleCallbackProcedure, "application/json"
		if i%2 == 1 {
			path, ctype = "/callbacks/"+uuid.NewString(), "application/x-www-form-urlencoded"
		}
		slow = append(slow, openSlowHTTP1(t, addr, path, ctype))
	}
	h2 := openSlowH2C(t, addr, paymentpbconnect.PaymentServiceHandleCallbackProcedure, 40)
	// Every slow request has been written before the probes below start,
	// and the probes repeat for a while: before the fix the first of them
	// already found the slots taken.

	// Other clients: a customer's GetPayment (NotFound: it reached the
	// handler and the database) and /ready, each answered while every slow
	// request is still open. Before the fix both waited for a slot.
	quick := &http.Client{Timeout: 2 * time.Second}
	t.Cleanup(quick.CloseIdleConnections)
	quickPayments := paymentpbconnect.NewPaymentServiceClient(quick, r.baseURL)
	for range 5 {
		_, err := quickPayments.GetPayment(context.Background(), with(&paymentpb.GetPaymentRequest{Id: uuid.NewString()}, c.customer))
		require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "GetPayment while slow bodies are open: %v", err)
		resp, err := quick.Get(r.baseURL + "/ready")
		require.NoError(t, err, "/ready while slow bodies are open")
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	require.Less(t, time.Since(began), 3*time.Second,
		"the other clients were answered before the read timeout could have freed anything")
	require.Zero(t, r.app.Server().SlowRequests(), "nothing is cut off before the timeout")

	// After the timeout: every slow request is answered and cut off.
	for i, s := range slow {
		status, closed := s.answer(t, 10*time.Second)
		want := http.StatusGatewayTimeout // Connect: deadline_exceeded
		if i%2 == 1 {
			want = http.StatusRequestTimeout
		}
		require.Equal(t, want, status, "slow HTTP/1.1 request %d", i)
		require.True(t, closed, "slow HTTP/1.1 request %d: the connection closes", i)
	}
	require.GreaterOrEqual(t, time.Since(began), 3*time.Second, "cut off only once the read timeout passed")
	status, grpcStatus, goAway := h2.answers(t, 10*time.Second)
	require.Len(t, status, 40, "every h2c stream is answered")
	for id, st := range status {
		require.Equal(t, "200", st, "h2c stream %d", id)
		require.Equal(t, "4", grpcStatus[id], "h2c stream %d: DEADLINE_EXCEEDED", id)
	}
	require.True(t, goAway, "the h2c connection gets a GOAWAY")
	require.EqualValues(t, 80, r.app.Server().SlowRequests())

	// And the service goes on as before.
	_, err := payments.GetPayment(context.Background(), with(&paymentpb.GetPaymentRequest{Id: uuid.NewString()}, c.customer))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err))
}

// slowPayments answers GetPayment only after a pause longer than the read
// timeout of the test that uses it.
type slowPayments struct {
	paymentpbconnect.PaymentServiceHandler
	pause time.Duration
}

func (s slowPayments) GetPayment(ctx context.Context, req *connect.Request[paymentpb.GetPaymentRequest]) (*connect.Response[paymentpb.GetPaymentResponse], error) {
	select {
	case <-time.After(s.pause):
	case <-ctx.Done():
		return nil, connect.NewError(connect.CodeCanceled, ctx.Err())
	}
	return s.PaymentServiceHandler.GetPayment(ctx, req)
}

// The read deadline ends with the body. A body sent slowly but within the
// timeout is served, and a handler that then outlives the timeout keeps its
// request: on HTTP/1.1 a deadline left armed (http.Server's ReadTimeout)
// would cancel the handler's context once it passed.
func TestAHandlerMayOutliveTheReadTimeoutOnceTheBodyIsIn(t *testing.T) {
	t.Parallel()
	cfg := testConfig(testdb.URL(t))
	// The body's half-second pause leaves 1.5 s of the read timeout to a
	// busy machine (with 1 s, a stall of half a second would have refused
	// the body); the handler then outlives the timeout by half a second.
	cfg.Server.ReadTimeoutSecs = 2
	r := start(t, cfg, app.WithPaymentHandler(func(h paymentpbconnect.PaymentServiceHandler) paymentpbconnect.PaymentServiceHandler {
		return slowPayments{PaymentServiceHandler: h, pause: 2500 * time.Millisecond}
	}))
	c := login(t, r)
	pr, pw := io.Pipe()
	go func() {
		body := `{"id": "` + uuid.NewString() + `"}`
		_, _ = io.WriteString(pw, body[:5])
		time.Sleep(500 * time.Millisecond)
		_, _ = io.WriteString(pw, body[5:])
		_ = pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPost, r.baseURL+paymentpbconnect.PaymentServiceGetPaymentProcedure, pr)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	c.customer(req.Header)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "answered by the handler, not cancelled: %s", body)
}
