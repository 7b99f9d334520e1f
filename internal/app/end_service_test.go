package app_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/provider"
	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/notify/notifytest"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// Ending a service now (issue 38, §3), by the customer with a balance
// credit, on the test clock: the clock moves to the day the renewal
// invoice is issued (the balance is spent, so it stays open); the customer
// ends the service. The balance rises by exactly the unused share of the
// paid period (counted to the billing clock's now, which is the order's
// paid end afterwards), in one ledger row naming the order; the order is
// terminated, its open renewal invoice cancelled, the instance ended at
// the provider, and nothing is billed later. Bad requests change nothing.
func TestACustomerEndsTheirServiceNowWithABalanceCredit(t *testing.T) {
	t.Parallel()
	prov := provider.New(provider.Options{})
	require.NoError(t, prov.Start())
	t.Cleanup(prov.Close)
	smtp := notifytest.StartSMTP(t, "mailer", "mail-password")
	e := startPaymentsWith(t, []app.Option{app.WithSMTPTLSConfig(smtp.ClientTLS)}, func(c *config.Config) {
		addProviderPlugin(t, c.Plugins.Dir)
		c.Notify.SMTP = config.NotifySMTP{
			Host: smtp.Host, Port: smtp.Port, From: "Billing <billing@example.com>",
			TLSPolicy: "mandatory", Auth: "plain", Username: smtp.Username, Password: smtp.Password, Timeout: 5 * time.Second,
		}
		c.Notify.CustomerEmail = true
		c.Notify.PollInterval = 100 * time.Millisecond
		c.Billing.TestClock = true
		c.Events.PollInterval = 100 * time.Millisecond
		c.Events.RetryBase = 20 * time.Millisecond
		c.Events.RetryMax = 50 * time.Millisecond
	})
	ctx := context.Background()
	customers := identitypbconnect.NewCustomerAdminServiceClient(http.DefaultClient, e.r.baseURL)
	_, err := customers.AdjustBalance(ctx, with(&identitypb.AdjustBalanceRequest{CustomerId: e.c.customerID.String(), Amount: "30.00", Note: "top-up"}, e.c.admin))
	require.NoError(t, err)
	plugin := "http_provider"
	prod, err := e.orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{
		Name: "VPS monthly", Price: "30.00", Currency: "CNY", BillingCycle: "monthly", ProviderPlugin: &plugin,
		ProviderConfig: mustStruct(t, map[string]any{"api_url": prov.URL(), "token": prov.Token(), "plan": "vps-1"}),
	}, e.c.admin))
	require.NoError(t, err)
	placed, err := e.orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: prod.Msg.GetProduct().GetId()}, e.c.customer))
	require.NoError(t, err)
	id := placed.Msg.GetOrder().GetId()
	_, err = e.orders.PayWithBalance(ctx, with(&orderpb.PayWithBalanceRequest{OrderId: id}, e.c.customer))
	require.NoError(t, err)
	e.waitOrderStatus(t, id, "active")
	instance := func() string {
		for _, in := range prov.Instances() {
			if in.OrderID == id {
				return in.Status
			}
		}
		return ""
	}
	require.Eventually(t, func() bool { return instance() == "running" }, 15*time.Second, 20*time.Millisecond)
	get := func() *orderpb.GetOrderResponse {
		t.Helper()
		res, err := e.orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: id}, e.c.customer))
		require.NoError(t, err)
		return res.Msg
	}
	parse := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return v
	}
	balance := func() money.Amount {
		t.Helper()
		var b money.Amount
		require.NoError(t, e.r.app.Pool().QueryRow(ctx, `SELECT balance FROM customers WHERE id = $1`, e.c.customerID).Scan(&b))
		return b
	}
	p1 := get().GetPeriods()[0]
	start, end := parse(p1.GetStartsAt()), parse(p1.GetEndsAt())

	// The clock moves to a minute after the renewal invoice's day: it is
	// issued, and stays open (the balance is spent).
	clock := time.Now()
	r, err := e.orders.AdvanceBillingClock(ctx, with(&orderpb.AdvanceBillingClockRequest{Seconds: int64(end.Add(-7*24*time.Hour+time.Minute).Sub(clock) / time.Second)}, e.c.admin))
	require.NoError(t, err)
	require.EqualValues(t, 1, r.Msg.GetIssued())
	periods := get().GetPeriods()
	require.Len(t, periods, 2)
	invoiceID := periods[1].GetInvoiceId()

	// Bad requests change nothing: an unknown mode, another customer's
	// order, a customer's gateway refund.
	_, err = e.orders.EndService(ctx, with(&orderpb.EndServiceRequest{OrderId: id, Credit: "cash"}, e.c.customer))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	_, err = e.orders.EndService(ctx, with(&orderpb.EndServiceRequest{OrderId: id, Credit: "balance"}, e.c.other))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err), "%v", err)
	_, err = e.orders.EndService(ctx, with(&orderpb.EndServiceRequest{OrderId: id, Credit: "gateway"}, e.c.customer))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%v", err)
	require.Equal(t, "active", get().GetOrder().GetStatus())
	require.True(t, balance().IsZero())

	// The customer ends it.
	ended, err := e.orders.EndService(ctx, with(&orderpb.EndServiceRequest{OrderId: id, Credit: "balance"}, e.c.customer))
	require.NoError(t, err)
	got := get()
	require.Equal(t, "terminated", got.GetOrder().GetStatus())
	endedAt := parse(got.GetOrder().GetPaidUntil())
	require.True(t, endedAt.After(end.Add(-7*24*time.Hour)) && endedAt.Before(end.Add(-7*24*time.Hour+2*time.Minute)),
		"the paid end is the billing clock's now: %s", endedAt)
	want, err := order.UnusedShare(money.MustParse("30.00"), start, end, endedAt)
	require.NoError(t, err)
	require.Equal(t, want.String(), ended.Msg.GetUnused())
	require.Equal(t, want.String(), ended.Msg.GetCredited())
	require.Equal(t, want, balance(), "the balance rose by exactly the unused share")
	// About 7 days of the period's: more than 5.00, less than 30.00.
	require.True(t, want.Cmp(money.MustParse("5.00")) > 0 && want.Cmp(money.MustParse("8.00")) < 0, "share %s", want)
	var rows int
	var desc string
	require.NoError(t, e.r.app.Pool().QueryRow(ctx, `SELECT count(*), max(description) FROM balance_transactions
		WHERE customer_id = $1 AND amount > 0 AND description LIKE '%' || $2 || '%'`, e.c.customerID, id).Scan(&rows, &desc))
	require.Equal(t, 1, rows, "one ledger row naming the order: %q", desc)
	var credited string
	require.NoError(t, e.r.app.Pool().QueryRow(ctx, `SELECT after->'end_credit'->>'credited' FROM audit_log
		WHERE entity_type = 'order' AND entity_id = $1 AND action = 'order.terminate'`, id).Scan(&credited))
	require.Equal(t, want.String(), credited, "the audit row carries the credit")

	inv, err := e.orders.GetInvoice(ctx, with(&orderpb.GetInvoiceRequest{Id: invoiceID}, e.c.customer))
	require.NoError(t, err)
	require.Equal(t, "cancelled", inv.Msg.GetInvoice().GetStatus())
	require.Eventually(t, func() bool { return instance() == "terminated" }, 15*time.Second, 20*time.Millisecond, "ended at the provider")
	// The customer's notice says what was credited.
	require.Eventually(t, func() bool {
		for _, m := range smtp.Mails() {
			if strings.Contains(m.Body, "has ended") && strings.Contains(m.Body, want.String()+" CNY") && strings.Contains(m.Body, "credited to your balance") {
				return true
			}
		}
		return false
	}, 15*time.Second, 20*time.Millisecond, "the customer's notice of the end, with the credit: %v", mailBodies(smtp))

	// Ending it again is refused, and credits nothing more.
	_, err = e.orders.EndService(ctx, with(&orderpb.EndServiceRequest{OrderId: id, Credit: "balance"}, e.c.customer))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
	require.Equal(t, want, balance())

	// Nothing is billed later.
	r, err = e.orders.AdvanceBillingClock(ctx, with(&orderpb.AdvanceBillingClockRequest{Seconds: 40 * 24 * 3600}, e.c.admin))
	require.NoError(t, err)
	require.Zero(t, r.Msg.GetIssued())
	require.Len(t, get().GetPeriods(), 2)
	require.Equal(t, want, balance())
	endLedgerClean(t, e.r.app.Pool())
}

