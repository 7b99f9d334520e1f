package orderrpc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/internal/rpctest"
)

// To a customer, another customer's order or invoice is no order at all:
// every procedure that takes its id answers exactly as for an id that does
// not exist (code and message, the id aside), so that the answer does not
// tell whether the id exists.
func TestWireAnotherCustomersIDReadsAsAMissingOne(t *testing.T) {
	t.Parallel()
	w := setupWire(t)
	ctx := context.Background()
	bob := rpctest.Customer(w.Bob)
	o := w.OrderIn(t, w.AsAlice, "10.00", "USD")
	created, err := w.client.CreateInvoice(ctx, rpctest.As(w.admin(), &orderpb.CreateInvoiceRequest{
		Target: &orderpb.CreateInvoiceRequest_OrderId{OrderId: o.ID.String()},
		Amount: "4.50", Description: "domain", DueAt: time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339),
	}))
	require.NoError(t, err)
	invoiceID := created.Msg.GetInvoice().GetId()

	calls := map[string]func(id string) error{
		"GetOrder": func(id string) error {
			_, err := w.client.GetOrder(ctx, rpctest.As(bob, &orderpb.GetOrderRequest{Id: id}))
			return err
		},
		"CancelOrder": func(id string) error {
			_, err := w.client.CancelOrder(ctx, rpctest.As(bob, &orderpb.CancelOrderRequest{OrderId: id}))
			return err
		},
		"PayWithBalance": func(id string) error {
			_, err := w.client.PayWithBalance(ctx, rpctest.As(bob, &orderpb.PayWithBalanceRequest{OrderId: id}))
			return err
		},
		"GetInvoice": func(id string) error {
			_, err := w.client.GetInvoice(ctx, rpctest.As(bob, &orderpb.GetInvoiceRequest{Id: id}))
			return err
		},
	}
	for name, call := range calls {
		existing := o.ID.String()
		if name == "GetInvoice" {
			existing = invoiceID
		}
		missing := uuid.NewString()
		others, none := call(existing), call(missing)
		require.Error(t, others, name)
		require.Error(t, none, name)
		require.Equal(t, connect.CodeNotFound, connect.CodeOf(none), "%s: %v", name, none)
		require.Equal(t, connect.CodeOf(none), connect.CodeOf(others), "%s: %v", name, others)
		require.Equal(t, strings.ReplaceAll(none.Error(), missing, existing), others.Error(), name)
	}
	got, err := w.client.GetOrder(ctx, rpctest.As(rpctest.Customer(w.Alice), &orderpb.GetOrderRequest{Id: o.ID.String()}))
	require.NoError(t, err)
	require.Equal(t, "pending", got.Msg.GetOrder().GetStatus(), "bob's calls changed nothing")
}
