package app_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/testfixture"
	"github.com/rustbill/paymentd/internal/testkit"
)

// Every row of the API contract's error table (docs/api.md, "Errors by
// operation"), provoked over the wire through the whole stack: real plugins, the
// fake epay gateway, real credentials.
func TestSpecErrorTableOverTheWire(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	pool := e.r.app.Pool()

	// A payment paid at the gateway and settled by its notify.
	settledOrder := e.order(t)
	settled := e.createPayment(t, settledOrder).GetPayment().GetId()
	require.NoError(t, e.fake.Pay(settled))
	e.waitSettled(t, settled)
	fo, _ := e.fake.Order(settled)
	// A pending one, and one the gateway never heard of.
	pending := e.createPayment(t, e.order(t)).GetPayment().GetId()
	gw := uuid.MustParse(e.epayGW)
	unknownAtGateway := testfixture.InsertPayment(t, pool, testfixture.Payment{Customer: e.c.customerID, Gateway: gw, Amount: "5.00"}).String()
	missing := uuid.NewString()

	// An invoice of a customer (no order), paid through epay.
	inv, err := e.orders.CreateInvoice(ctx, with(&orderpb.CreateInvoiceRequest{
		Target: &orderpb.CreateInvoiceRequest_CustomerId{CustomerId: e.c.customerID.String()},
		Amount: "7.50", DueAt: time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339),
	}, e.c.admin))
	require.NoError(t, err)
	paidInvoice := inv.Msg.GetInvoice().GetId()
	invPay, err := e.payments.CreatePayment(ctx, with(&paymentpb.CreatePaymentRequest{
		InvoiceId: paidInvoice, GatewayInterfaceId: e.epayGW, ReturnUrl: "https://shop.example/done",
	}, e.c.customer))
	require.NoError(t, err)
	require.NoError(t, e.fake.Pay(invPay.Msg.GetPayment().GetId()))
	e.waitSettled(t, invPay.Msg.GetPayment().GetId())

	// A gateway interface whose host is down, with a pending payment: each
	// status query fails (Internal) until the host's breaker opens.
	downGW, err := e.admin.CreateGatewayInterface(ctx, with(&gatewaypb.CreateGatewayInterfaceRequest{
		PluginName: "epay", DisplayName: "Down",
		Config: mustStruct(t, map[string]any{"api_url": fmt.Sprintf("http://127.0.0.1:%d/", testkit.FreePort(t)), "pid": epay.DefaultPID, "key": epay.DefaultKey}),
	}, e.c.admin))
	require.NoError(t, err)
	atDownGateway := testfixture.InsertPayment(t, pool, testfixture.Payment{
		Customer: e.c.customerID, Gateway: uuid.MustParse(downGW.Msg.GetGatewayInterface().GetId()), Amount: "3.00",
	}).String()

	create := func(orderID string, cr credential) error {
		_, err := e.payments.CreatePayment(ctx, with(&paymentpb.CreatePaymentRequest{
			OrderId: orderID, GatewayInterfaceId: e.epayGW, ReturnUrl: "https://shop.example/done",
		}, cr))
		return err
	}
	get := func(id string, cr credential) error {
		_, err := e.payments.GetPayment(ctx, with(&paymentpb.GetPaymentRequest{Id: id}, cr))
		return err
	}
	query := func(id string, cr credential) error {
		_, err := e.payments.QueryPaymentStatus(ctx, with(&paymentpb.QueryPaymentStatusRequest{PaymentId: id}, cr))
		return err
	}
	createForInvoice := func(invoiceID string) error {
		_, err := e.payments.CreatePayment(ctx, with(&paymentpb.CreatePaymentRequest{
			InvoiceId: invoiceID, GatewayInterfaceId: e.epayGW, ReturnUrl: "https://shop.example/done",
		}, e.c.customer))
		return err
	}
	refund := func(id, amount string, cr credential) error {
		_, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: id, Amount: amount}, cr))
		return err
	}

	rows := []struct {
		op, condition string
		want          connect.Code
		call          func() error
	}{
		{"CreatePayment", "order does not exist", connect.CodeInvalidArgument, func() error { return create(missing, e.c.customer) }},
		{"CreatePayment", "order already paid", connect.CodeInvalidArgument, func() error { return create(settledOrder, e.c.customer) }},
		{"CreatePayment", "invoice does not exist", connect.CodeInvalidArgument, func() error { return createForInvoice(missing) }},
		{"CreatePayment", "invoice already paid", connect.CodeInvalidArgument, func() error { return createForInvoice(paidInvoice) }},
		{"CreatePayment", "gateway plugin execution failed", connect.CodeInternal, func() error {
			e.fake.InjectFault(epay.Fault{Path: "/mapi.php", Status: http.StatusBadRequest, Times: 1})
			return create(e.order(t), e.c.customer)
		}},
		{"CreatePayment", "caller not logged in", connect.CodeUnauthenticated, func() error { return create(e.order(t), nobody) }},

		{"GetPayment", "payment does not exist", connect.CodeNotFound, func() error { return get(missing, e.c.admin) }},
		{"GetPayment", "customer reads another user's payment", connect.CodePermissionDenied, func() error { return get(settled, e.c.other) }},

		{"QueryPaymentStatus", "payment does not exist", connect.CodeNotFound, func() error { return query(missing, e.c.admin) }},
		{"QueryPaymentStatus", "gateway query failed", connect.CodeInternal, func() error { return query(unknownAtGateway, e.c.admin) }},
		{"QueryPaymentStatus", "caller is not admin", connect.CodePermissionDenied, func() error { return query(pending, e.c.customer) }},
		{"QueryPaymentStatus", "the gateway's circuit breaker is open (DESIGN: Unavailable)", connect.CodeUnavailable, func() error {
			var err error
			for range 6 { // 3 attempts per query: the breaker opens after 5 failures
				if err = query(atDownGateway, e.c.admin); connect.CodeOf(err) != connect.CodeInternal {
					break
				}
			}
			return err
		}},

		{"HandleCallback", "signature verification failed", connect.CodeInvalidArgument, func() error {
			return e.callback(strings.Replace(signedNotify(pending, "T1", "12.30"), "money=12.30", "money=0.01", 1))
		}},
		{"HandleCallback", "order number does not match", connect.CodeInvalidArgument, func() error {
			return e.callback(signedNotify(settled, "ANOTHER-GATEWAY-ORDER", "12.30"))
		}},
		{"HandleCallback", "payment does not exist", connect.CodeNotFound, func() error {
			return e.callback(signedNotify(missing, "T1", "12.30"))
		}},
		{"HandleCallback", "duplicate callback", connect.CodeAlreadyExists, func() error {
			return e.callback(signedNotify(settled, fo.TradeNo, fo.Money))
		}},

		{"RefundPayment", "payment does not exist", connect.CodeNotFound, func() error { return refund(missing, "", e.c.admin) }},
		{"RefundPayment", "amount exceeds the payment amount", connect.CodeInvalidArgument, func() error { return refund(settled, "12.31", e.c.admin) }},
		{"RefundPayment", "status does not allow a refund", connect.CodeInvalidArgument, func() error { return refund(pending, "", e.c.admin) }},
		{"RefundPayment", "gateway refund failed", connect.CodeInternal, func() error {
			e.fake.InjectFault(epay.Fault{Path: "/api.php", Act: "refund", Status: http.StatusBadRequest, Times: 1})
			return refund(settled, "1.00", e.c.admin)
		}},
		{"RefundPayment", "caller is not admin", connect.CodePermissionDenied, func() error { return refund(settled, "", e.c.customer) }},
	}
	for _, row := range rows {
		err := row.call()
		require.Equal(t, row.want, connect.CodeOf(err), "%s / %s: %v", row.op, row.condition, err)
	}

	// Nothing the refusals touched moved money.
	require.Equal(t, "success", e.getPayment(t, settled).GetStatus())
	require.Equal(t, "0.00", e.getPayment(t, settled).GetRefundedAmount())
	require.Equal(t, "pending", e.getPayment(t, pending).GetStatus())
	require.Equal(t, "pending", e.getPayment(t, atDownGateway).GetStatus())
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM payments WHERE invoice_id = $1`, paidInvoice), "no second payment of the paid invoice")
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM refunds WHERE status = 'failed'`))
	testfixture.CheckMoneyInvariants(t, pool)
}
