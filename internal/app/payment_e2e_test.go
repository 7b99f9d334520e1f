package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// The whole way, over real HTTP: an order, a payment at the fake epay
// gateway through the shipped plugin, the buyer pays, the gateway's GET
// notify reaches /callbacks/{id}, the order is paid and order_paid queued.
func TestOrderPaidThroughEpayEndToEnd(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	orderID := e.order(t)
	created := e.createPayment(t, orderID)
	p := created.GetPayment()
	require.Equal(t, "pending", p.GetStatus())
	require.Equal(t, "12.30", p.GetAmount())
	require.True(t, strings.HasPrefix(created.GetPaymentUrl(), e.fake.URL()), created.GetPaymentUrl())
	fo, ok := e.fake.Order(p.GetId())
	require.True(t, ok)
	require.Equal(t, e.r.baseURL+"/callbacks/"+e.epayGW, fo.NotifyURL)

	require.NoError(t, e.fake.Pay(p.GetId()))
	paid := e.waitSettled(t, p.GetId())
	require.Equal(t, fo.TradeNo, paid.GetGatewayPaymentId())
	require.NotEmpty(t, paid.GetPaidAt())
	// The event worker takes order_paid on: this product has no provider
	// plugin, so the order goes active at once.
	e.waitOrderStatus(t, orderID, "active")
	ns := e.fake.Notifications()
	require.NotEmpty(t, ns)
	require.True(t, ns[len(ns)-1].Acked, "the gateway got its \"success\"")
	require.Equal(t, http.MethodGet, ns[0].Method)

	// The worker marks the event done just after the handler's transaction.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1, e.count(c, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_paid' AND status = 'done'`, orderID))
	}, 10*time.Second, 20*time.Millisecond)
	var payload []byte
	require.NoError(t, e.r.app.Pool().QueryRow(context.Background(),
		`SELECT payload FROM events WHERE order_id = $1 AND event_type = 'order_paid'`, orderID).Scan(&payload))
	var ev map[string]any
	require.NoError(t, json.Unmarshal(payload, &ev))
	require.Equal(t, map[string]any{"order_id": orderID, "payment_id": p.GetId(), "amount": "12.30", "currency": "CNY", "method": "gateway"}, ev)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.success' AND actor_kind = 'gateway'`))

	// The repeat of the notify is acknowledged again, and changes nothing.
	require.NoError(t, e.fake.Renotify(p.GetId()))
	require.Eventually(t, func() bool {
		ns := e.fake.Notifications()
		return len(ns) >= 2 && ns[len(ns)-1].Acked
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_paid'`, orderID))
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}

// The same with every notify lost: the reconciler asks the gateway and
// repairs it.
func TestLostNotifyIsRepairedByReconciliation(t *testing.T) {
	t.Parallel()
	e := startPayments(t, func(c *config.Config) { c.Billing.ReconcileAfter = 500 * time.Millisecond })
	e.fake.DropNotify(true)
	orderID := e.order(t)
	p := e.createPayment(t, orderID).GetPayment()
	require.NoError(t, e.fake.Pay(p.GetId()))

	paid := e.waitSettled(t, p.GetId())
	e.waitOrderStatus(t, orderID, "active")
	fo, _ := e.fake.Order(p.GetId())
	require.Equal(t, fo.TradeNo, paid.GetGatewayPaymentId())
	for _, n := range e.fake.Notifications() {
		require.True(t, n.Dropped, "no notify ever arrived")
	}
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_paid'`, orderID))
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.success' AND actor_kind = 'system'`))
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}

// CreatePayment and GetPayment answer the same over gRPC (HTTP/2),
// gRPC-Web and Connect JSON.
func TestCreateAndGetPaymentOverEveryProtocol(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	var protocols http.Protocols
	protocols.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: &protocols}}
	t.Cleanup(h2c.CloseIdleConnections)

	for _, tc := range []struct {
		name   string
		client *http.Client
		opts   []connect.ClientOption
	}{
		{"grpc", h2c, []connect.ClientOption{connect.WithGRPC()}},
		{"grpc-web", http.DefaultClient, []connect.ClientOption{connect.WithGRPCWeb()}},
		{"connect-json", http.DefaultClient, []connect.ClientOption{connect.WithProtoJSON()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := paymentpbconnect.NewPaymentServiceClient(tc.client, e.r.baseURL, tc.opts...)
			ctx := context.Background()
			orderID := e.order(t)
			created, err := client.CreatePayment(ctx, with(&paymentpb.CreatePaymentRequest{
				OrderId: orderID, InvoiceId: "", GatewayInterfaceId: e.epayGW, ReturnUrl: "https://shop.example/done",
			}, e.c.customer))
			require.NoError(t, err)
			p := created.Msg.GetPayment()
			require.Equal(t, "12.30", p.GetAmount())
			require.Equal(t, orderID, p.GetOrderId())
			require.Empty(t, p.GetInvoiceId())
			require.NotEmpty(t, created.Msg.GetPaymentUrl())

			got, err := client.GetPayment(ctx, with(&paymentpb.GetPaymentRequest{Id: p.GetId()}, e.c.customer))
			require.NoError(t, err)
			require.Equal(t, p.GetId(), got.Msg.GetPayment().GetId())
			require.Equal(t, "pending", got.Msg.GetPayment().GetStatus())
			require.Empty(t, got.Msg.GetPayment().GetPaidAt())

			_, err = client.GetPayment(ctx, with(&paymentpb.GetPaymentRequest{Id: p.GetId()}, e.c.other))
			require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%v", err)
			_, err = client.CreatePayment(ctx, connect.NewRequest(&paymentpb.CreatePaymentRequest{
				OrderId: orderID, GatewayInterfaceId: e.epayGW, ReturnUrl: "https://shop.example/done",
			}))
			require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "%v", err)
		})
	}
}

// Fifty deliveries of one valid callback at once, through the whole stack
// (concurrency limit, database pool of 20): one applies, 49 are
// AlreadyExists, one order_paid.
func TestFiftyConcurrentCallbacksThroughTheWholeStack(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	orderID := e.order(t)
	p := e.createPayment(t, orderID).GetPayment()
	payload := signedNotify(p.GetId(), "2026010100000000042", "12.3")

	const n = 50
	codes := make(chan connect.Code, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			codes <- connect.CodeOf(e.callback(payload))
		})
	}
	close(start)
	wg.Wait()
	close(codes)
	got := map[connect.Code]int{}
	for c := range codes {
		got[c]++
	}
	require.Equal(t, map[connect.Code]int{connect.CodeUnknown: 1, connect.CodeAlreadyExists: n - 1}, got,
		"CodeOf(nil) is Unknown: exactly one delivery succeeded")
	e.waitOrderStatus(t, orderID, "active")
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_paid'`, orderID))
	testfixture.CheckMoneyInvariants(t, e.r.app.Pool())
}
