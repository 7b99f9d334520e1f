package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	eventpb "github.com/rustbill/paymentd/gen/billing/event"
	"github.com/rustbill/paymentd/gen/billing/event/eventpbconnect"
	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	"github.com/rustbill/paymentd/gen/billing/gateway/gatewaypbconnect"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	"github.com/rustbill/paymentd/gen/billing/order/orderpbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/fakes/epay"
)

// What the release writes: every kind of row it knows, made through its
// API as a shop, a console, an admin's scripts and the gateways make them.

// upgradeAPI is a client of a running paymentd. Both builds listen on the
// same address, so one client serves the release and the build under test.
type upgradeAPI struct {
	base      string
	ids       identitypbconnect.IdentityServiceClient
	customers identitypbconnect.CustomerAdminServiceClient
	gateways  gatewaypbconnect.GatewayAdminServiceClient
	methods   gatewaypbconnect.PaymentMethodServiceClient
	orders    orderpbconnect.OrderServiceClient
	payments  paymentpbconnect.PaymentServiceClient
	payAdmin  paymentpbconnect.PaymentAdminServiceClient
	events    eventpbconnect.EventAdminServiceClient
}

func newUpgradeAPI(base string) *upgradeAPI {
	c := http.DefaultClient
	return &upgradeAPI{
		base:      base,
		ids:       identitypbconnect.NewIdentityServiceClient(c, base),
		customers: identitypbconnect.NewCustomerAdminServiceClient(c, base),
		gateways:  gatewaypbconnect.NewGatewayAdminServiceClient(c, base),
		methods:   gatewaypbconnect.NewPaymentMethodServiceClient(c, base),
		orders:    orderpbconnect.NewOrderServiceClient(c, base),
		payments:  paymentpbconnect.NewPaymentServiceClient(c, base),
		payAdmin:  paymentpbconnect.NewPaymentAdminServiceClient(c, base),
		events:    eventpbconnect.NewEventAdminServiceClient(c, base),
	}
}

// cred is one credential as a request header.
type cred struct{ header, value string }

func sessionCred(cookie string) cred { return cred{"Cookie", cookie} }
func bearerCred(token string) cred   { return cred{"Authorization", "Bearer " + token} }
func keyCred(key string) cred        { return cred{"X-Api-Key", key} }

// as is a request made with c.
func as[T any](c cred, msg *T) *connect.Request[T] {
	r := connect.NewRequest(msg)
	r.Header().Set(c.header, c.value)
	return r
}

// withKey is a request made with c under an Idempotency-Key.
func withKey[T any](c cred, key string, msg *T) *connect.Request[T] {
	r := as(c, msg)
	r.Header().Set("Idempotency-Key", key)
	return r
}

const (
	upgradeAdminPassword    = "upgrade-bootstrap-password"
	upgradeCustomerPassword = "a long enough password"
)

// upgradeCustomer is a customer the release registered.
type upgradeCustomer struct {
	id, email, token string
}

// replay is a money call the release made under an Idempotency-Key: sent
// again with the same key, any build must answer what the release
// answered, and move nothing.
type replay struct {
	name   string
	send   func(ctx context.Context) (proto.Message, http.Header, error)
	answer proto.Message
}

// keyed makes a money call with c under an Idempotency-Key and keeps it
// to send again after the upgrade (both builds listen on one address, so
// call reaches whichever runs).
func keyed[Req, Res any](t *testing.T, r *released, name, key string, c cred, req *Req,
	call func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error)) *Res {
	t.Helper()
	res, err := call(t.Context(), withKey(c, key, req))
	require.NoError(t, err, name)
	r.replays = append(r.replays, replay{name: name, answer: any(res.Msg).(proto.Message),
		send: func(ctx context.Context) (proto.Message, http.Header, error) {
			res, err := call(ctx, withKey(c, key, req))
			if err != nil {
				return nil, nil, err
			}
			return any(res.Msg).(proto.Message), res.Header(), nil
		}})
	return res.Msg
}

// billingClock is how far a build's billing test clock runs ahead of the
// wall clock ([billing].test_clock; AdvanceBillingClock moves it).
type billingClock struct{ ahead time.Duration }

