package app_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	orderpb "github.com/rustbill/paymentd/gen/billing/order"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/app"
	"github.com/rustbill/paymentd/internal/config"
	"github.com/rustbill/paymentd/internal/fakes/provider"
	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/testkit"
	"github.com/rustbill/paymentd/internal/testsignal"
)

// The money lifecycle as a state machine, tried with random sequences of
// what customers, admins, gateways, providers and time do, against one live
// service, a real PostgreSQL, the fake epay, the bank-transfer plugin and
// the fake provider. After every step the event queue is let drain and the
// invariants are checked; a failing sequence shrinks to a minimal
// reproduction (rapid prints it).
//
// How a payment fails here: the shipped gateways never fail a payment by a
// notification. The fake epay notifies only a paid order (TRADE_SUCCESS),
// epay.lua reads any other trade_status as pending, bank_transfer.lua has
// no notifications, and the service fails a payment only on a gateway's
// answer to a status query, never on a notification (HandleCallback). So
// "failed callback" sends a signed notification of another trade_status
// for a payment not paid at the gateway and checks it changes nothing,
// and a pending payment fails the ways it can: its order is cancelled (by
// the customer, an admin or the 24 h timeout) or paid otherwise (another
// payment, the balance).
//
// The number of sequences is rapid's -rapid.checks (RAPID_CHECKS), kept
// small in the test command; `task model -- --runs N` runs more.
func TestMoneyLifecycleModel(t *testing.T) {
	t.Parallel()
	// rapid's default of 100 sequences takes minutes against a live
	// service; the test command runs modelChecks unless told otherwise.
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == "100" && os.Getenv("RAPID_CHECKS") == "" {
		require.NoError(t, flag.Set("rapid.checks", strconv.Itoa(modelChecks)))
	}
	prov := provider.New(provider.Options{})
	require.NoError(t, prov.Start())
	t.Cleanup(prov.Close)
	clock := testkit.NewClockAt(time.Now().UTC())
	signals := app.Signals{Events: testsignal.New(), TimeoutScans: testsignal.New()}
	e := startPaymentsWith(t, []app.Option{app.WithClock(clock.Now), app.WithSignals(signals)}, func(c *config.Config) {
		addProviderPlugin(t, c.Plugins.Dir)
		// The model waits for the worker's rounds (settle) and the timeout
		// scans (the 24 h step): a retried event is due 10 to 20 ms after
		// its failure and claimed at the next poll, and a scan runs every
		// 10 ms, so that those waits are the handlers' work rather than
		// the intervals' (with 50 ms for both they took 4.5 s of a run of
		// 1,092 steps, with these 2.0 s).
		c.Events.PollInterval = 20 * time.Millisecond
		c.Events.MaxAttempts = 2
		c.Events.RetryBase = 10 * time.Millisecond
		c.Events.RetryMax = 20 * time.Millisecond
		c.Events.TimeoutScanInterval = 10 * time.Millisecond
	})
	plain := e.product
	provisioned := e.provisionWith(t, prov, "vps-1")
	e.product = plain
	bankGW := e.addGateway(t, "bank_transfer", "Bank transfer", map[string]any{
		"bank_name": "Bank", "account_name": "Hosting Ltd", "account_number": "1234", "currencies": []any{"CNY"},
	})

	finals := map[string]string{} // order id → the final status it reached
	customers := identitypbconnect.NewCustomerAdminServiceClient(http.DefaultClient, e.r.baseURL)
	// toppedUp is what the customer's balance held at the start plus what
	// the admin credited to it since, over every sequence.
	var start string
	require.NoError(t, e.r.app.Pool().QueryRow(context.Background(), `SELECT balance::text FROM customers WHERE id = $1`, e.c.customerID).Scan(&start))
	toppedUp := money.MustParse(start)
	var sequences, steps, failedNotices atomic.Int64
	began := time.Now()
	rapid.Check(t, func(rt *rapid.T) {
		sequences.Add(1)
		m := &lifecycleModel{e: e, prov: prov, clock: clock, signals: signals, plain: plain, provisioned: provisioned, bankGW: bankGW, finals: finals,
			customers: customers, toppedUp: &toppedUp, failedNotices: &failedNotices}
		rt.Repeat(map[string]func(*rapid.T){
			"order":              m.order,
			"pay":                m.pay,
			"pay with balance":   m.payWithBalance,
			"failed callback":    m.failedCallback,
			"bank transfer":      m.bankTransfer,
			"money arrives late": m.lateMoney,
			"duplicate callback": m.duplicate,
			"tampered callback":  m.tampered,
			"refund":             m.refund,
			"concurrent refunds": m.concurrentRefunds,
			"cancel":             m.cancel,
			"query":              m.query,
			"24 h pass":          m.timeout,
			"": func(rt *rapid.T) {
				steps.Add(1)
				m.settle(rt)
				m.check(rt)
			},
		})
	})
	var orders, paid, byBalance, captured, refunds, toBalance int
	require.NoError(t, e.r.app.Pool().QueryRow(context.Background(), `SELECT (SELECT count(*) FROM orders),
		(SELECT count(*) FROM payments WHERE status IN ('success', 'refunded')), (SELECT count(*) FROM payments WHERE method = 'balance'),
		(SELECT count(*) FROM payments WHERE captured_amount > 0),
		(SELECT count(*) FROM refunds), (SELECT count(*) FROM refunds WHERE destination = 'balance')`).Scan(&orders, &paid, &byBalance, &captured, &refunds, &toBalance))
	t.Logf("model: %d sequences, %d steps, %s: %d orders, %d payments settled (%d from the balance), %d captured after they could no longer apply, %d refunds (%d to the balance), %d failed callbacks",
		sequences.Load(), steps.Load(), time.Since(began).Round(time.Millisecond), orders, paid, byBalance, captured, refunds, toBalance, failedNotices.Load())
}

