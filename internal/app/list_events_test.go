package app_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	eventpb "github.com/rustbill/paymentd/gen/billing/event"
	"github.com/rustbill/paymentd/gen/billing/event/eventpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
)

// ListEvents filters by every type the queue holds, order_refunded among
// them (docs/api.md), and refuses a type it does not hold, naming it.
func TestListEventsFiltersByEveryEventType(t *testing.T) {
	t.Parallel()
	e := startRefundEnv(t)
	events := eventpbconnect.NewEventAdminServiceClient(http.DefaultClient, e.r.baseURL)
	orderID, paymentID := e.paidOrder(t)
	e.refund(t, paymentID, "12.30")

	list := func(typ string) (*eventpb.ListEventsResponse, error) {
		res, err := events.ListEvents(context.Background(), with(&eventpb.ListEventsRequest{
			Pagination: &paymentpb.PageRequest{Page: 1, PageSize: 50}, EventType: &typ,
		}, e.c.admin))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		res, err := list("order_refunded")
		require.NoError(c, err, "order_refunded is a type the queue holds")
		assert.Len(c, res.GetEvents(), 1)
	}, 15*time.Second, 50*time.Millisecond, "the refund's order_refunded event")
	res, err := list("order_refunded")
	require.NoError(t, err)
	require.Equal(t, orderID, res.GetEvents()[0].GetOrderId())
	require.Equal(t, "order_refunded", res.GetEvents()[0].GetEventType())

	for _, typ := range []string{"order_paid", "order_provisioned", "order_cancelled"} {
		res, err := list(typ)
		require.NoError(t, err, typ)
		for _, ev := range res.GetEvents() {
			require.Equal(t, typ, ev.GetEventType())
		}
	}

	// Another type is refused at the edge by the contract's rule, which
	// lists the types the queue holds.
	_, err = list("order_exploded")
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
	require.ErrorContains(t, err, "event_type")
	require.ErrorContains(t, err, "order_refunded")
}