func (c *billingClock) now() time.Time { return time.Now().Add(c.ahead) }

// released is what the release made, and what the checks after the
// upgrade need of it.
type released struct {
	admin      cred // the admin's session, started before the upgrade
	totpSecret string
	recovery   []string
	// adminKeys by scope, and "revoked".
	adminKeys map[string]string
	customers map[string]upgradeCustomer // alice, bob, carol, dave
	shopKey   string                     // carol's API key
	oldKey    string                     // carol's revoked one
	epay      string                     // gateway interfaces
	bank      string
	once      string // the one-time product
	// orders and payments by their part in the story.
	orders   map[string]string
	payments map[string]string
	// pendingRefund is the bank transfer's refund waiting for an admin.
	pendingRefund string
	replays       []replay
	clock         billingClock
	// from and to are the range of days the exports and the trends read,
	// since the start of the payment figures.
	from, to, since string
}

// fill makes the release write every kind of row it knows:
//
//   - the admin with TOTP confirmed and recovery codes; admin API keys of
//     every scope, one with an expiry, one revoked;
//   - gateway interfaces: epay, a bank transfer, a disabled spare (its
//     merchant key sealed under [secrets]); a gateway plugin disabled;
//   - products: one-time, monthly, one with a provider plugin, a disabled
//     one;
//   - customers: a balance and a credit limit, a balance below zero on
//     credit, API keys (one revoked), a disabled account;
//   - orders in every status an order rests in: pending, active,
//     provisioning (its provider down, its order_paid event waiting for a
//     retry), suspended by an admin and for an unpaid renewal, cancelled,
//     refunded, completed, terminated (paid is the moment between a
//     callback and the event worker, which no database at rest holds);
//   - payments through epay, the balance and a bank transfer: pending,
//     success, failed, refunded, and failed with captured money partly
//     returned;
//   - refunds in full and in part, to the gateway and to the balance, and
//     one pending for an admin;
//   - invoices issued, paid (by gateway, balance and bank transfer),
//     overdue and cancelled;
//   - recurring orders through a month and a half of billing passes on the
//     test clock: renewed from the balance and through the gateway,
//     overdue, suspended, terminated, ended at the period's end; a period
//     extended by hand;
//   - idempotency keys of money calls; events and notifications done and
//     pending (a webhook that answers, one that does not); the audit log
//     and the trends rollup of all of it.
//
// Partly paid invoices are not among them: the release's API cannot make
// one (a payment of an invoice is for what is left of it).
func (a *upgradeAPI) fill(t *testing.T, fake *epay.Server, providerDown string) *released {
	t.Helper()
	ctx := t.Context()
	r := &released{adminKeys: map[string]string{}, customers: map[string]upgradeCustomer{},
		orders: map[string]string{}, payments: map[string]string{}}
	today := time.Now().UTC()
	r.from, r.to = today.AddDate(0, 0, -1).Format(time.DateOnly), today.AddDate(0, 0, 70).Format(time.DateOnly)
	r.since = today.Add(-6 * time.Hour).Truncate(time.Hour).Format(time.RFC3339)

	// The admin: a session, then TOTP, which ends it and answers the next.
	admin := a.adminLogin(t, "")
	st, err := a.ids.StartTotpEnrolment(ctx, as(admin, &identitypb.StartTotpEnrolmentRequest{Password: upgradeAdminPassword}))
	require.NoError(t, err)
	r.totpSecret = st.Msg.GetSecret()
	cf, err := a.ids.ConfirmTotpEnrolment(ctx, as(admin, &identitypb.ConfirmTotpEnrolmentRequest{
		Code: totpCode(t, r.totpSecret, time.Now()), Password: upgradeAdminPassword}))
	require.NoError(t, err)
	r.recovery = cf.Msg.GetRecoveryCodes()
	require.Len(t, r.recovery, 10)
	admin = sessionCred(cookieOf(t, cf.Header()))
	r.admin = admin

	for _, k := range []struct{ name, scope, expires string }{
		{"reports", "read", ""},
		{"operations", "operate", time.Now().Add(200 * 24 * time.Hour).UTC().Format(time.RFC3339)},
		{"automation", "admin", ""},
		{"retired", "read", ""},
	} {
		res, err := a.ids.CreateAdminApiKey(ctx, as(admin, &identitypb.CreateAdminApiKeyRequest{Name: k.name, Scope: k.scope, ExpiresAt: k.expires}))
		require.NoError(t, err)
		if k.name == "retired" {
			_, err = a.ids.RevokeAdminApiKey(ctx, as(admin, &identitypb.RevokeAdminApiKeyRequest{Id: res.Msg.GetApiKey().GetId()}))
			require.NoError(t, err)
			r.adminKeys["revoked"] = res.Msg.GetKey()
			continue
		}
		r.adminKeys[k.scope] = res.Msg.GetKey()
	}
	_, err = a.ids.GetMe(ctx, as(keyCred(r.adminKeys["read"]), &identitypb.GetMeRequest{}))
	require.NoError(t, err, "the read key is used once (last_used_at)")

	// Gateway interfaces.
	epayCfg, err := structpb.NewStruct(map[string]any{"api_url": fake.URL() + "/", "pid": epay.DefaultPID, "key": epay.DefaultKey})
	require.NoError(t, err)
	r.epay = a.gatewayInterface(t, admin, "epay", "Alipay", epayCfg, true)
	bankCfg, err := structpb.NewStruct(map[string]any{"bank_name": "ICBC Shanghai", "account_name": "Example Hosting Ltd",
		"account_number": "6222 0000 1234 5678", "currencies": []any{"CNY"}})
	require.NoError(t, err)
	r.bank = a.gatewayInterface(t, admin, "bank_transfer", "Bank transfer", bankCfg, true)
	a.gatewayInterface(t, admin, "epay", "Alipay (spare)", epayCfg, false)
	_, err = a.gateways.DisablePlugin(ctx, as(admin, &gatewaypb.DisablePluginRequest{Name: "stripe"}))
	require.NoError(t, err)

	// Products.
	r.once = a.product(t, admin, &orderpb.CreateProductRequest{Name: "VPS 1个月", Description: "one month, paid once", Price: "12.30", Currency: "CNY"})
	monthly := a.product(t, admin, &orderpb.CreateProductRequest{Name: "VPS monthly", Price: "10.00", Currency: "CNY", BillingCycle: "monthly"})
	provider := "http_provider"
	boxCfg, err := structpb.NewStruct(map[string]any{"api_url": providerDown, "token": "provider-token-1", "plan": "box-1"})
	require.NoError(t, err)
	box := a.product(t, admin, &orderpb.CreateProductRequest{Name: "Box", Price: "5.00", Currency: "CNY", ProviderPlugin: &provider, ProviderConfig: boxCfg})
	retired := a.product(t, admin, &orderpb.CreateProductRequest{Name: "Retired plan", Price: "1.00", Currency: "CNY"})
	off := false
	_, err = a.orders.UpdateProduct(ctx, as(admin, &orderpb.UpdateProductRequest{Id: retired, Enabled: &off}))
	require.NoError(t, err)

	// Customers. (One after the other: the release checks one password at
	// a time on two CPUs, and refuses more than a few waiting.)
	for _, name := range []string{"alice", "bob", "carol", "dave"} {
		reg, err := a.ids.Register(ctx, connect.NewRequest(&identitypb.RegisterRequest{
			Email: name + "@example.com", Password: upgradeCustomerPassword, Name: strings.ToUpper(name[:1]) + name[1:]}))
		require.NoError(t, err)
		r.customers[name] = upgradeCustomer{id: reg.Msg.GetCustomer().GetId(), email: name + "@example.com", token: reg.Msg.GetAccessToken()}
	}
	alice, bob, carol := r.customers["alice"], r.customers["bob"], r.customers["carol"]
	for _, c := range []struct {
		who   upgradeCustomer
		limit string
	}{{bob, "50.00"}, {carol, "20.00"}} {
		_, err = a.customers.SetCreditLimit(ctx, as(admin, &identitypb.SetCreditLimitRequest{CustomerId: c.who.id, CreditLimit: c.limit}))
		require.NoError(t, err)
	}
	topUp := &identitypb.AdjustBalanceRequest{CustomerId: bob.id, Amount: "200.00", Note: "bank deposit 2024-0001"}
	keyed(t, r, "AdjustBalance", "upgrade-topup-bob", admin, topUp, a.customers.AdjustBalance)
	_, err = a.customers.SetCanCreateApiKeys(ctx, as(admin, &identitypb.SetCanCreateApiKeysRequest{CustomerId: carol.id, Allowed: true}))
	require.NoError(t, err)
	for _, name := range []string{"shop", "old"} {
		k, err := a.ids.CreateApiKey(ctx, as(bearerCred(carol.token), &identitypb.CreateApiKeyRequest{Name: name}))
		require.NoError(t, err)
		if name == "old" {
			_, err = a.ids.RevokeApiKey(ctx, as(bearerCred(carol.token), &identitypb.RevokeApiKeyRequest{Id: k.Msg.GetApiKey().GetId()}))
			require.NoError(t, err)
			r.oldKey = k.Msg.GetKey()
			continue
		}
		r.shopKey = k.Msg.GetKey()
	}
	_, err = a.ids.GetMe(ctx, as(keyCred(r.shopKey), &identitypb.GetMeRequest{}))
	require.NoError(t, err, "carol's key is used once (last_used_at)")
	_, err = a.customers.DisableCustomer(ctx, as(admin, &identitypb.DisableCustomerRequest{CustomerId: r.customers["dave"].id, Reason: "chargeback"}))
	require.NoError(t, err)

	// Alice pays through the gateways.
	ac := bearerCred(alice.token)
	pay := func(role, product string) {
		t.Helper()
		r.orders[role] = a.order(t, ac, product)
		r.payments[role] = a.payByEpay(t, fake, ac, r.orders[role], "", r.epay)
		a.waitOrder(t, admin, r.orders[role], "active")
	}
	for _, role := range []string{"active", "refunded", "part-refunded", "suspended-by-admin"} {
		pay(role, r.once)
	}
	for _, role := range []string{"terminated", "suspended", "overdue", "renewed-by-gateway", "monthly-refunded"} {
		pay(role, monthly)
	}
	for _, role := range []string{"refunded", "monthly-refunded"} {
		_, err = a.payments.RefundPayment(ctx, as(admin, &paymentpb.RefundPaymentRequest{PaymentId: r.payments[role], Reason: "customer asked"}))
		require.NoError(t, err)
		a.waitOrder(t, admin, r.orders[role], "refunded")
	}
	_, err = a.payments.RefundPayment(ctx, as(admin, &paymentpb.RefundPaymentRequest{PaymentId: r.payments["part-refunded"], Amount: "2.30", Reason: "late delivery"}))
	require.NoError(t, err)
	toBalance := "balance"
	credit := &paymentpb.RefundPaymentRequest{PaymentId: r.payments["part-refunded"], Amount: "1.00", Reason: "goodwill", Destination: &toBalance}
	keyed(t, r, "RefundPayment", "upgrade-goodwill-alice", admin, credit, a.payments.RefundPayment)
	_, err = a.orders.SuspendOrder(ctx, as(admin, &orderpb.SuspendOrderRequest{OrderId: r.orders["suspended-by-admin"], Reason: "abuse report"}))
	require.NoError(t, err)

	// A payment left pending, for the build under test to settle.
	r.orders["pending"] = a.order(t, ac, r.once)
	p, err := a.payments.CreatePayment(ctx, as(ac, &paymentpb.CreatePaymentRequest{
		OrderId: r.orders["pending"], GatewayInterfaceId: r.epay, ReturnUrl: "https://shop.example/done"}))
	require.NoError(t, err)
	r.payments["pending"] = p.Msg.GetPayment().GetId()

	// Cancelled with its payment failed; then the gateway takes the money
	// anyway: captured, partly returned.
	r.orders["cancelled"] = a.order(t, ac, r.once)
	p, err = a.payments.CreatePayment(ctx, as(ac, &paymentpb.CreatePaymentRequest{
		OrderId: r.orders["cancelled"], GatewayInterfaceId: r.epay, ReturnUrl: "https://shop.example/done"}))
	require.NoError(t, err)
	r.payments["captured"] = p.Msg.GetPayment().GetId()
	_, err = a.orders.CancelOrder(ctx, as(ac, &orderpb.CancelOrderRequest{OrderId: r.orders["cancelled"]}))
	require.NoError(t, err)
	require.NoError(t, fake.Pay(r.payments["captured"]))
	a.waitPayment(t, admin, r.payments["captured"], func(p *paymentpb.PaymentRecord) bool { return p.GetCapturedAmount() == "12.30" })
	_, err = a.payments.RefundPayment(ctx, as(admin, &paymentpb.RefundPaymentRequest{PaymentId: r.payments["captured"], Amount: "5.00", Reason: "return captured money"}))
	require.NoError(t, err)

	// Bank transfers: one confirmed and refunded in part (the refund waits
	// for an admin), one still to arrive.
	r.orders["by-bank"] = a.order(t, ac, r.once)
	r.payments["by-bank"] = a.payByBank(t, admin, ac, r.orders["by-bank"], "", r.bank, "STMT-0001")
	a.waitOrder(t, admin, r.orders["by-bank"], "active")
	rf, err := a.payments.RefundPayment(ctx, as(admin, &paymentpb.RefundPaymentRequest{PaymentId: r.payments["by-bank"], Amount: "4.00", Reason: "partial service"}))
	require.NoError(t, err)
	require.Equal(t, "pending", rf.Msg.GetRefund().GetStatus())
	r.pendingRefund = rf.Msg.GetRefund().GetId()
	r.orders["bank-pending"] = a.order(t, ac, r.once)
	_, err = a.payments.CreatePayment(ctx, as(ac, &paymentpb.CreatePaymentRequest{
		OrderId: r.orders["bank-pending"], GatewayInterfaceId: r.bank, ReturnUrl: "https://shop.example/done"}))
	require.NoError(t, err)

	// Bob pays from his balance.
	bc := bearerCred(bob.token)
	r.orders["balance"] = a.order(t, bc, r.once)
	payBob := &orderpb.PayWithBalanceRequest{OrderId: r.orders["balance"]}
	pb := keyed(t, r, "PayWithBalance", "upgrade-pay-bob-1", bc, payBob, a.orders.PayWithBalance)
	r.payments["balance"] = pb.GetPayment().GetId()
	for _, role := range []string{"balance-refunded", "renewed"} {
		product := r.once
		if role == "renewed" {
			product = monthly
		}
		r.orders[role] = a.order(t, bc, product)
		res, err := a.orders.PayWithBalance(ctx, as(bc, &orderpb.PayWithBalanceRequest{OrderId: r.orders[role]}))
		require.NoError(t, err)
		r.payments[role] = res.Msg.GetPayment().GetId()
	}
	r.orders["provisioning"] = a.order(t, bc, box)
	_, err = a.orders.PayWithBalance(ctx, as(bc, &orderpb.PayWithBalanceRequest{OrderId: r.orders["provisioning"]}))
	require.NoError(t, err)
	for _, role := range []string{"balance", "balance-refunded", "renewed"} {
		a.waitOrder(t, admin, r.orders[role], "active")
	}
	_, err = a.payments.RefundPayment(ctx, as(admin, &paymentpb.RefundPaymentRequest{PaymentId: r.payments["balance-refunded"], Reason: "duplicate order"}))
	require.NoError(t, err)
	a.waitOrder(t, admin, r.orders["balance-refunded"], "refunded")

	// Carol buys on credit and turns the renewal off.
	cc := bearerCred(carol.token)
	r.orders["completed"] = a.order(t, cc, monthly)
	_, err = a.orders.PayWithBalance(ctx, as(cc, &orderpb.PayWithBalanceRequest{OrderId: r.orders["completed"]}))
	require.NoError(t, err)
	a.waitOrder(t, admin, r.orders["completed"], "active")
	_, err = a.orders.SetOrderRenewal(ctx, as(cc, &orderpb.SetOrderRenewalRequest{OrderId: r.orders["completed"], Renews: false}))
	require.NoError(t, err)

	// Invoices of no order: one due in 10 days (overdue when the billing
	// clock has moved), one due in 100 (still issued), one cancelled, one
	// paid by bank transfer.
	due := time.Now().Add(10 * 24 * time.Hour).UTC().Format(time.RFC3339)
	_, err = a.orders.CreateInvoice(ctx, as(admin, &orderpb.CreateInvoiceRequest{Target: &orderpb.CreateInvoiceRequest_CustomerId{CustomerId: alice.id},
		Amount: "20.00", Description: "setup fee", DueAt: due}))
	require.NoError(t, err)
	_, err = a.orders.CreateInvoice(ctx, as(admin, &orderpb.CreateInvoiceRequest{Target: &orderpb.CreateInvoiceRequest_CustomerId{CustomerId: carol.id},
		Amount: "15.00", Description: "annual support", DueAt: time.Now().Add(100 * 24 * time.Hour).UTC().Format(time.RFC3339)}))
	require.NoError(t, err)
	inv, err := a.orders.CreateInvoice(ctx, as(admin, &orderpb.CreateInvoiceRequest{Target: &orderpb.CreateInvoiceRequest_CustomerId{CustomerId: bob.id},
		Amount: "5.00", Description: "issued by mistake", DueAt: due}))
	require.NoError(t, err)
	_, err = a.orders.CancelInvoice(ctx, as(admin, &orderpb.CancelInvoiceRequest{InvoiceId: inv.Msg.GetInvoice().GetId()}))
	require.NoError(t, err)
	inv, err = a.orders.CreateInvoice(ctx, as(admin, &orderpb.CreateInvoiceRequest{Target: &orderpb.CreateInvoiceRequest_CustomerId{CustomerId: bob.id},
		Amount: "8.00", Description: "extra IP address", DueAt: due}))
	require.NoError(t, err)
	a.payByBank(t, admin, bc, "", inv.Msg.GetInvoice().GetId(), r.bank, "STMT-0002")

	// A month and a half of billing. The first periods end together
	// (within the seconds the orders took); two are moved later by hand,
	// so that at the end one is overdue, one suspended, one terminated.
	first := a.periodEnd(t, admin, r.orders["terminated"], r.orders["renewed-by-gateway"], r.orders["renewed"], r.orders["completed"])
	for role, days := range map[string]int{"suspended": 10, "overdue": 14} {
		_, err := a.orders.ExtendServicePeriod(ctx, as(admin, &orderpb.ExtendServicePeriodRequest{OrderId: r.orders[role],
			EndsAt: first.Add(time.Duration(days) * 24 * time.Hour).UTC().Format(time.RFC3339), Reason: "outage credit"}))
		require.NoError(t, err)
	}
	day := 24 * time.Hour
	res := a.advanceTo(t, admin, &r.clock, first.Add(-7*day+time.Minute))
	require.EqualValues(t, 3, res.GetIssued(), "the renewal invoices of the orders that renew: %v", res)
	require.EqualValues(t, 1, res.GetAutoPaid(), "bob's, from his balance: %v", res)
	renewal := a.openRenewalInvoice(t, admin, r.orders["renewed-by-gateway"])
	r.payments["renewal-by-gateway"] = a.payByEpay(t, fake, ac, "", renewal, r.epay)
	a.advanceTo(t, admin, &r.clock, first.Add(time.Minute))
	a.advanceTo(t, admin, &r.clock, first.Add(3*day+time.Minute))
	a.advanceTo(t, admin, &r.clock, first.Add(8*day))
	a.advanceTo(t, admin, &r.clock, first.Add(10*day+time.Hour))
	a.advanceTo(t, admin, &r.clock, first.Add(15*day+time.Minute))
	for role, want := range map[string]string{"terminated": "terminated", "suspended": "suspended", "overdue": "active",
		"renewed-by-gateway": "active", "renewed": "active", "completed": "completed", "suspended-by-admin": "suspended"} {
		a.waitOrder(t, admin, r.orders[role], want)
	}
	overdue, err := a.orders.ListInvoices(ctx, as(admin, &orderpb.ListInvoicesRequest{Pagination: &paymentpb.PageRequest{},
		OrderId: proto.String(r.orders["overdue"]), Status: proto.String("overdue")}))
	require.NoError(t, err)
	require.Len(t, overdue.Msg.GetInvoices(), 1, "the extended order's renewal invoice is overdue")
	a.waitProvisioningRetry(t, admin, r.orders["provisioning"])
	return r
}

