package app_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
)

// Saved cards as the API shows them (issue 39, 1): a customer lists and
// removes their own, an admin lists anyone's, and a customer turns the
// charging of an order's renewals off. Another customer's, an unknown id
// or a malformed one is refused with the contract's code and changes
// nothing.

func TestACustomerListsAndRemovesTheirSavedCardAndItIsNoLongerCharged(t *testing.T) {
	t.Parallel()
	c := startCardOrder(t)
	e, fake, end, advance := c.e, c.fake, c.end, c.advance
	ctx := context.Background()

	list, err := e.payments.ListSavedPaymentMethods(ctx, with(&paymentpb.ListSavedPaymentMethodsRequest{}, e.c.customer))
	require.NoError(t, err)
	require.Len(t, list.Msg.GetSavedMethods(), 1)
	m := list.Msg.GetSavedMethods()[0]
	require.Equal(t, []any{"visa", "4242", int32(12), int32(2035), e.c.customerID.String(), ""},
		[]any{m.GetBrand(), m.GetLast4(), m.GetExpMonth(), m.GetExpYear(), m.GetCustomerId(), m.GetRemovedAt()})
	wire, err := protojson.Marshal(m)
	require.NoError(t, err)
	require.NotContains(t, string(wire), "pm_Card1", "the gateway's references never leave the service")
	require.NotContains(t, string(wire), "cus_Card1")

	// The admin lists the customer's; the other customer may not.
	byAdmin, err := e.payments.ListSavedPaymentMethods(ctx, with(&paymentpb.ListSavedPaymentMethodsRequest{CustomerId: e.c.customerID.String()}, e.c.admin))
	require.NoError(t, err)
	require.Len(t, byAdmin.Msg.GetSavedMethods(), 1)
	_, err = e.payments.ListSavedPaymentMethods(ctx, with(&paymentpb.ListSavedPaymentMethodsRequest{CustomerId: e.c.customerID.String()}, e.c.other))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "another customer's cards: %v", err)
	_, err = e.payments.ListSavedPaymentMethods(ctx, with(&paymentpb.ListSavedPaymentMethodsRequest{}, e.c.admin))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "an admin names the customer: %v", err)
	_, err = e.payments.ListSavedPaymentMethods(ctx, with(&paymentpb.ListSavedPaymentMethodsRequest{CustomerId: "nope"}, e.c.customer))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	other, err := e.payments.ListSavedPaymentMethods(ctx, with(&paymentpb.ListSavedPaymentMethodsRequest{}, e.c.other))
	require.NoError(t, err)
	require.Empty(t, other.Msg.GetSavedMethods(), "the other customer has none")

	// Refusals change nothing: nothing is detached, the card stays.
	_, err = e.payments.RemoveSavedPaymentMethod(ctx, with(&paymentpb.RemoveSavedPaymentMethodRequest{Id: m.GetId()}, e.c.other))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "another customer's card is none at all: %v", err)
	_, err = e.payments.RemoveSavedPaymentMethod(ctx, with(&paymentpb.RemoveSavedPaymentMethodRequest{Id: uuid.NewString()}, e.c.customer))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%v", err)
	_, err = e.payments.RemoveSavedPaymentMethod(ctx, with(&paymentpb.RemoveSavedPaymentMethodRequest{Id: "pm_Card1"}, e.c.customer))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	fake.mu.Lock()
	require.Empty(t, fake.detached)
	fake.mu.Unlock()
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM saved_payment_methods WHERE removed_at IS NULL`))

	removed, err := e.payments.RemoveSavedPaymentMethod(ctx, with(&paymentpb.RemoveSavedPaymentMethodRequest{Id: m.GetId()}, e.c.customer))
	require.NoError(t, err)
	require.NotEmpty(t, removed.Msg.GetSavedMethod().GetRemovedAt())
	fake.mu.Lock()
	require.Equal(t, []string{"pm_Card1"}, fake.detached, "the card is detached at Stripe")
	fake.mu.Unlock()
	_, err = e.payments.RemoveSavedPaymentMethod(ctx, with(&paymentpb.RemoveSavedPaymentMethodRequest{Id: m.GetId()}, e.c.customer))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "removed already: %v", err)
	list, err = e.payments.ListSavedPaymentMethods(ctx, with(&paymentpb.ListSavedPaymentMethodsRequest{}, e.c.customer))
	require.NoError(t, err)
	require.Empty(t, list.Msg.GetSavedMethods())

	advance(end.Add(-7*24*time.Hour + time.Minute))
	advance(end.Add(time.Minute))
	distinct, posts := fake.chargesMade()
	require.Equal(t, []int{0, 0}, []int{distinct, posts}, "a removed card is not charged on the due day")
}

func TestAutoChargeOffLeavesTheRenewalToBePaidByHand(t *testing.T) {
	t.Parallel()
	c := startCardOrder(t)
	e, fake, id, end, advance := c.e, c.fake, c.id, c.end, c.advance
	ctx := context.Background()

	got, err := e.payments.GetAutoCharge(ctx, with(&paymentpb.GetAutoChargeRequest{OrderId: id}, e.c.customer))
	require.NoError(t, err)
	require.True(t, got.Msg.GetAutoCharge(), "on unless turned off")

	// Another customer's order, an unknown one, a malformed id: refused,
	// and the setting stays on.
	_, err = e.payments.SetAutoCharge(ctx, with(&paymentpb.SetAutoChargeRequest{OrderId: id, AutoCharge: false}, e.c.other))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%v", err)
	_, err = e.payments.GetAutoCharge(ctx, with(&paymentpb.GetAutoChargeRequest{OrderId: id}, e.c.other))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%v", err)
	_, err = e.payments.SetAutoCharge(ctx, with(&paymentpb.SetAutoChargeRequest{OrderId: uuid.NewString(), AutoCharge: false}, e.c.customer))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%v", err)
	_, err = e.payments.SetAutoCharge(ctx, with(&paymentpb.SetAutoChargeRequest{OrderId: "order-1", AutoCharge: false}, e.c.customer))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	require.Equal(t, 0, e.count(t, `SELECT count(*) FROM order_auto_charge`), "nothing changed")
	audits := paymentpbconnect.NewPaymentAdminServiceClient(http.DefaultClient, e.r.baseURL)
	changes := func() []*paymentpb.AuditEntry {
		t.Helper()
		res, err := audits.ListAuditEntries(ctx, with(&paymentpb.ListAuditEntriesRequest{
			EntityType: "order", EntityId: id, Action: "order.auto_charge", Pagination: &paymentpb.PageRequest{PageSize: 10},
		}, e.c.admin))
		require.NoError(t, err)
		return res.Msg.GetEntries()
	}
	require.Empty(t, changes(), "a refused change writes no audit row")

	set, err := e.payments.SetAutoCharge(ctx, with(&paymentpb.SetAutoChargeRequest{OrderId: id, AutoCharge: false}, e.c.customer))
	require.NoError(t, err)
	require.False(t, set.Msg.GetAutoCharge())
	// The change is in the audit log: the customer, the order, before
	// and after. Setting it off again changes nothing and writes nothing.
	_, err = e.payments.SetAutoCharge(ctx, with(&paymentpb.SetAutoChargeRequest{OrderId: id, AutoCharge: false}, e.c.customer))
	require.NoError(t, err)
	logged := changes()
	require.Len(t, logged, 1)
	require.Equal(t, []string{"customer", e.c.customerID.String(), "order", id, `{"auto_charge": true}`, `{"auto_charge": false}`},
		[]string{logged[0].GetActorKind(), logged[0].GetActorId(), logged[0].GetEntityType(), logged[0].GetEntityId(), logged[0].GetBefore(), logged[0].GetAfter()})
	got, err = e.payments.GetAutoCharge(ctx, with(&paymentpb.GetAutoChargeRequest{OrderId: id}, e.c.admin))
	require.NoError(t, err)
	require.False(t, got.Msg.GetAutoCharge(), "the admin reads it too")

	advance(end.Add(-7*24*time.Hour + time.Minute))
	advance(end.Add(time.Minute))
	distinct, posts := fake.chargesMade()
	require.Equal(t, []int{0, 0}, []int{distinct, posts}, "auto_charge off: the due day charges nothing")
	require.Equal(t, 0, e.count(t, `SELECT count(*) FROM saved_charge_attempts`))

	// Turned back on (by the admin this time), the next retry day charges
	// it.
	_, err = e.payments.SetAutoCharge(ctx, with(&paymentpb.SetAutoChargeRequest{OrderId: id, AutoCharge: true}, e.c.admin))
	require.NoError(t, err)
	logged = changes()
	require.Len(t, logged, 2)
	require.Equal(t, []string{"admin", `{"auto_charge": false}`, `{"auto_charge": true}`},
		[]string{logged[0].GetActorKind(), logged[0].GetBefore(), logged[0].GetAfter()}, "newest first")
	advance(end.Add(2*24*time.Hour + time.Minute))
	distinct, _ = fake.chargesMade()
	require.Equal(t, 1, distinct, "on again: the retry day charges the card")
}
