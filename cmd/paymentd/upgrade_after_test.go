package main

import (
	"net/url"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"

	eventpb "github.com/rustbill/paymentd/gen/billing/event"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/fakes/epay"
)

// After the upgrade: the release's credentials, its idempotency keys, and
// new work on its rows.

// settled waits until the build's background work has nothing due: no
// event processing or due, no notification due. What is left waits for a
// retry far ahead ([events] and [notify] retry_base of 2 h), so the next
// build reads it as the release left it.
func (a *upgradeAPI) settled(t *testing.T, admin cred) {
	t.Helper()
	ctx := t.Context()
	soon := func(at string) bool {
		ts, err := time.Parse(time.RFC3339, at)
		return err != nil || ts.Before(time.Now().Add(30*time.Minute))
	}
	var busy string
	require.Eventually(t, func() bool {
		for n := uint32(1); ; n++ {
			res, err := a.events.ListEvents(ctx, as(admin, &eventpb.ListEventsRequest{Pagination: &paymentpb.PageRequest{Page: n, PageSize: 100}}))
			if err != nil {
				busy = err.Error()
				return false
			}
			for _, e := range res.Msg.GetEvents() {
				if e.GetStatus() == "processing" || e.GetStatus() == "pending" && soon(e.GetRunAt()) {
					busy = "event " + e.GetId() + " " + e.GetEventType() + " " + e.GetStatus()
					return false
				}
			}
			if n >= res.Msg.GetMeta().GetTotalPages() {
				break
			}
		}
		for n := uint32(1); ; n++ {
			res, err := a.events.ListNotifications(ctx, as(admin, &eventpb.ListNotificationsRequest{Pagination: &paymentpb.PageRequest{Page: n, PageSize: 100}}))
			if err != nil {
				busy = err.Error()
				return false
			}
			for _, x := range res.Msg.GetNotifications() {
				if x.GetStatus() == "pending" && soon(x.GetNextAttemptAt()) {
					busy = "notification " + x.GetId() + " to " + x.GetRecipient()
					return false
				}
			}
			if n >= res.Msg.GetMeta().GetTotalPages() {
				return true
			}
		}
	}, 60*time.Second, 50*time.Millisecond, "background work still due: %s", func() any { return busy })
}

// checkCredentials requires that what the release issued still works as
// it did: passwords, customer access tokens (already used by the
// readback), a customer's API key, admin API keys within their scopes,
// TOTP codes and a recovery code; and that what it ended stays ended.
func (a *upgradeAPI) checkCredentials(t *testing.T, r *released) {
	t.Helper()
	ctx := t.Context()
	// A customer's password, checked against the release's hash (at its
	// production cost: one is enough); a disabled account stays refused.
	login, err := a.ids.Login(ctx, connect.NewRequest(&identitypb.LoginRequest{Email: r.customers["alice"].email, Password: upgradeCustomerPassword}))
	require.NoError(t, err, "alice signs in with the password the release stored")
	require.Equal(t, r.customers["alice"].id, login.Msg.GetCustomer().GetId())
	_, err = a.ids.Login(ctx, connect.NewRequest(&identitypb.LoginRequest{Email: r.customers["dave"].email, Password: upgradeCustomerPassword}))
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "the disabled customer: %v", err)
	me, err := a.ids.GetMe(ctx, as(keyCred(r.shopKey), &identitypb.GetMeRequest{}))
	require.NoError(t, err, "carol's API key")
	require.Equal(t, r.customers["carol"].id, me.Msg.GetId())
	require.Equal(t, "api_key", me.Msg.GetCredential())
	_, err = a.orders.ListOrders(ctx, as(keyCred(r.shopKey), &orderpb.ListOrdersRequest{Pagination: &paymentpb.PageRequest{}}))
	require.NoError(t, err, "carol's API key lists her orders")
	_, err = a.ids.GetMe(ctx, as(keyCred(r.oldKey), &identitypb.GetMeRequest{}))
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "carol's revoked key: %v", err)

	for scope, key := range r.adminKeys {
		me, err := a.ids.GetMe(ctx, as(keyCred(key), &identitypb.GetMeRequest{}))
		if scope == "revoked" {
			require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "the revoked admin key: %v", err)
			continue
		}
		require.NoError(t, err, "the admin key of scope %s", scope)
		require.Equal(t, scope, me.Msg.GetScope())
	}
	read := keyCred(r.adminKeys["read"])
	_, err = a.payments.ListPayments(ctx, as(read, &paymentpb.ListPaymentsRequest{Pagination: &paymentpb.PageRequest{}}))
	require.NoError(t, err, "scope read reads")
	_, err = a.payments.RefundPayment(ctx, as(read, &paymentpb.RefundPaymentRequest{PaymentId: r.payments["active"], Amount: "0.01"}))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "scope read does not refund: %v", err)
	_, err = a.ids.CreateAdminApiKey(ctx, as(keyCred(r.adminKeys["admin"]), &identitypb.CreateAdminApiKeyRequest{Name: "minted", Scope: "read"}))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "a key does not mint keys: %v", err)

	// The admin has TOTP: the password alone is not enough.
	_, err = a.ids.AdminLogin(ctx, connect.NewRequest(&identitypb.AdminLoginRequest{Username: "admin", Password: upgradeAdminPassword}))
	require.Equal(t, connect.CodeUnauthenticated, connect.CodeOf(err), "the password without a code: %v", err)
	require.Equal(t, "totp_required", errorReason(t, err))
	// A code is accepted once per 30-second step, and the release accepted
	// the code of its confirmation's step: the next step's code is a later
	// one, and within the step either side that a code may be off by.
	a.adminLogin(t, totpCode(t, r.totpSecret, time.Now().Add(30*time.Second)))
	a.adminLogin(t, r.recovery[0])
}

