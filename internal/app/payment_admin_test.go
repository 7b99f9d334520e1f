package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/fakes/epay"
)

func TestPaymentAdminServiceShowsRefundsAndTheirAuditEntriesToAdminsOnly(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	client := paymentpbconnect.NewPaymentAdminServiceClient(http.DefaultClient, e.r.baseURL)

	// A settled 12.30 payment refunded in two steps: 5.00, then the rest.
	orderID := e.order(t)
	id := e.createPayment(t, orderID).GetPayment().GetId()
	require.NoError(t, e.fake.Pay(id))
	e.waitSettled(t, id)
	for _, amount := range []string{"5.00", ""} {
		_, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: id, Amount: amount}, e.c.admin))
		require.NoError(t, err)
	}

	listRefunds := func(paymentID string, cr credential) (*paymentpb.ListRefundsResponse, error) {
		res, err := client.ListRefunds(ctx, with(&paymentpb.ListRefundsRequest{PaymentId: paymentID}, cr))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	listAudit := func(entityType, entityID string, page *paymentpb.PageRequest, cr credential) (*paymentpb.ListAuditEntriesResponse, error) {
		res, err := client.ListAuditEntries(ctx, with(&paymentpb.ListAuditEntriesRequest{EntityType: entityType, EntityId: entityID, Pagination: page}, cr))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}

	t.Run("OnlyAdminsMayCall", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			cr   credential
			want connect.Code
		}{
			{"anonymous", nobody, connect.CodeUnauthenticated},
			{"customer", e.c.customer, connect.CodePermissionDenied},
			{"api key", e.c.key, connect.CodePermissionDenied},
		} {
			_, err := listRefunds(id, tc.cr)
			require.Equal(t, tc.want, connect.CodeOf(err), "ListRefunds as %s: %v", tc.name, err)
			_, err = listAudit("payment", id, &paymentpb.PageRequest{}, tc.cr)
			require.Equal(t, tc.want, connect.CodeOf(err), "ListAuditEntries as %s: %v", tc.name, err)
		}
	})

	t.Run("RefundsNewestFirst", func(t *testing.T) {
		res, err := listRefunds(id, e.c.admin)
		require.NoError(t, err)
		require.Len(t, res.GetRefunds(), 2)
		rest, first := res.GetRefunds()[0], res.GetRefunds()[1]
		require.Equal(t, "7.30", rest.GetAmount())
		require.Equal(t, "5.00", first.GetAmount())
		for _, r := range res.GetRefunds() {
			require.Equal(t, id, r.GetPaymentId())
			require.Equal(t, "succeeded", r.GetStatus())
			require.NotEmpty(t, r.GetRequestedBy(), "an admin asked for it")
			require.Equal(t, "admin", r.GetRequestedByName(), "named")
			require.NotEmpty(t, r.GetCreatedAt())
			require.NotEmpty(t, r.GetUpdatedAt())
			require.NoError(t, uuid.Validate(r.GetId()))
		}
		require.GreaterOrEqual(t, rest.GetCreatedAt(), first.GetCreatedAt())
	})

	t.Run("RefundAuditEntriesOfThePaymentAndTheRefund", func(t *testing.T) {
		res, err := listAudit("payment", id, &paymentpb.PageRequest{}, e.c.admin)
		require.NoError(t, err)
		var refunds []*paymentpb.AuditEntry
		for _, a := range res.GetEntries() {
			require.Equal(t, "payment", a.GetEntityType())
			require.Equal(t, id, a.GetEntityId())
			if a.GetAction() == "payment.refund" {
				refunds = append(refunds, a)
			}
		}
		require.Len(t, refunds, 2)
		// Newest first: the full refund left the payment refunded.
		last := refunds[0]
		require.Equal(t, "admin", last.GetActorKind())
		require.NotEmpty(t, last.GetActorId())
		var after map[string]any
		require.NoError(t, json.Unmarshal([]byte(last.GetAfter()), &after))
		require.True(t, json.Valid([]byte(last.GetBefore())))
		require.Equal(t, res.GetEntries()[0].GetId(), last.GetId(), "the last refund is the payment's newest entry")
		require.Equal(t, uint64(len(res.GetEntries())), res.GetMeta().GetTotal())
		require.Equal(t, uint32(20), res.GetMeta().GetPageSize())

		// A page of one is the newest entry; the refund rows have their own.
		one, err := listAudit("payment", id, &paymentpb.PageRequest{Page: 1, PageSize: 1}, e.c.admin)
		require.NoError(t, err)
		require.Len(t, one.GetEntries(), 1)
		require.Equal(t, last.GetId(), one.GetEntries()[0].GetId())
		require.Equal(t, res.GetMeta().GetTotal(), uint64(one.GetMeta().GetTotalPages()))

		refundRows, err := listRefunds(id, e.c.admin)
		require.NoError(t, err)
		ref, err := listAudit("refund", refundRows.GetRefunds()[0].GetId(), &paymentpb.PageRequest{}, e.c.admin)
		require.NoError(t, err)
		var actions []string
		for _, a := range ref.GetEntries() {
			actions = append(actions, a.GetAction())
		}
		require.Equal(t, []string{"refund.succeed", "refund.request"}, actions)

		// The order's trail holds its refund too.
		ord, err := listAudit("order", orderID, &paymentpb.PageRequest{}, e.c.admin)
		require.NoError(t, err)
		require.NotEmpty(t, ord.GetEntries())
	})

	t.Run("BadRequests", func(t *testing.T) {
		_, err := listRefunds(uuid.NewString(), e.c.admin)
		require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%v", err)
		_, err = listRefunds("not-a-uuid", e.c.admin)
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
		_, err = listAudit("Payment; drop", id, &paymentpb.PageRequest{}, e.c.admin)
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
		// Without pagination: the first page (docs/api.md, ListAuditEntries).
		first, err := listAudit("payment", id, nil, e.c.admin)
		require.NoError(t, err)
		require.EqualValues(t, 1, first.GetMeta().GetPage())
		_, err = listAudit("payment", id, &paymentpb.PageRequest{PageSize: 101}, e.c.admin)
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
		empty, err := listAudit("payment", uuid.NewString(), &paymentpb.PageRequest{}, e.c.admin)
		require.NoError(t, err)
		require.Empty(t, empty.GetEntries())
	})
}