// adminLogin starts an admin session, with a TOTP or recovery code when
// given, and answers it as a credential.
func (a *upgradeAPI) adminLogin(t *testing.T, code string) cred {
	t.Helper()
	res, err := a.ids.AdminLogin(t.Context(), connect.NewRequest(&identitypb.AdminLoginRequest{
		Username: "admin", Password: upgradeAdminPassword, TotpCode: code}))
	require.NoError(t, err)
	return sessionCred(cookieOf(t, res.Header()))
}

func cookieOf(t *testing.T, h http.Header) string {
	t.Helper()
	c := h.Get("Set-Cookie")
	require.NotEmpty(t, c, "a session cookie")
	return strings.SplitN(c, ";", 2)[0]
}

// totpCode is what an authenticator app shows at at.
func totpCode(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	c, err := totp.GenerateCodeCustom(secret, at, totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	require.NoError(t, err)
	return c
}

func (a *upgradeAPI) gatewayInterface(t *testing.T, admin cred, plugin, name string, cfg *structpb.Struct, enable bool) string {
	t.Helper()
	gw, err := a.gateways.CreateGatewayInterface(t.Context(), as(admin, &gatewaypb.CreateGatewayInterfaceRequest{
		PluginName: plugin, DisplayName: name, Config: cfg}))
	require.NoError(t, err)
	id := gw.Msg.GetGatewayInterface().GetId()
	if enable {
		_, err = a.gateways.EnableGatewayInterface(t.Context(), as(admin, &gatewaypb.EnableGatewayInterfaceRequest{Id: id}))
		require.NoError(t, err)
	}
	return id
}

func (a *upgradeAPI) product(t *testing.T, admin cred, p *orderpb.CreateProductRequest) string {
	t.Helper()
	res, err := a.orders.CreateProduct(t.Context(), as(admin, p))
	require.NoError(t, err)
	return res.Msg.GetProduct().GetId()
}

func (a *upgradeAPI) order(t *testing.T, customer cred, product string) string {
	t.Helper()
	res, err := a.orders.CreateOrder(t.Context(), as(customer, &orderpb.CreateOrderRequest{ProductId: product}))
	require.NoError(t, err)
	return res.Msg.GetOrder().GetId()
}

// payByEpay pays an order or an invoice as its customer through the epay
// interface gw: the buyer pays at the fake gateway, whose signed notify
// settles the payment.
func (a *upgradeAPI) payByEpay(t *testing.T, fake *epay.Server, customer cred, orderID, invoiceID, gw string) string {
	t.Helper()
	p, err := a.payments.CreatePayment(t.Context(), as(customer, &paymentpb.CreatePaymentRequest{
		OrderId: orderID, InvoiceId: invoiceID, GatewayInterfaceId: gw, ReturnUrl: "https://shop.example/done"}))
	require.NoError(t, err)
	id := p.Msg.GetPayment().GetId()
	require.NoError(t, fake.Pay(id))
	a.waitPayment(t, customer, id, func(p *paymentpb.PaymentRecord) bool { return p.GetStatus() == "success" })
	return id
}

// payByBank pays an order or an invoice by bank transfer: the customer is
// told the reference, the admin confirms the money's arrival.
func (a *upgradeAPI) payByBank(t *testing.T, admin, customer cred, orderID, invoiceID, gw, statement string) string {
	t.Helper()
	p, err := a.payments.CreatePayment(t.Context(), as(customer, &paymentpb.CreatePaymentRequest{
		OrderId: orderID, InvoiceId: invoiceID, GatewayInterfaceId: gw, ReturnUrl: "https://shop.example/done"}))
	require.NoError(t, err)
	id := p.Msg.GetPayment().GetId()
	res, err := a.gateways.ConfirmBankTransfer(t.Context(), as(admin, &gatewaypb.ConfirmBankTransferRequest{PaymentId: id, Reference: statement}))
	require.NoError(t, err)
	require.Equal(t, "success", res.Msg.GetPayment().GetStatus())
	return id
}

func (a *upgradeAPI) waitPayment(t *testing.T, c cred, id string, done func(*paymentpb.PaymentRecord) bool) {
	t.Helper()
	var last *paymentpb.PaymentRecord
	require.Eventually(t, func() bool {
		res, err := a.payments.GetPayment(t.Context(), as(c, &paymentpb.GetPaymentRequest{Id: id}))
		if err != nil {
			return false
		}
		last = res.Msg.GetPayment()
		return done(last)
	}, 30*time.Second, 20*time.Millisecond, "payment %s: %v", id, func() any { return last })
}

func (a *upgradeAPI) waitOrder(t *testing.T, admin cred, id, status string) {
	t.Helper()
	var last string
	require.Eventually(t, func() bool {
		res, err := a.orders.GetOrder(t.Context(), as(admin, &orderpb.GetOrderRequest{Id: id}))
		if err != nil {
			return false
		}
		last = res.Msg.GetOrder().GetStatus()
		return last == status
	}, 30*time.Second, 20*time.Millisecond, "order %s: want %s", id, status)
}

// periodEnd is the latest end of the first periods of orders.
func (a *upgradeAPI) periodEnd(t *testing.T, admin cred, orders ...string) time.Time {
	t.Helper()
	var end time.Time
	for _, id := range orders {
		res, err := a.orders.GetOrder(t.Context(), as(admin, &orderpb.GetOrderRequest{Id: id}))
		require.NoError(t, err)
		at, err := time.Parse(time.RFC3339, res.Msg.GetOrder().GetPaidUntil())
		require.NoError(t, err, "order %s has a paid period", id)
		if at.After(end) {
			end = at
		}
	}
	return end
}

// advanceTo moves the build's billing clock to at; the build runs a
// billing pass as of then.
func (a *upgradeAPI) advanceTo(t *testing.T, admin cred, c *billingClock, at time.Time) *orderpb.AdvanceBillingClockResponse {
	t.Helper()
	return a.advanceBy(t, admin, c, max(at.Sub(c.now()).Truncate(time.Second), time.Second))
}

// advanceBy moves the build's billing clock forward by d (whole seconds);
// the build runs a billing pass as of then.
func (a *upgradeAPI) advanceBy(t *testing.T, admin cred, c *billingClock, d time.Duration) *orderpb.AdvanceBillingClockResponse {
	t.Helper()
	res, err := a.orders.AdvanceBillingClock(t.Context(), as(admin, &orderpb.AdvanceBillingClockRequest{Seconds: int64(d / time.Second)}))
	require.NoError(t, err)
	c.ahead += d
	return res.Msg
}

// openRenewalInvoice is the unpaid renewal invoice of a recurring order.
func (a *upgradeAPI) openRenewalInvoice(t *testing.T, admin cred, orderID string) string {
	t.Helper()
	res, err := a.orders.GetOrder(t.Context(), as(admin, &orderpb.GetOrderRequest{Id: orderID}))
	require.NoError(t, err)
	for _, p := range res.Msg.GetPeriods() {
		if p.GetStatus() == "unpaid" {
			return p.GetInvoiceId()
		}
	}
	require.FailNow(t, "no unpaid period", "order %s: %v", orderID, res.Msg.GetPeriods())
	return ""
}

// waitProvisioningRetry waits until the order's order_paid event failed
// at the provider once and waits for its retry.
func (a *upgradeAPI) waitProvisioningRetry(t *testing.T, admin cred, orderID string) {
	t.Helper()
	a.waitOrder(t, admin, orderID, "provisioning")
	require.Eventually(t, func() bool {
		res, err := a.events.ListEvents(t.Context(), as(admin, &eventpb.ListEventsRequest{Pagination: &paymentpb.PageRequest{},
			OrderId: proto.String(orderID), EventType: proto.String("order_paid")}))
		if err != nil || len(res.Msg.GetEvents()) != 1 {
			return false
		}
		e := res.Msg.GetEvents()[0]
		return e.GetStatus() == "pending" && e.GetAttempts() == 1 && e.GetLastError() != ""
	}, 30*time.Second, 20*time.Millisecond, "the provisioning of order %s failed once and waits", orderID)
}