// checkReplays sends the release's idempotent money calls again with
// their keys: the answers are the release's, marked replayed.
func (a *upgradeAPI) checkReplays(t *testing.T, r *released) {
	t.Helper()
	for _, rp := range r.replays {
		got, h, err := rp.send(t.Context())
		require.NoError(t, err, "%s sent again with the release's key", rp.name)
		require.Equal(t, "true", h.Get("Idempotent-Replayed"), "%s: the kept outcome", rp.name)
		if !proto.Equal(rp.answer, got) {
			require.Equal(t, asJSON(rp.answer), asJSON(got), "%s answers what the release answered", rp.name)
		}
	}
}

// carryOn does new work on the release's rows: the release's pending
// payment is paid at the gateway and settled, a new customer pays, an
// admin key of scope operate refunds a release payment, the release's
// pending bank refund is resolved, and a billing pass renews.
func (a *upgradeAPI) carryOn(t *testing.T, fake *epay.Server, r *released) {
	t.Helper()
	ctx := t.Context()
	admin := r.admin

	require.NoError(t, fake.Pay(r.payments["pending"]))
	a.waitPayment(t, admin, r.payments["pending"], func(p *paymentpb.PaymentRecord) bool { return p.GetStatus() == "success" })
	a.waitOrder(t, admin, r.orders["pending"], "active")

	reg, err := a.ids.Register(ctx, connect.NewRequest(&identitypb.RegisterRequest{
		Email: "erin@example.com", Password: upgradeCustomerPassword, Name: "Erin"}))
	require.NoError(t, err, "a new customer registers")
	erin := bearerCred(reg.Msg.GetAccessToken())
	o := a.order(t, erin, r.once)
	a.payByEpay(t, fake, erin, o, "", r.epay)
	a.waitOrder(t, admin, o, "active")

	operate := keyCred(r.adminKeys["operate"])
	ref, err := a.payments.RefundPayment(ctx, as(operate, &paymentpb.RefundPaymentRequest{PaymentId: r.payments["active"], Amount: "3.00", Reason: "after the upgrade"}))
	require.NoError(t, err, "scope operate refunds a payment the release took")
	require.Equal(t, "succeeded", ref.Msg.GetRefund().GetStatus())
	require.Equal(t, "3.00", ref.Msg.GetPayment().GetRefundedAmount())
	res, err := a.payAdmin.ResolveRefund(ctx, as(operate, &paymentpb.ResolveRefundRequest{RefundId: r.pendingRefund, Outcome: "succeeded",
		GatewayRefundId: "STMT-0003", Note: "sent back by hand"}))
	require.NoError(t, err, "the release's pending refund is resolved")
	require.Equal(t, "4.00", res.Msg.GetPayment().GetRefundedAmount())

	// Renewal: the next renewal invoices are issued, bob's paid from his
	// balance.
	renewed, err := a.orders.GetOrder(ctx, as(admin, &orderpb.GetOrderRequest{Id: r.orders["renewed"]}))
	require.NoError(t, err)
	require.Len(t, renewed.Msg.GetPeriods(), 2)
	second, err := time.Parse(time.RFC3339, renewed.Msg.GetOrder().GetPaidUntil())
	require.NoError(t, err)
	pass := a.advanceTo(t, admin, &r.clock, second.Add(-7*24*time.Hour+time.Minute))
	require.EqualValues(t, 2, pass.GetIssued(), "the orders that renew and have paid: %v", pass)
	require.EqualValues(t, 1, pass.GetAutoPaid(), "bob's from his balance: %v", pass)
	renewed, err = a.orders.GetOrder(ctx, as(admin, &orderpb.GetOrderRequest{Id: r.orders["renewed"]}))
	require.NoError(t, err)
	require.Len(t, renewed.Msg.GetPeriods(), 3)
	require.Equal(t, "paid", renewed.Msg.GetPeriods()[2].GetStatus())

	stats, err := a.payAdmin.GetPaymentStats(ctx, as(admin, &paymentpb.GetPaymentStatsRequest{Since: r.since}))
	require.NoError(t, err)
	assert.NotZero(t, stats.Msg.GetSuccess())
	csv, err := a.export(ctx, admin, "payments", url.Values{"from": {r.from}, "to": {r.to}})
	require.NoError(t, err)
	require.Contains(t, csv, r.payments["pending"])
}

// errorReason is the ErrorInfo reason of a connect error, "" without one.
func errorReason(t *testing.T, err error) string {
	t.Helper()
	var ce *connect.Error
	require.ErrorAs(t, err, &ce)
	for _, d := range ce.Details() {
		v, derr := d.Value()
		require.NoError(t, derr)
		if info, ok := v.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}
