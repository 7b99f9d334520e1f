package app_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/config"
)

// The audit view's filters: by entity, by kind of entity, by actor and by
// action, each alone and together, every entry in the log when none; a
// read key may list, a customer may not; a half filter is InvalidArgument.
func TestAuditEntriesFilterByEntityActorAndAction(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	client := paymentpbconnect.NewPaymentAdminServiceClient(http.DefaultClient, e.r.baseURL)
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, e.r.baseURL)
	me, err := ids.GetMe(ctx, with(&identitypb.GetMeRequest{}, e.c.admin))
	require.NoError(t, err)
	adminID := me.Msg.GetId()

	// Two payments paid, their orders provisioned (the worker's audit rows
	// are written by then, not while the log is counted); one refunded 5.00
	// by the admin.
	var paid []string
	for range 2 {
		orderID := e.order(t)
		id := e.createPayment(t, orderID).GetPayment().GetId()
		require.NoError(t, e.fake.Pay(id))
		e.waitSettled(t, id)
		e.waitOrderStatus(t, orderID, "active")
		paid = append(paid, id)
	}
	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: paid[0], Amount: "5.00"}, e.c.admin))
	require.NoError(t, err)
	readKey := newAdminKey(t, e.r.baseURL, e.c.admin, "read").cred

	var logged int64
	require.NoError(t, e.r.app.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&logged))

	list := func(req *paymentpb.ListAuditEntriesRequest, cr credential) (*paymentpb.ListAuditEntriesResponse, error) {
		if req.Pagination == nil {
			req.Pagination = &paymentpb.PageRequest{PageSize: 100}
		}
		res, err := client.ListAuditEntries(ctx, with(req, cr))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}

	t.Run("NoFilterIsTheWholeLog", func(t *testing.T) {
		res, err := list(&paymentpb.ListAuditEntriesRequest{}, readKey)
		require.NoError(t, err)
		require.Equal(t, uint64(logged), res.GetMeta().GetTotal())
		require.Len(t, res.GetEntries(), int(logged))
		for i := 1; i < len(res.GetEntries()); i++ {
			require.GreaterOrEqual(t, res.GetEntries()[i-1].GetCreatedAt(), res.GetEntries()[i].GetCreatedAt(), "newest first")
		}
	})

	t.Run("TheRefundShowsBeforeAndAfter", func(t *testing.T) {
		res, err := list(&paymentpb.ListAuditEntriesRequest{EntityType: "payment", EntityId: paid[0], ActorKind: "admin", ActorId: adminID, Action: "payment.refund"}, e.c.admin)
		require.NoError(t, err)
		require.Len(t, res.GetEntries(), 1)
		a := res.GetEntries()[0]
		var before, after map[string]any
		require.NoError(t, json.Unmarshal([]byte(a.GetBefore()), &before))
		require.NoError(t, json.Unmarshal([]byte(a.GetAfter()), &after))
		require.Equal(t, "0.00", before["refunded_amount"], a.GetBefore())
		require.Equal(t, "5.00", after["refunded_amount"], a.GetAfter())
	})

	t.Run("EachFilterHolds", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			req   *paymentpb.ListAuditEntriesRequest
			check func(*paymentpb.AuditEntry) bool
			min   int
		}{
			{"entity", &paymentpb.ListAuditEntriesRequest{EntityType: "payment", EntityId: paid[1]},
				func(a *paymentpb.AuditEntry) bool {
					return a.GetEntityType() == "payment" && a.GetEntityId() == paid[1]
				}, 1},
			{"kind of entity", &paymentpb.ListAuditEntriesRequest{EntityType: "payment"},
				func(a *paymentpb.AuditEntry) bool { return a.GetEntityType() == "payment" }, 3},
			{"actor", &paymentpb.ListAuditEntriesRequest{ActorKind: "admin", ActorId: adminID},
				func(a *paymentpb.AuditEntry) bool { return a.GetActorKind() == "admin" && a.GetActorId() == adminID }, 2},
			{"kind of actor", &paymentpb.ListAuditEntriesRequest{ActorKind: "gateway"},
				func(a *paymentpb.AuditEntry) bool { return a.GetActorKind() == "gateway" }, 0},
			{"action", &paymentpb.ListAuditEntriesRequest{Action: "payment.refund"},
				func(a *paymentpb.AuditEntry) bool { return a.GetAction() == "payment.refund" }, 1},
			{"nobody's", &paymentpb.ListAuditEntriesRequest{ActorKind: "customer", ActorId: e.c.otherID.String(), Action: "payment.refund"},
				func(*paymentpb.AuditEntry) bool { return false }, 0},
		} {
			res, err := list(tc.req, e.c.admin)
			require.NoError(t, err, tc.name)
			require.GreaterOrEqual(t, len(res.GetEntries()), tc.min, tc.name)
			require.Equal(t, uint64(len(res.GetEntries())), res.GetMeta().GetTotal(), tc.name)
			var want int64
			require.NoError(t, e.r.app.Pool().QueryRow(ctx, `SELECT count(*) FROM audit_log
				WHERE ($1 = '' OR entity_type = $1) AND ($2 = '' OR entity_id = $2) AND ($3 = '' OR actor_kind = $3)
				  AND ($4 = '' OR actor_id = $4) AND ($5 = '' OR action = $5)`,
				tc.req.GetEntityType(), tc.req.GetEntityId(), tc.req.GetActorKind(), tc.req.GetActorId(), tc.req.GetAction()).Scan(&want))
			require.Equal(t, want, int64(len(res.GetEntries())), "%s: every entry the filter selects", tc.name)
			for _, a := range res.GetEntries() {
				require.True(t, tc.check(a), "%s: %v", tc.name, a)
			}
		}
	})

	t.Run("HalfFiltersAreInvalid", func(t *testing.T) {
		for _, req := range []*paymentpb.ListAuditEntriesRequest{
			{EntityId: paid[0]},
			{ActorId: adminID},
			{ActorKind: "robot"},
			{EntityType: "Payment"},
		} {
			_, err := list(req, e.c.admin)
			require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", req)
		}
	})

	t.Run("AdminsAndReadKeysOnly", func(t *testing.T) {
		_, err := list(&paymentpb.ListAuditEntriesRequest{}, nobody)
		require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err))
		_, err = list(&paymentpb.ListAuditEntriesRequest{}, e.c.customer)
		require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))
		_, err = list(&paymentpb.ListAuditEntriesRequest{}, e.c.key)
		require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err))
	})
}

