package app_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
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
	cfg := testConfig(testdb.URL(t))
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
	cfg := testConfig(testdb.URL(t))
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

// queuedPayments is blockingPayments that also counts the CreatePayment
// calls that reach the handler: a request that left the queue must never
// be one of them.
type queuedPayments struct {
	blockingPayments
	created *atomic.Int64
}

func (q queuedPayments) CreatePayment(ctx context.Context, req *connect.Request[paymentpb.CreatePaymentRequest]) (*connect.Response[paymentpb.CreatePaymentResponse], error) {
	q.created.Add(1)
	return q.blockingPayments.CreatePayment(ctx, req)
}

// startQueued starts an observed service at [server].max_concurrency 1
// (and whatever mutate sets) whose CreatePayment calls are counted in
// created, and returns it with a function that takes its one slot with a
// GetPayment held in the handler. The function it returns gives the slot
// back once the held call has been answered.
func startQueued(t *testing.T, created *atomic.Int64, mutate func(*config.Config)) (*observed, func() (release func())) {
	t.Helper()
	entered, release := make(chan struct{}, 1), make(chan struct{})
	o := startObserved(t, []app.Option{app.WithPaymentHandler(func(h paymentpbconnect.PaymentServiceHandler) paymentpbconnect.PaymentServiceHandler {
		return queuedPayments{blockingPayments: blockingPayments{PaymentServiceHandler: h, entered: entered, release: release}, created: created}
	})}, func(c *config.Config) {
		c.Server.MaxConcurrency = 1
		mutate(c)
	})
	hold := func() func() {
		held := make(chan error, 1)
		go func() {
			_, err := o.payments.GetPayment(context.Background(), with(&paymentpb.GetPaymentRequest{Id: uuid.NewString()}, o.c.customer))
			held <- err
		}()
		<-entered
		var once sync.Once
		free := func() {
			once.Do(func() {
				close(release)
				require.Equal(t, connect.CodeNotFound, connect.CodeOf(<-held), "the request holding the slot is served")
			})
		}
		t.Cleanup(free)
		return free
	}
	return o, hold
}

func queueLeft(reason string) string {
	return `paymentd_concurrency_queue_left_total{reason="` + reason + `"}`
}