// The console's list of refunds across payments, over the wire: pending
// ones first found by status, every refund paged, each with its currency;
// a caller that names a payment and sends no paging (the console's payment
// page, and every caller before paging) still gets all of its refunds.
func TestListRefundsAcrossPaymentsByStatusOverTheWire(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	client := paymentpbconnect.NewPaymentAdminServiceClient(http.DefaultClient, e.r.baseURL)
	list := func(req *paymentpb.ListRefundsRequest, cr credential) (*paymentpb.ListRefundsResponse, error) {
		res, err := client.ListRefunds(ctx, with(req, cr))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	paid := func(orderID string) string {
		id := e.createPayment(t, orderID).GetPayment().GetId()
		require.NoError(t, e.fake.Pay(id))
		e.waitSettled(t, id)
		return id
	}
	refund := func(id, amount string) *paymentpb.Refund {
		res, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: id, Amount: amount}, e.c.admin))
		require.NoError(t, err)
		return res.Msg.GetRefund()
	}

	// A CNY payment refunded 2.00, then 3.00 whose gateway answer is lost
	// (pending); a USD payment refunded 1.00.
	cny := paid(e.order(t))
	first := refund(cny, "2.00")
	require.Equal(t, "CNY", first.GetCurrency(), "RefundPayment's refund carries its currency")
	require.Equal(t, "succeeded", first.GetStatus())
	require.Equal(t, "退款成功", first.GetMessage(), "the gateway's success text is a message")
	require.Empty(t, first.GetError(), "a success is not an error")
	e.fake.InjectFault(epay.Fault{Path: "/api.php", Act: "refund", Status: http.StatusBadGateway, Times: 1})
	_, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: cny, Amount: "3.00"}, e.c.admin))
	require.Equal(t, connect.CodeInternal, connect.CodeOf(err), "%v", err)
	usdProduct, err := e.orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{Name: "VPS (USD)", Price: "7.25", Currency: "USD"}, e.c.admin))
	require.NoError(t, err)
	usdOrder, err := e.orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: usdProduct.Msg.GetProduct().GetId()}, e.c.customer))
	require.NoError(t, err)
	dollars := e.dollarGateway(t)
	usd := e.createPaymentVia(t, usdOrder.Msg.GetOrder().GetId(), dollars).GetPayment().GetId()
	require.NoError(t, e.fake.Pay(usd))
	e.waitSettled(t, usd)
	last := refund(usd, "1.00")

	// The pending ones, with no paging asked: page 1 of 20.
	pending, err := list(&paymentpb.ListRefundsRequest{Status: ptr("pending")}, e.c.admin)
	require.NoError(t, err)
	require.Len(t, pending.GetRefunds(), 1)
	lost := pending.GetRefunds()[0]
	require.Equal(t, cny, lost.GetPaymentId())
	require.Equal(t, "3.00", lost.GetAmount())
	require.Equal(t, "CNY", lost.GetCurrency())
	require.Equal(t, "pending", lost.GetStatus())
	require.Contains(t, lost.GetMessage(), "outcome unknown", "why it waits")
	require.Empty(t, lost.GetError(), "a pending refund has not failed")
	require.Equal(t, &paymentpb.PageMeta{Total: 1, Page: 1, PageSize: 20, TotalPages: 1}, pending.GetMeta())

	// Every refund, newest first, two to a page.
	page1, err := list(&paymentpb.ListRefundsRequest{Pagination: &paymentpb.PageRequest{PageSize: 2}}, e.c.admin)
	require.NoError(t, err)
	require.Equal(t, &paymentpb.PageMeta{Total: 3, Page: 1, PageSize: 2, TotalPages: 2}, page1.GetMeta())
	page2, err := list(&paymentpb.ListRefundsRequest{Pagination: &paymentpb.PageRequest{Page: 2, PageSize: 2}}, e.c.admin)
	require.NoError(t, err)
	var got []string
	for _, r := range append(page1.GetRefunds(), page2.GetRefunds()...) {
		got = append(got, r.GetId()+" "+r.GetCurrency())
	}
	require.Equal(t, []string{last.GetId() + " USD", lost.GetId() + " CNY", first.GetId() + " CNY"}, got)
	succeeded, err := list(&paymentpb.ListRefundsRequest{Status: ptr("succeeded")}, e.c.admin)
	require.NoError(t, err)
	require.EqualValues(t, 2, succeeded.GetMeta().GetTotal())

	// One payment, as callers before paging ask: all of its refunds.
	ofCNY, err := list(&paymentpb.ListRefundsRequest{PaymentId: cny}, e.c.admin)
	require.NoError(t, err)
	require.Len(t, ofCNY.GetRefunds(), 2)
	require.Equal(t, lost.GetId(), ofCNY.GetRefunds()[0].GetId())
	require.Equal(t, &paymentpb.PageMeta{Total: 2, Page: 1, PageSize: 2, TotalPages: 1}, ofCNY.GetMeta())
	onePending, err := list(&paymentpb.ListRefundsRequest{PaymentId: cny, Status: ptr("pending"), Pagination: &paymentpb.PageRequest{}}, e.c.admin)
	require.NoError(t, err)
	require.Len(t, onePending.GetRefunds(), 1)
	require.Equal(t, uint32(20), onePending.GetMeta().GetPageSize())

	// Refused.
	for name, c := range map[string]struct {
		req  *paymentpb.ListRefundsRequest
		cr   credential
		want connect.Code
	}{
		"an unknown status":       {&paymentpb.ListRefundsRequest{Status: ptr("refunded")}, e.c.admin, connect.CodeInvalidArgument},
		"an empty status":         {&paymentpb.ListRefundsRequest{Status: ptr("")}, e.c.admin, connect.CodeInvalidArgument},
		"a page of 101":           {&paymentpb.ListRefundsRequest{Pagination: &paymentpb.PageRequest{PageSize: 101}}, e.c.admin, connect.CodeInvalidArgument},
		"a payment id not a UUID": {&paymentpb.ListRefundsRequest{PaymentId: "not-a-uuid"}, e.c.admin, connect.CodeInvalidArgument},
		"an unknown payment":      {&paymentpb.ListRefundsRequest{PaymentId: uuid.NewString(), Status: ptr("pending")}, e.c.admin, connect.CodeNotFound},
		"a customer":              {&paymentpb.ListRefundsRequest{Status: ptr("pending")}, e.c.customer, connect.CodePermissionDenied},
		"an API key":              {&paymentpb.ListRefundsRequest{}, e.c.key, connect.CodePermissionDenied},
		"nobody":                  {&paymentpb.ListRefundsRequest{}, nobody, connect.CodeUnauthenticated},
	} {
		_, err := list(c.req, c.cr)
		require.Equal(t, c.want, connect.CodeOf(err), "%s: %v", name, err)
	}
}