// modelChecks is how many sequences the test command tries: on the shared
// 2-CPU machine under a load of 11 to 13, 25 took 17.3 s (679 steps) and 30
// took 12.7 to 17.2 s (about 1,000 steps); 50 took 19.7 s less loaded and
// 60 s loaded. 40 runs about as many steps as the 50 sequences of the
// model before its balance and failed-notice steps (1,458), so the test
// command checks no less than it did. `task model -- --runs N` tries more.
const modelChecks = 40

type modelOrder struct {
	id       string
	product  string
	payments []string // payments made for it: gateway, bank transfer, balance
	balance  string   // its balance payment, when it was paid from the balance
	notice   string   // the last signed notification of a paid payment
}

type lifecycleModel struct {
	e                  *payBundle
	prov               *provider.Server
	clock              *testkit.Clock
	signals            app.Signals // the event worker's rounds, the timeout scans
	plain, provisioned string
	bankGW             string
	orders             []*modelOrder
	finals             map[string]string
	customers          identitypbconnect.CustomerAdminServiceClient
	toppedUp           *money.Amount
	failedNotices      *atomic.Int64 // failed callbacks sent, for the figures
}

func (m *lifecycleModel) ctx() context.Context { return context.Background() }

// pick draws one of the sequence's orders, placing the first one when
// there is none yet.
func (m *lifecycleModel) pick(rt *rapid.T) *modelOrder {
	if len(m.orders) == 0 {
		m.order(rt)
	}
	return rapid.SampledFrom(m.orders).Draw(rt, "order")
}

func (m *lifecycleModel) status(rt *rapid.T, id string) string {
	o, err := m.e.orders.GetOrder(m.ctx(), with(&orderpb.GetOrderRequest{Id: id}, m.e.c.admin))
	if err != nil {
		rt.Fatalf("GetOrder %s: %v", id, err)
	}
	return o.Msg.GetOrder().GetStatus()
}

func (m *lifecycleModel) order(rt *rapid.T) {
	product := m.plain
	if rapid.Bool().Draw(rt, "provisioned") {
		product = m.provisioned
	}
	o, err := m.e.orders.CreateOrder(m.ctx(), with(&orderpb.CreateOrderRequest{ProductId: product}, m.e.c.customer))
	if err != nil {
		rt.Fatalf("CreateOrder: %v", err)
	}
	mo := &modelOrder{id: o.Msg.GetOrder().GetId(), product: product}
	if product == m.provisioned && rapid.Bool().Draw(rt, "provider refuses") {
		m.prov.FailProvision(mo.id, 0, "no capacity")
	}
	m.orders = append(m.orders, mo)
}

