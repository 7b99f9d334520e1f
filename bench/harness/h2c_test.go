package harness

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
	"google.golang.org/protobuf/proto"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
)

// h2cServer serves h over cleartext HTTP/2 with x/net's server configured
// by conf, and returns its URL.
func h2cServer(t *testing.T, conf *http2.Server, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h2c.NewHandler(h, conf))
	t.Cleanup(srv.Close)
	return srv.URL
}

// grpcAnswer answers like a gRPC server: the message, then grpc-status 0
// in the trailers.
func grpcAnswer(w http.ResponseWriter, msg []byte) {
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("Trailer", "Grpc-Status")
	_, _ = w.Write(msg)
	w.Header().Set("Grpc-Status", "0")
}

// The server allows two streams per connection: the client keeps to that
// with 16 calls in flight on one connection (the server would refuse a
// third stream), and every call gets its own answer.
func TestLoaderKeepsToTheServersMaxConcurrentStreams(t *testing.T) {
	t.Parallel()
	var now, most atomic.Int32
	var mu sync.Mutex
	seen := map[string]int{}
	url := h2cServer(t, &http2.Server{MaxConcurrentStreams: 2}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		n := now.Add(1)
		defer now.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(time.Millisecond) // let the others pile up
		var req paymentpb.GetPaymentRequest
		b, err := io.ReadAll(r.Body)
		if err != nil || len(b) < 5 || proto.Unmarshal(b[5:], &req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen[req.Id+" "+r.Header.Get("Authorization")]++
		mu.Unlock()
		grpcAnswer(w, GRPCFrame(&paymentpb.GetPaymentResponse{Payment: &paymentpb.PaymentRecord{Id: req.Id}}))
	}))
	l, err := NewLoader(url, 1)
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, l.Warm(t.Context()))
	var calls []Call
	for i := range 200 {
		calls = append(calls, Call{Path: "/billing.payment.PaymentService/GetPayment", Header: GRPCHeader(fmt.Sprintf("Bearer t%d", i%7)),
			Body: GRPCFrame(&paymentpb.GetPaymentRequest{Id: fmt.Sprint("p", i)})})
	}
	res := l.Run(calls, 16, time.Minute)
	require.Zero(t, res.Errors, "%v", res.ErrorSamples)
	require.Equal(t, 200, res.Requests)
	require.Equal(t, 200, countOK(res.OK))
	require.Len(t, seen, 200, "each call arrived once, with its own credential")
	for k, n := range seen {
		require.Equal(t, 1, n, k)
	}
	require.Equal(t, int32(2), most.Load(), "two streams at a time, and no more")
}

// Request bodies larger than the stream and connection windows the server
// grants (16 KiB a stream, 64 KiB the connection) arrive whole: the
// client waits for WINDOW_UPDATE instead of overrunning a window (which
// the server answers with FLOW_CONTROL_ERROR). The server also reads
// frames up to 64 KiB and keeps a 64-byte header table: the client's
// encoder shrinks its dynamic table to that (a larger one would make the
// server's decoder fail the connection).
func TestLoaderObeysTheServersWindowsFrameSizeAndHeaderTable(t *testing.T) {
	t.Parallel()
	conf := &http2.Server{MaxUploadBufferPerStream: 16 << 10, MaxUploadBufferPerConnection: 65535, MaxReadFrameSize: 64 << 10, MaxDecoderHeaderTableSize: 64}
	var mu sync.Mutex
	got := map[[32]byte]int{}
	url := h2cServer(t, conf, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got[sha256.Sum256(b)]++
		mu.Unlock()
		grpcAnswer(w, GRPCFrame(&paymentpb.GetPaymentResponse{}))
	}))
	l, err := NewLoader(url, 1)
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, l.Warm(t.Context()))
	var calls []Call
	want := map[[32]byte]int{}
	for i := range 24 {
		body := bytes.Repeat([]byte{byte(i)}, 150<<10+i*1000)
		want[sha256.Sum256(body)]++
		calls = append(calls, Call{Path: fmt.Sprintf("/billing.payment.PaymentService/Call%d", i%3), Header: GRPCHeader(fmt.Sprint("Bearer ", i%2)), Body: body})
	}
	res := l.Run(calls, 4, time.Minute)
	require.Zero(t, res.Errors, "%v", res.ErrorSamples)
	require.Equal(t, 24, res.Requests)
	require.Equal(t, want, got)
}

// A call that times out is reset: the server sees its request's context
// canceled, and the stream's place is free again (the server allows one
// stream, and the next call is answered).
func TestATimedOutCallIsResetAtTheServer(t *testing.T) {
	t.Parallel()
	ended := make(chan error, 1)
	url := h2cServer(t, &http2.Server{MaxConcurrentStreams: 1}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
		case "/slow":
			select {
			case <-r.Context().Done():
				ended <- r.Context().Err()
			case <-time.After(30 * time.Second):
				ended <- nil
			}
		default:
			grpcAnswer(w, GRPCFrame(&paymentpb.GetPaymentResponse{}))
		}
	}))
	l, err := NewLoader(url, 1)
	require.NoError(t, err)
	defer l.Close()
	c := l.conns[0]
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	body := GRPCFrame(&paymentpb.GetPaymentRequest{Id: "x"})
	require.Equal(t, "transport: timeout", c.roundTrip("/slow", GRPCHeader(""), body, timer, 100*time.Millisecond))
	select {
	case err := <-ended:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("the server's handler still runs: the stream was not reset")
	}
	require.Empty(t, c.roundTrip("/fast", GRPCHeader(""), body, timer, 10*time.Second))
	require.Empty(t, c.roundTrip("/fast", GRPCHeader(""), body, timer, 10*time.Second))
}

// A server that does not speak HTTP/2 is an error at once, not after the
// wait for its SETTINGS.
func TestDialingAServerWithoutHTTP2FailsAtOnce(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	start := time.Now()
	_, err := NewLoader(srv.URL, 1)
	require.Error(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
}

// A server that answers without reading the whole request body: the
// client takes the answer, stops sending (its half of the stream closed
// with a reset), and the stream's place is free for the next call (the
// server allows one stream).
func TestAnAnswerBeforeTheWholeBodyEndsTheCall(t *testing.T) {
	t.Parallel()
	url := h2cServer(t, &http2.Server{MaxConcurrentStreams: 1, MaxUploadBufferPerStream: 16 << 10}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		grpcAnswer(w, GRPCFrame(&paymentpb.GetPaymentResponse{}))
	}))
	l, err := NewLoader(url, 1)
	require.NoError(t, err)
	defer l.Close()
	var calls []Call
	for range 5 {
		calls = append(calls, Call{Path: "/billing.payment.PaymentService/GetPayment", Header: GRPCHeader(""), Body: make([]byte, 1<<20)})
	}
	res := l.Run(calls, 2, time.Minute)
	require.Zero(t, res.Errors, "%v", res.ErrorSamples)
	require.Equal(t, 5, countOK(res.OK))
	require.Less(t, res.Elapsed(), 30*time.Second)
}