// With [server].queue_timeout_ms set, a request that has waited that long
// behind max_concurrency leaves the queue answered ResourceExhausted with
// Retry-After, in Connect, gRPC and gRPC-Web alike; it never reaches its
// handler, writes nothing, and paymentd_concurrency_queue_left_total
// counts it under queue_timeout. The same call is served once the slot is
// free: the refusal was the queue's, not the call's.
func TestQueueTimeoutOverTheWireAnswersResourceExhaustedWithRetryAfterAndWritesNothing(t *testing.T) {
	t.Parallel()
	const queueTimeout = 300 * time.Millisecond
	var created atomic.Int64
	o, hold := startQueued(t, &created, func(c *config.Config) { c.Server.QueueTimeoutMS = int(queueTimeout / time.Millisecond) })
	orderID := o.order(t)
	free := hold()

	req := &paymentpb.CreatePaymentRequest{OrderId: orderID, GatewayInterfaceId: o.epayGW, ReturnUrl: "https://shop.example/done"}
	msg, err := proto.Marshal(req)
	require.NoError(t, err)
	envelope := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(msg)))
	envelope = append(envelope, msg...)
	jsonBody, err := protojson.Marshal(req)
	require.NoError(t, err)
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	// A bounded wait: without the queue timeout a call would wait for the
	// slot, held until the end of the test.
	h1 := &http.Client{Timeout: 10 * time.Second}
	t.Cleanup(h1.CloseIdleConnections)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &protocols}, Timeout: 10 * time.Second}
	t.Cleanup(h2c.CloseIdleConnections)
	post := func(client *http.Client, body []byte, header ...string) (*http.Response, []byte) {
		t.Helper()
		r, err := http.NewRequest(http.MethodPost, o.r.baseURL+paymentpbconnect.PaymentServiceCreatePaymentProcedure, bytes.NewReader(body))
		require.NoError(t, err)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		o.c.customer(r.Header)
		began := time.Now()
		resp, err := client.Do(r)
		require.NoError(t, err)
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.GreaterOrEqual(t, time.Since(began), queueTimeout, "it waited in the queue before the refusal")
		return resp, out
	}

	resp, body := post(h1, jsonBody, "Content-Type", "application/json", "Connect-Protocol-Version", "1")
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%s", body)
	require.Equal(t, "1", resp.Header.Get("Retry-After"))
	require.Contains(t, string(body), `"code":"resource_exhausted"`)

	resp, _ = post(h2c, envelope, "Content-Type", "application/grpc", "Te", "trailers")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "8", resp.Header.Get("Grpc-Status")+resp.Trailer.Get("Grpc-Status"), "gRPC RESOURCE_EXHAUSTED")
	require.Equal(t, "1", resp.Header.Get("Retry-After"))

	resp, _ = post(h1, envelope, "Content-Type", "application/grpc-web+proto")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "8", resp.Header.Get("Grpc-Status"), "gRPC-Web RESOURCE_EXHAUSTED")
	require.Equal(t, "1", resp.Header.Get("Retry-After"))

	m := o.scrape(t)
	require.Equal(t, 3.0, m[queueLeft("queue_timeout")])
	require.Zero(t, m[queueLeft("deadline_exceeded")])
	require.Zero(t, m[queueLeft("canceled")])

	free()
	require.Zero(t, created.Load(), "no refused call reached its handler")
	require.Zero(t, o.count(t, `SELECT count(*) FROM payments WHERE order_id = $1`, orderID), "nothing written")
	require.Equal(t, "pending", o.orderStatus(t, orderID))

	// The control: the same call, with the slot free, is served.
	o.createPayment(t, orderID)
	require.EqualValues(t, 1, created.Load())
	require.Equal(t, 1, o.count(t, `SELECT count(*) FROM payments WHERE order_id = $1`, orderID))
	require.Equal(t, 3.0, o.scrape(t)[queueLeft("queue_timeout")], "a served call is not counted")
}

// A queued request whose client goes away leaves the queue at once (the
// default, queue_timeout_ms 0, would otherwise have it wait for the slot):
// paymentd_concurrency_queue_left_total counts it under canceled, and it is
// never served, not even once the slot is free.
func TestQueuedRequestWhoseClientGoesAwayOverTheWireIsCountedAndNeverServed(t *testing.T) {
	t.Parallel()
	var created atomic.Int64
	o, hold := startQueued(t, &created, func(*config.Config) {})
	orderID := o.order(t)
	free := hold()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	answered := make(chan error, 1)
	go func() {
		_, err := o.payments.CreatePayment(ctx, with(&paymentpb.CreatePaymentRequest{
			OrderId: orderID, GatewayInterfaceId: o.epayGW, ReturnUrl: "https://shop.example/done",
		}, o.c.customer))
		answered <- err
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1.0, o.scrape(c)["paymentd_concurrency_waiting"])
	}, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.Equal(t, connect.CodeCanceled, connect.CodeOf(<-answered))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m := o.scrape(c)
		assert.Equal(c, 1.0, m[queueLeft("canceled")])
		assert.Equal(c, 0.0, m["paymentd_concurrency_waiting"])
	}, 10*time.Second, 5*time.Millisecond, "the server saw the client go and took it out of the queue")
	m := o.scrape(t)
	require.Zero(t, m[queueLeft("deadline_exceeded")])
	require.Zero(t, m[queueLeft("queue_timeout")])
	require.Equal(t, 1.0, m["paymentd_concurrency_in_flight"], "the held call still has the slot")

	free()
	require.Zero(t, created.Load(), "the gone client's call never reached its handler")
	require.Zero(t, o.count(t, `SELECT count(*) FROM payments WHERE order_id = $1`, orderID))
}