// createPayment creates an epay payment for o as its customer; false when
// the order takes none (InvalidArgument, as it should), and any other
// refusal fails the sequence.
func (m *lifecycleModel) createPayment(rt *rapid.T, o *modelOrder) (*connect.Response[paymentpb.CreatePaymentResponse], bool) {
	res, err := m.e.payments.CreatePayment(m.ctx(), with(&paymentpb.CreatePaymentRequest{
		OrderId: o.id, GatewayInterfaceId: m.e.epayGW, ReturnUrl: "https://shop.example/done",
	}, m.e.c.customer))
	if err != nil {
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			rt.Fatalf("CreatePayment for order %s (%s): %v", o.id, m.status(rt, o.id), err)
		}
		return nil, false
	}
	return res, true
}

// pay creates a gateway payment for the order and, most of the time, pays
// it at the fake epay at once, whose notification reaches /callbacks (else
// the customer pays later: lateMoney). An order that can no longer be paid
// answers CreatePayment with InvalidArgument, as it should.
func (m *lifecycleModel) pay(rt *rapid.T) {
	o := m.pick(rt)
	res, ok := m.createPayment(rt, o)
	if !ok {
		return
	}
	id := res.Msg.GetPayment().GetId()
	o.payments = append(o.payments, id)
	if rapid.Bool().Draw(rt, "paid later") {
		return
	}
	m.payAtGateway(rt, o, id)
}

// payAtGateway pays an epay payment at the fake epay and waits until its
// notification was taken: settled, or captured when the order could no
// longer take it.
func (m *lifecycleModel) payAtGateway(rt *rapid.T, o *modelOrder, id string) {
	if err := m.e.fake.Pay(id); err != nil {
		rt.Fatalf("pay %s at the fake epay: %v", id, err)
	}
	fo, ok := m.e.fake.Order(id)
	if !ok {
		rt.Fatalf("the fake epay lost payment %s", id)
	}
	o.notice = signedNotify(id, fo.TradeNo, fo.Money)
	m.waitMoneyLanded(rt, id)
}

// waitMoneyLanded waits until a payment the gateway took is settled or
// its money captured.
func (m *lifecycleModel) waitMoneyLanded(rt *rapid.T, id string) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var landed bool
		if err := m.e.r.app.Pool().QueryRow(m.ctx(), `SELECT status IN ('success', 'refunded') OR captured_amount > 0 FROM payments WHERE id = $1`, id).Scan(&landed); err != nil {
			rt.Fatalf("read payment %s: %v", id, err)
		}
		if landed {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	rt.Fatalf("payment %s has neither settled nor captured its money 10 s after the gateway was paid", id)
}

// lateMoney has the money of an earlier payment arrive now, whatever its
// order became meanwhile: the customer pays an epay payment at the gateway,
// or an admin confirms a bank transfer. A payment that can no longer apply
// keeps its money as captured, to return.
func (m *lifecycleModel) lateMoney(rt *rapid.T) {
	o := m.pick(rt)
	if len(o.payments) == 0 {
		return // no payment yet
	}
	id := rapid.SampledFrom(o.payments).Draw(rt, "payment")
	var gw, status string
	var captured bool
	if err := m.e.r.app.Pool().QueryRow(m.ctx(), `SELECT coalesce(gateway_interface_id::text, ''), status, captured_amount > 0 FROM payments WHERE id = $1`,
		id).Scan(&gw, &status, &captured); err != nil {
		rt.Fatalf("read payment %s: %v", id, err)
	}
	if gw == "" {
		return // a balance payment: its money never arrives from outside
	}
	if gw == m.e.epayGW {
		if fo, ok := m.e.fake.Order(id); ok && !fo.Paid {
			m.payAtGateway(rt, o, id)
		}
		return
	}
	if status == "success" || status == "refunded" || captured {
		return // the transfer is in already
	}
	_, err := m.e.admin.ConfirmBankTransfer(m.ctx(), with(&gatewaypb.ConfirmBankTransferRequest{PaymentId: id, Reference: "REF-" + id[:8]}, m.e.c.admin))
	if err != nil {
		rt.Fatalf("ConfirmBankTransfer %s (%s): %v", id, status, err)
	}
	m.waitMoneyLanded(rt, id)
}