// An admin ends a gateway-paid service with a gateway credit: the unused
// share is refunded to the period's payment at the gateway. A customer
// asking for more than [billing].end_now_credit ("none") is refused.
func TestAnAdminEndsAServiceNowWithAGatewayRefund(t *testing.T) {
	t.Parallel()
	e := startPayments(t, func(c *config.Config) {
		c.Billing.EndNowCredit = "none"
	})
	ctx := context.Background()
	prod, err := e.orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{Name: "VPS monthly", Price: "10.00", Currency: "CNY", BillingCycle: "monthly"}, e.c.admin))
	require.NoError(t, err)
	placed, err := e.orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: prod.Msg.GetProduct().GetId()}, e.c.customer))
	require.NoError(t, err)
	id := placed.Msg.GetOrder().GetId()
	// Still pending: nothing to end.
	_, err = e.orders.EndService(ctx, with(&orderpb.EndServiceRequest{OrderId: id, Credit: "none"}, e.c.admin))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "a pending order: %v", err)
	pay := e.createPaymentVia(t, id, e.epayGW).GetPayment()
	require.NoError(t, e.fake.Pay(pay.GetId()))
	e.waitSettled(t, pay.GetId())
	e.waitOrderStatus(t, id, "active")

	_, err = e.orders.EndService(ctx, with(&orderpb.EndServiceRequest{OrderId: id, Credit: "balance"}, e.c.customer))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "more than end_now_credit: %v", err)
	_, err = e.orders.EndService(ctx, with(&orderpb.EndServiceRequest{OrderId: id, Credit: "gateway"}, e.c.customer))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%v", err)
	require.Empty(t, e.fake.Refunds())

	ended, err := e.orders.EndService(ctx, with(&orderpb.EndServiceRequest{OrderId: id, Credit: "gateway"}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "terminated", ended.Msg.GetOrder().GetStatus())
	require.Len(t, ended.Msg.GetRefundIds(), 1)
	credited := money.MustParse(ended.Msg.GetCredited())
	// Ended seconds after it started: all but a few seconds' worth.
	require.True(t, credited.Cmp(money.MustParse("9.99")) >= 0 && credited.Cmp(money.MustParse("10.00")) <= 0, "credited %s", credited)
	require.Equal(t, ended.Msg.GetUnused(), ended.Msg.GetCredited())
	after, err := e.payments.GetPayment(ctx, with(&paymentpb.GetPaymentRequest{Id: pay.GetId()}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, credited.String(), after.Msg.GetPayment().GetRefundedAmount(), "the refund is on the period's payment")
	refunds := e.fake.Refunds()
	require.Len(t, refunds, 1)
	require.True(t, strings.HasPrefix(refunds[0].Money, credited.String()), "the gateway refunded %s", refunds[0].Money)
	endLedgerClean(t, e.r.app.Pool())
}

// The credit never exceeds what the period's payments still hold: an admin
// refunded 9.00 of the 10.00 paid for the period, so ending it the next
// second credits 1.00 to the balance, not the ~10.00 share.
func TestEndingNowNeverCreditsMoreThanThePeriodsPaymentsHold(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	prod, err := e.orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{Name: "VPS monthly", Price: "10.00", Currency: "CNY", BillingCycle: "monthly"}, e.c.admin))
	require.NoError(t, err)
	placed, err := e.orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: prod.Msg.GetProduct().GetId()}, e.c.customer))
	require.NoError(t, err)
	id := placed.Msg.GetOrder().GetId()
	pay := e.createPaymentVia(t, id, e.epayGW).GetPayment()
	require.NoError(t, e.fake.Pay(pay.GetId()))
	e.waitSettled(t, pay.GetId())
	e.waitOrderStatus(t, id, "active")
	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: pay.GetId(), Amount: "9.00", Reason: "goodwill"}, e.c.admin))
	require.NoError(t, err)

	ended, err := e.orders.EndService(ctx, with(&orderpb.EndServiceRequest{OrderId: id, Credit: "balance"}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "1.00", ended.Msg.GetUnused())
	require.Equal(t, "1.00", ended.Msg.GetCredited())
	var b money.Amount
	require.NoError(t, e.r.app.Pool().QueryRow(ctx, `SELECT balance FROM customers WHERE id = $1`, e.c.customerID).Scan(&b))
	require.Equal(t, "1.00", b.String())
	// The credit is a refund of the payment to the balance: the payment is
	// refunded in full now, but the order stays terminated by the end
	// (no order_refunded, no refunded status).
	after, err := e.payments.GetPayment(ctx, with(&paymentpb.GetPaymentRequest{Id: pay.GetId()}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "10.00", after.Msg.GetPayment().GetRefundedAmount())
	require.Equal(t, "refunded", after.Msg.GetPayment().GetStatus())
	require.Equal(t, "terminated", ended.Msg.GetOrder().GetStatus())
	require.Equal(t, 0, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_refunded'`, id))
	endLedgerClean(t, e.r.app.Pool())
}

// A balance credit is recorded against the period's payment, as a refund
// of it to the balance: ended with a 7.00 credit of a 30.00 payment, the
// payment shows 7.00 refunded and only 23.00 is left for an admin's
// RefundPayment. Asking for more is refused and changes nothing; the rest
// refunds the payment in full without a second end of the order (it stays
// terminated, no order_refunded). The money went out exactly once:
// 7.00 on the balance, 23.00 at the gateway.
func TestAnEndingNowBalanceCreditIsARefundOfThePeriodsPayment(t *testing.T) {
	t.Parallel()
	e := startPayments(t, func(c *config.Config) {
		c.Billing.TestClock = true
	})
	ctx := context.Background()
	prod, err := e.orders.CreateProduct(ctx, with(&orderpb.CreateProductRequest{Name: "VPS monthly", Price: "30.00", Currency: "CNY", BillingCycle: "monthly"}, e.c.admin))
	require.NoError(t, err)
	placed, err := e.orders.CreateOrder(ctx, with(&orderpb.CreateOrderRequest{ProductId: prod.Msg.GetProduct().GetId()}, e.c.customer))
	require.NoError(t, err)
	id := placed.Msg.GetOrder().GetId()
	pay := e.createPaymentVia(t, id, e.epayGW).GetPayment()
	require.NoError(t, e.fake.Pay(pay.GetId()))
	e.waitSettled(t, pay.GetId())
	e.waitOrderStatus(t, id, "active")
	got, err := e.orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: id}, e.c.admin))
	require.NoError(t, err)
	p1 := got.Msg.GetPeriods()[0]
	start, err := time.Parse(time.RFC3339Nano, p1.GetStartsAt())
	require.NoError(t, err)
	end, err := time.Parse(time.RFC3339Nano, p1.GetEndsAt())
	require.NoError(t, err)
	// The billing clock moves to a second past the point where 7/30 of the
	// period is left: the share is 7.00 less a few seconds' worth, 7.00 to
	// the cent.
	left := end.Sub(start) * 7 / 30
	_, err = e.orders.AdvanceBillingClock(ctx, with(&orderpb.AdvanceBillingClockRequest{Seconds: int64(end.Add(-left).Sub(time.Now())/time.Second) + 1}, e.c.admin))
	require.NoError(t, err)

	// A quote first (dry_run, what the console shows before confirming):
	// the same answer, with the same refusals, and nothing changes.
	quote, err := e.orders.EndService(ctx, with(&orderpb.EndServiceRequest{OrderId: id, Credit: "balance", DryRun: true}, e.c.customer))
	require.NoError(t, err)
	require.True(t, quote.Msg.GetDryRun())
	require.Equal(t, "7.00", quote.Msg.GetUnused())
	require.Equal(t, "7.00", quote.Msg.GetCredited())
	require.Equal(t, "active", quote.Msg.GetOrder().GetStatus())
	_, err = e.orders.EndService(ctx, with(&orderpb.EndServiceRequest{OrderId: id, Credit: "gateway", DryRun: true}, e.c.customer))
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "a customer's gateway quote: %v", err)
	gw, err := e.orders.EndService(ctx, with(&orderpb.EndServiceRequest{OrderId: id, Credit: "gateway", DryRun: true}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "7.00", gw.Msg.GetCredited())
	require.Empty(t, gw.Msg.GetRefundIds(), "a quote refunds nothing")
	require.Empty(t, e.fake.Refunds())
	require.Equal(t, "active", e.orderStatus(t, id))
	require.Equal(t, 0, e.count(t, `SELECT count(*) FROM refunds WHERE payment_id = $1`, pay.GetId()))
	require.Equal(t, 0, e.count(t, `SELECT count(*) FROM audit_log WHERE entity_type = 'order' AND entity_id = $1 AND action = 'order.terminate'`, id))

	ended, err := e.orders.EndService(ctx, with(&orderpb.EndServiceRequest{OrderId: id, Credit: "balance"}, e.c.customer))
	require.NoError(t, err)
	require.Equal(t, "7.00", ended.Msg.GetCredited())
	payment := func() *paymentpb.PaymentRecord {
		t.Helper()
		res, err := e.payments.GetPayment(ctx, with(&paymentpb.GetPaymentRequest{Id: pay.GetId()}, e.c.admin))
		require.NoError(t, err)
		return res.Msg.GetPayment()
	}
	require.Equal(t, "7.00", payment().GetRefundedAmount(), "the credit is on the period's payment")
	require.Equal(t, "success", payment().GetStatus())
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM refunds WHERE payment_id = $1 AND destination = 'balance' AND status = 'succeeded' AND amount = 7.00`, pay.GetId()))
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM balance_transactions WHERE customer_id = $1 AND type = 'refund' AND payment_id = $2 AND amount = 7.00`,
		e.c.customerID, pay.GetId()))
	endLedgerClean(t, e.r.app.Pool())

	// More than the 23.00 left is refused, and nothing changes.
	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: pay.GetId(), Amount: "23.01", Reason: "changed mind"}, e.c.admin))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	require.Equal(t, "7.00", payment().GetRefundedAmount())
	require.Empty(t, e.fake.Refunds())

	// The rest, in full: 23.00 at the gateway, the payment refunded.
	res, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: pay.GetId(), Reason: "the rest"}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "23.00", res.Msg.GetRefund().GetAmount())
	require.Equal(t, "30.00", payment().GetRefundedAmount())
	require.Equal(t, "refunded", payment().GetStatus())
	refunds := e.fake.Refunds()
	require.Len(t, refunds, 1)
	require.True(t, strings.HasPrefix(refunds[0].Money, "23.00"), "the gateway refunded %s", refunds[0].Money)
	o, err := e.orders.GetOrder(ctx, with(&orderpb.GetOrderRequest{Id: id}, e.c.admin))
	require.NoError(t, err)
	require.Equal(t, "terminated", o.Msg.GetOrder().GetStatus(), "the end stands: the full refund does not end the order again")
	require.Equal(t, 0, e.count(t, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_refunded'`, id))
	_, err = e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: pay.GetId(), Amount: "0.01", Reason: "again"}, e.c.admin))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	var b money.Amount
	require.NoError(t, e.r.app.Pool().QueryRow(ctx, `SELECT balance FROM customers WHERE id = $1`, e.c.customerID).Scan(&b))
	require.Equal(t, "7.00", b.String())
	endLedgerClean(t, e.r.app.Pool())
}

// endLedgerClean: ledger.Verify finds nothing broken and the money
// invariants hold.
func endLedgerClean(t *testing.T, db store.DB) {
	t.Helper()
	rep, err := ledger.Verify(context.Background(), db)
	require.NoError(t, err)
	require.True(t, rep.OK(), "%s", rep)
	testfixture.CheckMoneyInvariants(t, db)
}

func mailBodies(s *notifytest.SMTPServer) []string {
	var out []string
	for _, m := range s.Mails() {
		out = append(out, m.Body)
	}
	return out
}
