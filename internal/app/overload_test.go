package app_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/testdb"
)

// A request queued behind [server].max_concurrency whose client's deadline
// passes leaves the queue and is answered DeadlineExceeded in its own
// protocol, read from grpc-timeout or connect-timeout-ms by the limiter in
// front of connect-go. The raw answers are checked: a Connect or gRPC
// client with a context deadline would report DeadlineExceeded itself,
// whatever the server said.
func TestQueuedRequestPastItsDeadlineIsAnsweredDeadlineExceededInItsProtocol(t *testing.T) {
	t.Parallel()
	cfg := testConfig(testdb.EmptyURL(t))
	cfg.Server.MaxConcurrency = 1
	entered, release := make(chan struct{}, 1), make(chan struct{})
	r := start(t, cfg, app.WithPaymentHandler(func(h paymentpbconnect.PaymentServiceHandler) paymentpbconnect.PaymentServiceHandler {
		return blockingPayments{PaymentServiceHandler: h, entered: entered, release: release}
	}))
	c := login(t, r)

	// The one slot, held by a GetPayment in its handler.
	held := make(chan error, 1)
	go func() {
		client := paymentpbconnect.NewPaymentServiceClient(http.DefaultClient, r.baseURL)
		_, err := client.GetPayment(context.Background(), with(&paymentpb.GetPaymentRequest{Id: uuid.NewString()}, c.customer))
		held <- err
	}()
	<-entered
	t.Cleanup(func() {
		close(release)
		require.Equal(t, connect.CodeNotFound, connect.CodeOf(<-held), "the request holding the slot is served")
	})

	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	t.Cleanup(h2c.CloseIdleConnections)
	msg, err := proto.Marshal(&paymentpb.GetPaymentRequest{Id: uuid.NewString()})
	require.NoError(t, err)
	envelope := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
	envelope = append(envelope, msg...)
	post := func(client *http.Client, body []byte, header ...string) (*http.Response, []byte) {
		req, err := http.NewRequest(http.MethodPost, r.baseURL+paymentpbconnect.PaymentServiceGetPaymentProcedure, bytes.NewReader(body))
		require.NoError(t, err)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		c.customer(req.Header)
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, out
	}

	resp, body := post(http.DefaultClient, []byte(`{"id":"`+uuid.NewString()+`"}`),
		"Content-Type", "application/json", "Connect-Protocol-Version", "1", "Connect-Timeout-Ms", "50")
	require.Equal(t, http.StatusGatewayTimeout, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), `"code":"deadline_exceeded"`)

	resp, _ = post(h2c, envelope, "Content-Type", "application/grpc", "Te", "trailers", "Grpc-Timeout", "50m")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "4", resp.Header.Get("Grpc-Status")+resp.Trailer.Get("Grpc-Status"), "gRPC DEADLINE_EXCEEDED")

	resp, _ = post(http.DefaultClient, envelope, "Content-Type", "application/grpc-web+proto", "Grpc-Timeout", "50m")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "4", resp.Header.Get("Grpc-Status"), "gRPC-Web DEADLINE_EXCEEDED")
}

// With every pooled connection taken, a request waits [db].acquire_timeout_secs
// for one and is then answered Unavailable, "database busy, retry" — not
// held for as long as its client waits.
func TestRequestThatFindsNoFreePooledConnectionIsUnavailableDatabaseBusy(t *testing.T) {
	t.Parallel()
	cfg := testConfig(testdb.EmptyURL(t))
	cfg.DB.MaxConnections = 3
	cfg.DB.MinConnections = 0
	cfg.DB.AcquireTimeoutSecs = 1
	r := start(t, cfg)
	c := login(t, r)

	var held []*pgxpool.Conn
	for range cfg.DB.MaxConnections {
		conn, err := r.app.Pool().Acquire(context.Background())
		require.NoError(t, err)
		held = append(held, conn)
	}
	t.Cleanup(func() {
		for _, conn := range held {
			conn.Release()
		}
	})

	// Without the bound the call would wait for a connection until this
	// context ends, and fail DeadlineExceeded.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := paymentpbconnect.NewPaymentServiceClient(http.DefaultClient, r.baseURL)
	_, err := client.GetPayment(ctx, with(&paymentpb.GetPaymentRequest{Id: uuid.NewString()}, c.customer))
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(err), "%v", err)
	var ce *connect.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "database busy, retry", ce.Message())
}