// bankTransfer creates a bank-transfer payment for the order and, most of
// the time, has the admin confirm the transfer arrived. A payment the
// order can no longer take is refused at creation or at confirmation.
func (m *lifecycleModel) bankTransfer(rt *rapid.T) {
	o := m.pick(rt)
	res, err := m.e.payments.CreatePayment(m.ctx(), with(&paymentpb.CreatePaymentRequest{
		OrderId: o.id, GatewayInterfaceId: m.bankGW, ReturnUrl: "https://shop.example/done",
	}, m.e.c.customer))
	if err != nil {
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			rt.Fatalf("CreatePayment (bank) for order %s: %v", o.id, err)
		}
		return
	}
	id := res.Msg.GetPayment().GetId()
	o.payments = append(o.payments, id)
	if !rapid.Bool().Draw(rt, "transfer confirmed") {
		return
	}
	_, err = m.e.admin.ConfirmBankTransfer(m.ctx(), with(&gatewaypb.ConfirmBankTransferRequest{PaymentId: id, Reference: "REF-" + id[:8]}, m.e.c.admin))
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeAlreadyExists:
	default:
		if err != nil {
			rt.Fatalf("ConfirmBankTransfer %s: %v", id, err)
		}
	}
}

// payWithBalance has the customer pay the order from the prepaid balance,
// which an admin tops up first most of the time. An order that is not
// pending, or a balance too short for it, is refused with InvalidArgument
// and nothing changes.
func (m *lifecycleModel) payWithBalance(rt *rapid.T) {
	o := m.pick(rt)
	if rapid.Bool().Draw(rt, "top up") {
		amount := money.MustParse(rapid.SampledFrom([]string{"5.00", "12.30", "20.00"}).Draw(rt, "top-up"))
		_, err := m.customers.AdjustBalance(m.ctx(), with(&identitypb.AdjustBalanceRequest{
			CustomerId: m.e.c.customerID.String(), Amount: amount.String(), Note: "model top-up",
		}, m.e.c.admin))
		if err != nil {
			rt.Fatalf("AdjustBalance %s: %v", amount, err)
		}
		*m.toppedUp = mustAdd(rt, *m.toppedUp, amount.String())
	}
	before := m.digest(rt)
	res, err := m.e.orders.PayWithBalance(m.ctx(), with(&orderpb.PayWithBalanceRequest{OrderId: o.id}, m.e.c.customer))
	if err != nil {
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			rt.Fatalf("PayWithBalance %s (%s): %v", o.id, m.status(rt, o.id), err)
		}
		if after := m.digest(rt); after != before {
			rt.Fatalf("a refused balance payment changed the money state: %v", err)
		}
		return
	}
	if got := res.Msg.GetOrder().GetStatus(); got != "provisioning" {
		rt.Fatalf("an order paid from the balance is %s, not provisioning", got)
	}
	o.balance = res.Msg.GetPayment().GetId()
	o.payments = append(o.payments, o.balance)
}

// failedCallback sends a signed epay notification that does not say
// TRADE_SUCCESS for an epay payment of the order not paid at the gateway
// (made now when there is none and the order takes one): epay.lua reads
// it as pending and the service changes nothing, whatever the payment's
// status (a notification never fails a payment; see
// TestMoneyLifecycleModel).
func (m *lifecycleModel) failedCallback(rt *rapid.T) {
	o := m.pick(rt)
	var unpaid []string
	for _, id := range o.payments {
		if fo, ok := m.e.fake.Order(id); ok && !fo.Paid {
			unpaid = append(unpaid, id)
		}
	}
	if len(unpaid) == 0 {
		res, ok := m.createPayment(rt, o)
		if !ok {
			return // the order takes no payment
		}
		unpaid = []string{res.Msg.GetPayment().GetId()}
		o.payments = append(o.payments, unpaid[0])
	}
	id := rapid.SampledFrom(unpaid).Draw(rt, "payment")
	fo, ok := m.e.fake.Order(id)
	if !ok {
		rt.Fatalf("the fake epay lost payment %s", id)
	}
	status := rapid.SampledFrom([]string{"TRADE_CLOSED", "TRADE_FAILED", "WAIT_BUYER_PAY"}).Draw(rt, "trade_status")
	before := m.digest(rt)
	if err := m.e.callbackTo(m.e.epayGW, signedNotifyWith(id, fo.TradeNo, fo.Money, status)); err != nil {
		rt.Fatalf("a signed %s notification for payment %s answered %v", status, id, err)
	}
	if after := m.digest(rt); after != before {
		rt.Fatalf("a signed %s notification changed the money state", status)
	}
	m.failedNotices.Add(1)
}