// Each entry names its actor as it is now: the admin's username, the API
// key's name, the customer's e-mail; exclude_actions leaves the sign-ins
// out of the page and of its total, and is bounded. GetMe answers the
// service's currencies, which the console offers for a bank account.
func TestAuditEntriesNameTheirActorsAndHideSignIns(t *testing.T) {
	t.Parallel()
	e := startPayments(t, func(c *config.Config) { c.Billing.Currencies = []string{"CNY", "EUR"} })
	ctx := context.Background()
	client := paymentpbconnect.NewPaymentAdminServiceClient(http.DefaultClient, e.r.baseURL)
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, e.r.baseURL)
	admin, err := ids.GetMe(ctx, with(&identitypb.GetMeRequest{}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, []string{"CNY", "EUR"}, admin.Msg.GetCurrencies())
	customer, err := ids.GetMe(ctx, with(&identitypb.GetMeRequest{}, e.c.customer))
	require.NoError(t, err)

	id := e.createPayment(t, e.order(t)).GetPayment().GetId()
	require.NoError(t, e.fake.Pay(id))
	e.waitSettled(t, id)
	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: id, Amount: "1.00"}, e.c.admin))
	require.NoError(t, err)
	key := newAdminKey(t, e.r.baseURL, e.c.admin, "operate")
	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: id, Amount: "2.00"}, key.cred))
	require.NoError(t, err)

	list := func(req *paymentpb.ListAuditEntriesRequest) (*paymentpb.ListAuditEntriesResponse, error) {
		req.Pagination = &paymentpb.PageRequest{PageSize: 100}
		res, err := client.ListAuditEntries(ctx, with(req, e.c.admin))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}

	t.Run("ActorsByName", func(t *testing.T) {
		res, err := list(&paymentpb.ListAuditEntriesRequest{EntityType: "payment", EntityId: id, Action: "payment.refund"})
		require.NoError(t, err)
		require.Len(t, res.GetEntries(), 2)
		byKind := map[string]*paymentpb.AuditEntry{}
		for _, a := range res.GetEntries() {
			byKind[a.GetActorKind()] = a
		}
		require.Equal(t, admin.Msg.GetUsername(), byKind["admin"].GetActorName())
		require.Equal(t, key.id, byKind["api_key"].GetActorId())
		require.Equal(t, "operate automation", byKind["api_key"].GetActorName())

		created, err := list(&paymentpb.ListAuditEntriesRequest{EntityType: "payment", EntityId: id, Action: "payment.create"})
		require.NoError(t, err)
		require.Len(t, created.GetEntries(), 1)
		require.Equal(t, "customer", created.GetEntries()[0].GetActorKind())
		require.Equal(t, customer.Msg.GetEmail(), created.GetEntries()[0].GetActorName())
	})

	t.Run("SignInsHidden", func(t *testing.T) {
		var all, signIns int64
		require.NoError(t, e.r.app.Pool().QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE action IN ('admin.login', 'admin.logout')) FROM audit_log`).Scan(&all, &signIns))
		require.Positive(t, signIns, "the admin's sign-in is logged")
		res, err := list(&paymentpb.ListAuditEntriesRequest{ExcludeActions: []string{"admin.login", "admin.logout"}})
		require.NoError(t, err)
		require.Equal(t, uint64(all-signIns), res.GetMeta().GetTotal())
		require.Len(t, res.GetEntries(), int(all-signIns))
		for _, a := range res.GetEntries() {
			require.NotContains(t, []string{"admin.login", "admin.logout"}, a.GetAction())
		}
		// With another filter: none of the sign-ins it selects.
		res, err = list(&paymentpb.ListAuditEntriesRequest{Action: "admin.login", ExcludeActions: []string{"admin.login"}})
		require.NoError(t, err)
		require.Zero(t, res.GetMeta().GetTotal())
	})

	t.Run("ExclusionsAreBounded", func(t *testing.T) {
		many := make([]string, 21)
		for i := range many {
			many[i] = "admin.login"
		}
		for _, ex := range [][]string{many, {strings.Repeat("a", 129)}} {
			_, err := list(&paymentpb.ListAuditEntriesRequest{ExcludeActions: ex})
			require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err))
		}
	})
}
