package app_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/testkit"
)

// The headers a test sends to make panickingGetPayment panic, or hold the
// call in the handler until released.
const (
	panicHeader = "X-Test-Panic"
	holdHeader  = "X-Test-Hold"
	// panicSecret stands for what a handler holds when it panics: the log
	// gets it, the client never.
	panicSecret = "whsec_test_not_for_clients"
)

// panickingGetPayment is the real PaymentService, except that GetPayment
// panics when the request carries panicHeader and waits for release when
// it carries holdHeader: a defect planted in one procedure, on the stack
// app.New builds (every interceptor, the limits, the credential layers).
type panickingGetPayment struct {
	paymentpbconnect.PaymentServiceHandler
	entered chan<- struct{}
	release <-chan struct{}
}

func (p panickingGetPayment) GetPayment(ctx context.Context, req *connect.Request[paymentpb.GetPaymentRequest]) (*connect.Response[paymentpb.GetPaymentResponse], error) {
	if req.Header().Get(panicHeader) != "" {
		panic("cannot sign the query with " + panicSecret)
	}
	if req.Header().Get(holdHeader) != "" {
		p.entered <- struct{}{}
		<-p.release
	}
	return p.PaymentServiceHandler.GetPayment(ctx, req)
}

// A procedure that panics answers Internal "internal error" over Connect,
// gRPC and gRPC-Web, on one HTTP/2 (h2c) connection that also carries a
// call held open in its handler during the panics; that call and the ones
// after are served on the same connection. paymentd_panics_total counts
// each panic under the procedure, the RPC counters see code internal, the
// log has one ERROR line per panic with the request id, the procedure,
// the value and the stack, the client's answer holds nothing of the value,
// and the concurrency limit has no slot left taken.
func TestPanickingProcedureOverTheWire(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}, 1), make(chan struct{})
	o := startObserved(t, []app.Option{app.WithPaymentHandler(func(h paymentpbconnect.PaymentServiceHandler) paymentpbconnect.PaymentServiceHandler {
		return panickingGetPayment{PaymentServiceHandler: h, entered: entered, release: release}
	})})
	paymentID := o.createPayment(t, o.order(t)).GetPayment().GetId()

	h2c, conn := testkit.OneConnection(t, true)
	clients := map[string]paymentpbconnect.PaymentServiceClient{
		"connect":  paymentpbconnect.NewPaymentServiceClient(h2c, o.r.baseURL),
		"grpc":     paymentpbconnect.NewPaymentServiceClient(h2c, o.r.baseURL, connect.WithGRPC()),
		"grpc-web": paymentpbconnect.NewPaymentServiceClient(h2c, o.r.baseURL, connect.WithGRPCWeb()),
	}
	get := func(c paymentpbconnect.PaymentServiceClient, header string) (*connect.Response[paymentpb.GetPaymentResponse], error) {
		req := with(&paymentpb.GetPaymentRequest{Id: paymentID}, o.c.customer)
		if header != "" {
			req.Header().Set(header, "1")
		}
		return c.GetPayment(context.Background(), req)
	}

	held := make(chan error, 1)
	go func() {
		_, err := get(clients["grpc"], holdHeader)
		held <- err
	}()
	testkit.WaitOrTimeout(t, entered, "the held call in its handler")
	for name, c := range clients {
		_, err := get(c, panicHeader)
		require.Equal(t, connect.CodeInternal, connect.CodeOf(err), "%s: %v", name, err)
		var ce *connect.Error
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "internal error", ce.Message(), name)
		require.NotContains(t, err.Error(), panicSecret, name)
	}
	close(release)
	require.NoError(t, testkit.WaitOrTimeout(t, held, "the held call's answer"), "the call open during the panics is served")
	for name, c := range clients {
		res, err := get(c, "")
		require.NoError(t, err, "%s after the panics", name)
		require.Equal(t, paymentID, res.Msg.GetPayment().GetId())
	}
	require.NoError(t, conn.Err(), "every call went on the one connection, still open")

	procedure := paymentpbconnect.PaymentServiceGetPaymentProcedure
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 0.0, o.scrape(c)["paymentd_concurrency_in_flight"])
	}, 10*time.Second, 5*time.Millisecond,
		"no slot of the concurrency limit stays taken")
	m := o.scrape(t)
	require.Equal(t, 3.0, m[`paymentd_panics_total{route="`+procedure+`"}`])
	require.Equal(t, 3.0, m[`paymentd_rpc_requests_total{code="internal",procedure="`+procedure+`"}`], "the RPC's own counters see the panics as Internal answers")
	require.Equal(t, 4.0, m[`paymentd_rpc_requests_total{code="ok",procedure="`+procedure+`"}`])

	var panicked, accessLines int
	for _, l := range o.logs.Lines(t) {
		switch {
		case l["msg"] == "handler panicked":
			panicked++
			require.Equal(t, "ERROR", l["level"])
			require.Equal(t, procedure, l["procedure"])
			require.NotEmpty(t, l["request_id"], "the line belongs to its request")
			require.Contains(t, l["panic"], panicSecret, "the value goes to the log")
			require.Contains(t, l["stack"], "panickingGetPayment.GetPayment", "the stack holds the frame that panicked")
		case l["msg"] == "rpc" && l["code"] == "internal":
			accessLines++
			require.Equal(t, procedure, l["procedure"])
			require.Equal(t, "internal error", l["error"])
		}
	}
	require.Equal(t, 3, panicked)
	require.Equal(t, 3, accessLines, "each panicked call still has its access line")
}