// duplicate sends a paid payment's notification again: the spec's answer
// to a repeat is AlreadyExists (the notice was taken: settled, or captured
// when the order could no longer take it, and a capture reported again is
// a repeat too), and nothing changes, paid_at and the audit log included.
func (m *lifecycleModel) duplicate(rt *rapid.T) {
	o := m.pick(rt)
	if o.notice == "" {
		return // not paid: nothing to repeat
	}
	before := m.digest(rt)
	if err := m.e.callbackTo(m.e.epayGW, o.notice); connect.CodeOf(err) != connect.CodeAlreadyExists {
		rt.Fatalf("a repeated notification answered %v, not AlreadyExists", err)
	}
	if after := m.digest(rt); after != before {
		rt.Fatalf("a repeated notification changed the money state")
	}
}

// tampered sends a paid payment's notification with another amount and the
// old signature: refused, nothing changes.
func (m *lifecycleModel) tampered(rt *rapid.T) {
	o := m.pick(rt)
	if o.notice == "" {
		return // not paid: nothing to repeat
	}
	v, err := url.ParseQuery(o.notice)
	if err != nil {
		rt.Fatalf("parse notice: %v", err)
	}
	v.Set("money", "0.01")
	before := m.digest(rt)
	if err := m.e.callbackTo(m.e.epayGW, v.Encode()); connect.CodeOf(err) != connect.CodeInvalidArgument {
		rt.Fatalf("a tampered notification answered %v, not InvalidArgument", err)
	}
	if after := m.digest(rt); after != before {
		rt.Fatalf("a tampered notification changed the money state")
	}
}

// refund refunds a settled payment, in part or in full.
func (m *lifecycleModel) refund(rt *rapid.T) {
	o := m.pick(rt)
	if len(o.payments) == 0 {
		return // no payment yet
	}
	id := rapid.SampledFrom(o.payments).Draw(rt, "payment")
	amount := ""
	if !rapid.Bool().Draw(rt, "in full") {
		amount = fmt.Sprintf("%d.%02d", rapid.IntRange(0, 6).Draw(rt, "yuan"), rapid.IntRange(1, 99).Draw(rt, "fen"))
	}
	m.refundOnce(rt, id, amount)
}

func (m *lifecycleModel) refundOnce(rt *rapid.T, paymentID, amount string) {
	req := &paymentpb.RefundPaymentRequest{PaymentId: paymentID, Amount: amount}
	if to := rapid.SampledFrom([]string{"", "gateway", "balance"}).Draw(rt, "destination"); to != "" {
		req.Destination = &to
	}
	_, err := m.e.payments.RefundPayment(m.ctx(), with(req, m.e.c.admin))
	if err == nil {
		return
	}
	switch connect.CodeOf(err) {
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeAborted:
		// Done, or refused for a reason the request can see (not paid,
		// more than is left, already refunded, a concurrent refund).
	default:
		rt.Fatalf("RefundPayment %s %q: %v", paymentID, amount, err)
	}
}

// concurrentRefunds sends two refunds of one payment at once: never more
// than its amount goes back.
func (m *lifecycleModel) concurrentRefunds(rt *rapid.T) {
	o := m.pick(rt)
	if len(o.payments) == 0 {
		return // no payment yet
	}
	id := rapid.SampledFrom(o.payments).Draw(rt, "payment")
	var wg sync.WaitGroup
	for _, amount := range []string{"", "5.00"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = m.e.payments.RefundPayment(m.ctx(), with(&paymentpb.RefundPaymentRequest{PaymentId: id, Amount: amount}, m.e.c.admin))
		}()
	}
	wg.Wait()
}

func (m *lifecycleModel) cancel(rt *rapid.T) {
	o := m.pick(rt)
	who := m.e.c.customer
	if rapid.Bool().Draw(rt, "admin") {
		who = m.e.c.admin
	}
	_, err := m.e.orders.CancelOrder(m.ctx(), with(&orderpb.CancelOrderRequest{OrderId: o.id}, who))
	if err != nil && connect.CodeOf(err) != connect.CodeInvalidArgument {
		rt.Fatalf("CancelOrder %s: %v", o.id, err)
	}
}

func (m *lifecycleModel) query(rt *rapid.T) {
	o := m.pick(rt)
	if len(o.payments) == 0 {
		return // no payment yet
	}
	id := rapid.SampledFrom(o.payments).Draw(rt, "payment")
	_, err := m.e.payments.QueryPaymentStatus(m.ctx(), with(&paymentpb.QueryPaymentStatusRequest{PaymentId: id}, m.e.c.admin))
	if id == o.balance && connect.CodeOf(err) == connect.CodeInvalidArgument {
		return // no gateway to ask
	}
	if err != nil {
		rt.Fatalf("QueryPaymentStatus %s: %v", id, err)
	}
}

// timeout moves the business clock past the 24 h payment timeout: every
// order still pending is cancelled by the next scan.
func (m *lifecycleModel) timeout(rt *rapid.T) {
	m.clock.Advance(25 * time.Hour)
	m.signInAgain(rt)
	m.waitUntilNone(rt, m.signals.TimeoutScans, `SELECT count(*) FROM orders WHERE status = 'pending'`,
		"pending orders survived the payment timeout", 10*time.Second)
}

// signInAgain replaces the admin's session and the customer's token, which
// a day's passing expired.
func (m *lifecycleModel) signInAgain(rt *rapid.T) {
	admin, customer, err := signIn(m.ctx(), m.e.r.baseURL)
	if err != nil {
		rt.Fatalf("%v", err)
	}
	m.e.c.admin, m.e.c.customer = admin, customer
}

// signIn logs the bootstrap admin and alice in again: a fresh session and
// token, for a test that moved the business clock past their expiry.
func signIn(ctx context.Context, baseURL string) (admin, customer credential, err error) {
	ids := identitypbconnect.NewIdentityServiceClient(http.DefaultClient, baseURL)
	res, err := ids.AdminLogin(ctx, connect.NewRequest(&identitypb.AdminLoginRequest{Username: "admin", Password: "bootstrap-password"}))
	if err != nil {
		return nil, nil, fmt.Errorf("AdminLogin: %w", err)
	}
	tok, err := ids.Login(ctx, connect.NewRequest(&identitypb.LoginRequest{Email: "alice@example.com", Password: "long enough password"}))
	if err != nil {
		return nil, nil, fmt.Errorf("Login: %w", err)
	}
	return cookie(strings.SplitN(res.Header().Get("Set-Cookie"), ";", 2)[0]), bearer(tok.Msg.GetAccessToken()), nil
}

// settle waits until no event is pending or being handled (a failed one is
// the model's to look at), so the invariants see a state at rest.
func (m *lifecycleModel) settle(rt *rapid.T) {
	m.waitUntilNone(rt, m.signals.Events, `SELECT count(*) FROM events WHERE status IN ('pending', 'processing')`,
		"the event queue did not drain in 15 s", 15*time.Second)
}

// waitUntilNone waits until query counts no row, looking again after each
// round of the loop that changes them (sig: the event worker's claim
// rounds, which a handler's end starts and its poll interval repeats; the
// timeout scans) rather than on a timer of the test's own, and fails with
// what after limit.
func (m *lifecycleModel) waitUntilNone(rt *rapid.T, sig *testsignal.Signal, query, what string, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		// The mark comes before the count: a round begun after it saw
		// whatever changed since.
		mark := sig.Mark()
		if m.count(rt, query) == 0 {
			return
		}
		if time.Now().After(deadline) {
			rt.Fatalf("%s", what)
		}
		sig.WaitAfter(rapidTB{rt}, mark, 1, what)
	}
}

// rapidTB is a *rapid.T as the test signals' waits take it: rapid's T has
// no Helper.
type rapidTB struct{ *rapid.T }

func (rapidTB) Helper() {}

func (m *lifecycleModel) count(rt *rapid.T, sql string, args ...any) int {
	var n int
	if err := m.e.r.app.Pool().QueryRow(m.ctx(), sql, args...).Scan(&n); err != nil {
		rt.Fatalf("%s: %v", sql, err)
	}
	return n
}

// digest is the money state a refused or repeated step must leave as it
// was: payments (with when they were paid or captured), refunds, orders,
// events, and the audit rows of what moved money (a second settlement of
// a settled payment shows as a second payment.success even where the row
// looks the same).
func (m *lifecycleModel) digest(rt *rapid.T) string {
	var d string
	err := m.e.r.app.Pool().QueryRow(m.ctx(), `SELECT md5(concat_ws('|',
		(SELECT string_agg(row(id, status, amount, refunded_amount, gateway_payment_id, paid_at, captured_amount, captured_at)::text, ',' ORDER BY id) FROM payments),
		(SELECT string_agg(row(id, status, amount)::text, ',' ORDER BY id) FROM refunds),
		(SELECT string_agg(row(id, status)::text, ',' ORDER BY id) FROM orders),
		(SELECT count(*) FROM events),
		(SELECT string_agg(action || ':' || n, ',' ORDER BY action) FROM (SELECT action, count(*) AS n FROM audit_log
			WHERE action IN ('payment.success', 'payment.confirm_bank_transfer', 'payment.capture', 'payment.fail', 'payment.refund',
				'order.paid', 'order.pay_with_balance', 'order.cancel', 'order.refund') GROUP BY action) a)))`).Scan(&d)
	if err != nil {
		rt.Fatalf("digest: %v", err)
	}
	return d
}

// check holds the lifecycle's invariants on the state at rest.
//
// A step's time is mostly round trips to the database, and check is most
// of them: the ledger check runs on a connection of its own while the
// model's own figures are read in one statement, and the results are then
// judged in the order below. At rest nothing writes, and each query read
// a snapshot of its own before as well.
func (m *lifecycleModel) check(rt *rapid.T) {
	ctx := m.ctx()
	type verified struct {
		rep ledger.Report
		err error
	}
	ledgerDone := make(chan verified, 1)
	go func() {
		rep, err := ledger.Verify(ctx, m.e.r.app.Pool())
		ledgerDone <- verified{rep, err}
	}()
	// The checks of single orders look at this sequence's orders only, so
	// that a failing sequence reproduces (and shrinks) on its own.
	ids := make([]string, 0, len(m.orders))
	for _, o := range m.orders {
		ids = append(ids, o.id)
	}
	var f struct {
		moneyBack, instanceRuns, paidTwice, notProvisioned, refundedEvents, failedForGood int
		settled, returned, balance, spent, credited                                       string
	}
	figuresErr := m.e.r.app.Pool().QueryRow(ctx, `SELECT
		-- No order in service whose money went back: an active or
		-- provisioning order keeps a settled payment that is not refunded
		-- in full — through a gateway, or from the balance (a balance
		-- payment is a payment row of method balance, refunded to the
		-- balance). (A partial refund is a goodwill credit that leaves the
		-- order as it is, so "net of refunds" is above zero, not the whole
		-- price.)
		(SELECT count(*) FROM orders o WHERE o.id::text = ANY($1) AND o.status IN ('active', 'provisioning')
			AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.id AND p.invoice_id IS NULL
				AND p.status = 'success' AND p.refunded_amount < p.amount)),
		-- Every refunded order's instance is ended, and its order_refunded done.
		(SELECT count(*) FROM orders o JOIN instances i ON i.order_id = o.id
			WHERE o.id::text = ANY($1) AND o.status = 'refunded' AND i.external_id <> '' AND i.status <> 'terminated'),
		-- Events agree with each order's history.
		(SELECT count(*) FROM (SELECT order_id FROM events WHERE event_type = 'order_paid' GROUP BY order_id HAVING count(*) > 1) x),
		(SELECT count(*) FROM orders o WHERE o.id::text = ANY($1) AND o.status = 'active'
			AND (SELECT count(*) FROM events e WHERE e.order_id = o.id AND e.event_type = 'order_provisioned') <> 1),
		(SELECT count(*) FROM events e JOIN orders o ON o.id = e.order_id
			WHERE e.event_type = 'order_refunded' AND o.status <> 'refunded'),
		-- Nothing fails for good but what waits for an admin by design: the
		-- automatic refund of an order whose refund is pending (a bank
		-- transfer, returned by hand until ResolveRefund records it).
		(SELECT count(*) FROM events e WHERE e.status = 'failed' AND NOT (e.event_type = 'order_cancelled'
			AND EXISTS (SELECT 1 FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.order_id = e.order_id AND r.status = 'pending'))),
		-- What the settled and captured epay payments hold, and what their
		-- succeeded refunds through the gateway gave back.
		(SELECT coalesce(sum(amount) FILTER (WHERE status IN ('success', 'refunded')), 0) + coalesce(sum(captured_amount), 0)
			FROM payments WHERE gateway_interface_id = $2)::text,
		(SELECT coalesce(sum(r.amount), 0) FROM refunds r JOIN payments p ON p.id = r.payment_id
			WHERE p.gateway_interface_id = $2 AND r.status = 'succeeded' AND r.destination = 'gateway')::text,
		-- The customer's balance, the balance payments that stand, and the
		-- refunds made to the balance.
		(SELECT balance FROM customers WHERE id = $3)::text,
		(SELECT coalesce(sum(amount), 0) FROM payments WHERE customer_id = $3 AND method = 'balance' AND status IN ('success', 'refunded'))::text,
		(SELECT coalesce(sum(r.amount), 0) FROM refunds r JOIN payments p ON p.id = r.payment_id
			WHERE p.customer_id = $3 AND r.destination = 'balance' AND r.status = 'succeeded')::text`,
		ids, m.e.epayGW, m.e.c.customerID).Scan(&f.moneyBack, &f.instanceRuns, &f.paidTwice, &f.notProvisioned, &f.refundedEvents, &f.failedForGood,
		&f.settled, &f.returned, &f.balance, &f.spent, &f.credited)

	// The ledger, checked independently of the code that writes it.
	v := <-ledgerDone
	if v.err != nil {
		rt.Fatalf("ledger.Verify: %v", v.err)
	}
	if !v.rep.OK() {
		rt.Fatalf("ledger: %s", v.rep)
	}
	if figuresErr != nil {
		rt.Fatalf("the model's figures: %v", figuresErr)
	}
	if f.moneyBack > 0 {
		rt.Fatalf("%d order(s) in service whose money went back in full", f.moneyBack)
	}
	if f.instanceRuns > 0 {
		rt.Fatalf("%d refunded order(s) whose instance still runs", f.instanceRuns)
	}
	if f.paidTwice > 0 {
		rt.Fatalf("%d order(s) paid twice", f.paidTwice)
	}
	if f.notProvisioned > 0 {
		rt.Fatalf("%d active order(s) without exactly one order_provisioned", f.notProvisioned)
	}
	if f.refundedEvents > 0 {
		rt.Fatalf("%d order_refunded event(s) for orders that are not refunded", f.refundedEvents)
	}
	if f.failedForGood > 0 {
		rt.Fatalf("%d event(s) failed for good", f.failedForGood)
	}
	// Money is conserved at the gateway: what epay took is what our settled
	// epay payments hold plus the money captured for those that could no
	// longer apply, and what it gave back is what their succeeded refunds
	// through the gateway say (a refund to the balance stays with us).
	// (Bank transfers are confirmed by an admin; their refunds through the
	// bank are made by hand and stay pending until recorded.)
	var paidAtGateway, refundedAtGateway money.Amount
	for _, o := range m.e.fake.Orders() {
		if o.Paid {
			paidAtGateway = mustAdd(rt, paidAtGateway, o.Money)
		}
	}
	for _, r := range m.e.fake.Refunds() {
		refundedAtGateway = mustAdd(rt, refundedAtGateway, r.Money)
	}
	settled, returned := f.settled, f.returned
	if paidAtGateway.String() != money.MustParse(settled).String() {
		rt.Fatalf("epay took %s but the settled and captured gateway payments hold %s", paidAtGateway, settled)
	}
	if refundedAtGateway.String() != money.MustParse(returned).String() {
		rt.Fatalf("epay gave back %s but the succeeded gateway refunds say %s", refundedAtGateway, returned)
	}
	// The balance is conserved: what the customer holds is what the admin
	// credited, less the balance payments that stand, plus the refunds
	// made to the balance (of balance payments and of gateway ones).
	balance, spent, credited := f.balance, f.spent, f.credited
	want, err := m.toppedUp.Sub(money.MustParse(spent))
	if err != nil {
		rt.Fatalf("balance: %v", err)
	}
	if want = mustAdd(rt, want, credited); want.String() != money.MustParse(balance).String() {
		rt.Fatalf("the balance is %s, but it held or was credited %s, %s was paid from it and %s refunded to it", balance, *m.toppedUp, spent, credited)
	}
	// A final order never moves again.
	rows, err := m.e.r.app.Pool().Query(ctx, `SELECT id::text, status FROM orders`)
	if err != nil {
		rt.Fatalf("orders: %v", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			rt.Fatalf("scan: %v", err)
		}
		if was, ok := m.finals[id]; ok && was != status {
			rt.Fatalf("order %s left its final status %s for %s", id, was, status)
		}
		switch status {
		case "cancelled", "refunded", "completed", "terminated":
			m.finals[id] = status
		}
	}
}

func mustAdd(rt *rapid.T, a money.Amount, s string) money.Amount {
	b, err := money.Parse(s)
	if err != nil {
		rt.Fatalf("amount %q: %v", s, err)
	}
	sum, err := a.Add(b)
	if err != nil {
		rt.Fatalf("sum: %v", err)
	}
	return sum
}
