package payment_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/store"
)

// The callback's shape bounds are exact, and the pairs bound counts forms
// only: a payload of exactly MaxCallbackBytes and a form of exactly
// MaxCallbackPairs parts reach the plugin (which refuses them for their
// signature), one byte or one part more is refused as malformed before
// any plugin runs; a JSON body's '&'s are the plugin's to bound. Found by
// the mutation run: both bounds moved by one, and the form test turned
// around, passed every test.
func TestCallbackShapeBoundsAreExact(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	pairs := func(n int) string { return strings.TrimSuffix(strings.Repeat("a=1&", n), "&") }
	for _, c := range []struct {
		name, method, contentType, payload string
		malformed                          bool
	}{
		{"exactly the byte bound", http.MethodPost, "application/x-www-form-urlencoded", strings.Repeat("a", payment.MaxCallbackBytes), false},
		{"a byte over", http.MethodPost, "application/x-www-form-urlencoded", strings.Repeat("a", payment.MaxCallbackBytes+1), true},
		{"exactly the pairs bound, GET", http.MethodGet, "", pairs(payment.MaxCallbackPairs), false},
		{"a pair over, GET", http.MethodGet, "", pairs(payment.MaxCallbackPairs + 1), true},
		{"a pair over, POST without a content type (gRPC)", http.MethodPost, "", pairs(payment.MaxCallbackPairs + 1), true},
		{"a pair over, POST form with a charset", http.MethodPost, "Application/X-WWW-Form-Urlencoded; charset=utf-8", pairs(payment.MaxCallbackPairs + 1), true},
		{"a JSON body with as many '&'", http.MethodPost, "application/json", `{"a":"` + pairs(payment.MaxCallbackPairs+1) + `"}`, false},
	} {
		_, err := f.svc.HandleCallback(t.Context(), payment.Callback{
			GatewayInterfaceID: f.epayGW, Method: c.method, ContentType: c.contentType, Payload: c.payload,
		})
		require.Error(t, err, c.name)
		require.True(t, apperr.Is(err, apperr.InvalidArgument), "%s: %v", c.name, err)
		require.Equal(t, c.malformed, strings.Contains(err.Error(), "malformed callback"), "%s: %v", c.name, err)
	}
	require.Equal(t, 0, f.count(t, `SELECT count(*) FROM payments WHERE status <> 'pending'`))
}

// A success the plugin marks final settles like any success: final says
// only that a failure is the gateway's last word (docs/plugins.md). Found
// by the mutation run: the failure test turned around (any final report
// not a failure went to the final-failure path) passed every test of the
// package, whose plugins never mark a success final.
func TestAFinalSuccessSettlesThePayment(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	orderID := f.order(t, "9.90")
	p := f.pay(t, orderID)
	f.epayAnswers(t, "parse_callback", `{"valid":true,"payment_id":"`+p.ID.String()+`","amount":"9.90","currency":"CNY","status":"success",`+
		`"gateway_payment_id":"T-FINAL","gateway_tx_id":"T-FINAL","final":true,"ack":"success"}`)
	res, err := f.svc.HandleCallback(t.Context(), payment.Callback{GatewayInterfaceID: f.epayGW, Method: http.MethodGet, Payload: "x=1"})
	require.NoError(t, err)
	require.Equal(t, "success", res.Payment.Status)
	require.Equal(t, "paid", f.orderStatus(t, orderID))
}

// A status query that answers success for another amount settles nothing:
// the answer's amount is checked as a callback's is. Found by the mutation
// run: the query's amount left unread (as when the gateway gives none)
// passed every test of the package, and a 9.90 payment was settled by an
// answer of 0.01.
func TestAStatusQueryForAnotherAmountSettlesNothing(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	orderID := f.order(t, "9.90")
	p := f.pay(t, orderID)
	f.epayAnswers(t, "query_payment", `{"status":"success","amount":"0.01","currency":"CNY","gateway_payment_id":"T-Q","gateway_tx_id":"T-Q"}`)
	_, err := f.svc.QueryPaymentStatus(f.admin, p.ID)
	require.Error(t, err)
	require.Contains(t, err.Error(), "amount mismatch")
	got, err := f.svc.Get(f.admin, p.ID)
	require.NoError(t, err)
	require.Equal(t, "pending", got.Status)
	require.Equal(t, "pending", f.orderStatus(t, orderID))
}

// A settlement by a status query logs nothing at ERROR: the saved-card
// attempt's answer is logged only when it fails. Found by the mutation
// run: the test of that error turned around (an ERROR line for every
// settlement by a status query, and none for a failure) passed every test.
func TestAStatusQuerySettlementLogsNoError(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	var logged strings.Builder
	svc := payment.NewService(f.pool, slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelError})),
		payment.WithGateways(f.gws), payment.WithClock(f.clock.Now))
	orderID := f.order(t, "9.90")
	p := f.pay(t, orderID)
	f.epayAnswers(t, "query_payment", `{"status":"success","amount":"9.90","currency":"CNY","gateway_payment_id":"T-Q","gateway_tx_id":"T-Q"}`)
	got, err := svc.QueryPaymentStatus(f.admin, p.ID)
	require.NoError(t, err)
	require.Equal(t, "success", got.Status)
	require.Empty(t, logged.String())
}

// A bank transfer's statement reference is taken up to 128 bytes exactly.
// Found by the mutation run: the bound moved by one passed every test.
func TestABankTransferReferenceOf128BytesIsTaken(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	orderID := f.order(t, "15.00")
	byBank, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &orderID, GatewayInterfaceID: f.bankGW, ReturnURL: "https://x.example"})
	require.NoError(t, err)
	_, err = f.svc.ConfirmBankTransfer(f.admin, byBank.ID, strings.Repeat("R", 129))
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	confirmed, err := f.svc.ConfirmBankTransfer(f.admin, byBank.ID, strings.Repeat("R", 128))
	require.NoError(t, err)
	require.Equal(t, "success", confirmed.Status)
	require.Equal(t, strings.Repeat("R", 128), confirmed.GatewayPaymentID)
}

// CallbackRefusal answers the body the interface's plugin declares, and
// nil for an unknown interface or one whose plugin is not loaded. Found by
// the mutation run: each of its three tests turned around passed every
// test of the package (the refusal bodies are tested over the wire).
func TestCallbackRefusalIsThePluginsDeclaredBody(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	gw, err := f.gws.Get(t.Context(), f.epayGW)
	require.NoError(t, err)
	declared := &payment.CallbackRefusal{ContentType: "application/json", Body: `{"code":"FAIL"}`}
	gw.CallbackRefusal = declared
	f.gws.set(gw)
	require.Equal(t, declared, f.svc.CallbackRefusal(t.Context(), f.epayGW))
	require.Nil(t, f.svc.CallbackRefusal(t.Context(), uuid.New()), "an unknown interface")
	gw.Plugin = nil
	f.gws.set(gw)
	require.Nil(t, f.svc.CallbackRefusal(t.Context(), f.epayGW), "no plugin loaded")
	require.Nil(t, payment.NewService(f.pool, slog.New(slog.DiscardHandler)).CallbackRefusal(t.Context(), f.epayGW), "no gateways")
}

// A final failure the plugin reports fails a pending payment with the
// plugin's reason (or the service's own when it gives none), its amount
// held to the payment's when it reports one. Not reached by the package's
// tests before (the mutation run counted finalFailure not covered: only
// the over-the-wire tests sent one).
func TestAFinalFailureFailsThePendingPaymentWithItsReason(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	answer := func(body string) { f.epayAnswers(t, "parse_callback", body) }
	cb := payment.Callback{GatewayInterfaceID: f.epayGW, Method: http.MethodGet, Payload: "x=1"}
	failed := func(p store.Payment, amount, reason string) string {
		return `{"valid":true,"payment_id":"` + p.ID.String() + `","amount":"` + amount + `","currency":"CNY","status":"failed",` +
			`"gateway_payment_id":"T-F","final":true,"reason":"` + reason + `","ack":"success"}`
	}

	p1, p2, p3 := f.pay(t, f.order(t, "9.90")), f.pay(t, f.order(t, "9.90")), f.pay(t, f.order(t, "9.90"))
	answer(failed(p1, "9.90", "card declined"))
	res, err := f.svc.HandleCallback(t.Context(), cb)
	require.NoError(t, err)
	require.Equal(t, "failed", res.Payment.Status)
	require.Equal(t, "card declined", f.payment(t, p1.ID).FailureReason)

	answer(failed(p2, "", " "))
	_, err = f.svc.HandleCallback(t.Context(), cb)
	require.NoError(t, err)
	require.Equal(t, "the gateway reports the payment can no longer be paid", f.payment(t, p2.ID).FailureReason)

	answer(failed(p3, "1.00", "card declined"))
	_, err = f.svc.HandleCallback(t.Context(), cb)
	require.Error(t, err)
	require.Contains(t, err.Error(), "amount mismatch")
	answer(failed(p3, "9,90", "card declined"))
	_, err = f.svc.HandleCallback(t.Context(), cb)
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.Contains(t, err.Error(), "unreadable amount")
	require.Equal(t, "pending", f.payment(t, p3.ID).Status)
}

// epayAnswers replaces the epay interface's plugin by one that answers fn
// with body (any other function fails the test).
func (f *flowBundle) epayAnswers(t *testing.T, fn, body string) {
	t.Helper()
	gw, err := f.gws.Get(t.Context(), f.epayGW)
	require.NoError(t, err)
	gw.Plugin = callerFunc(func(called string) (string, error) {
		require.Equal(t, fn, called)
		return body, nil
	})
	f.gws.set(gw)
}

// A payment page is a URL, a QR code or instructions, any one of them; an
// answer with none is the plugin's bug. Found by the mutation run: the QR
// code's test turned around (a QR-only answer refused, an empty one taken)
// passed every test of the package, whose epay plugin answers a URL.
func TestCreatePaymentTakesAnyOneOfURLQRCodeOrInstructions(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	for _, c := range []struct{ answer, wantQR string }{
		{`{"qr_code":"weixin://wxpay/bizpayurl?pr=abc","gateway_payment_id":"G-QR"}`, "weixin://wxpay/bizpayurl?pr=abc"},
		{`{"instructions":"IBAN DE00 0000","gateway_payment_id":"G-I"}`, ""},
	} {
		f.epayAnswers(t, "create_payment", c.answer)
		orderID := f.order(t, "9.90")
		p, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &orderID, GatewayInterfaceID: f.epayGW, ReturnURL: "https://x.example"})
		require.NoError(t, err, c.answer)
		require.Equal(t, c.wantQR, p.QrCode, c.answer)
	}
	f.epayAnswers(t, "create_payment", `{"gateway_payment_id":"G-NONE"}`)
	orderID := f.order(t, "9.90")
	_, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &orderID, GatewayInterfaceID: f.epayGW, ReturnURL: "https://x.example"})
	require.True(t, apperr.Is(err, apperr.Internal), "%v", err)
	require.Contains(t, err.Error(), "neither payment_url, qr_code nor instructions")
	require.Equal(t, 0, f.count(t, `SELECT count(*) FROM payments WHERE order_id = $1`, orderID))
}

// A new payment goes through an interface that exists, is enabled, and
// has a plugin loaded that no admin disabled; each refusal says which,
// and writes nothing. (Reached only over the wire before: the mutation run
// counted the plugin's refusals not covered.)
func TestANewPaymentNeedsAnEnabledInterfaceWithALoadedPlugin(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	good, err := f.gws.Get(t.Context(), f.epayGW)
	require.NoError(t, err)
	orderID := f.order(t, "9.90")
	for _, c := range []struct {
		name string
		gw   func(payment.Gateway) payment.Gateway
		want string
	}{
		{"disabled", func(g payment.Gateway) payment.Gateway { g.Enabled = false; return g }, "is disabled"},
		{"plugin disabled", func(g payment.Gateway) payment.Gateway { g.PluginDisabled = true; return g }, `its plugin "epay" is disabled`},
		{"no plugin", func(g payment.Gateway) payment.Gateway { g.Plugin = nil; return g }, "has no loaded plugin"},
	} {
		f.gws.set(c.gw(good))
		_, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &orderID, GatewayInterfaceID: f.epayGW, ReturnURL: "https://x.example"})
		require.True(t, apperr.Is(err, apperr.InvalidArgument), "%s: %v", c.name, err)
		require.Contains(t, err.Error(), c.want, c.name)
	}
	_, err = f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &orderID, GatewayInterfaceID: uuid.New(), ReturnURL: "https://x.example"})
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.Contains(t, err.Error(), "does not exist")
	_, err = payment.NewService(f.pool, slog.New(slog.DiscardHandler)).CreatePayment(f.asAlice,
		payment.NewPayment{OrderID: &orderID, GatewayInterfaceID: f.epayGW, ReturnURL: "https://x.example"})
	require.True(t, apperr.Is(err, apperr.Unavailable), "no gateways: %v", err)
	require.Equal(t, 0, f.count(t, `SELECT count(*) FROM payments WHERE order_id = $1`, orderID))
}

// The payment's subject at the gateway is the order's description, or
// "Order <id>" when it has none. Found by the mutation run: the empty test
// turned around (the id for a described order, nothing for the others)
// passed every test of the package.
func TestThePaymentSubjectIsTheOrdersDescriptionOrItsID(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	gw, err := f.gws.Get(t.Context(), f.epayGW)
	require.NoError(t, err)
	k := &recording{answer: `{"payment_url":"https://pay.example/1","gateway_payment_id":"G-S"}`}
	gw.Plugin = k
	f.gws.set(gw)
	subject := func(orderID uuid.UUID) string {
		t.Helper()
		_, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &orderID, GatewayInterfaceID: f.epayGW, ReturnURL: "https://x.example"})
		require.NoError(t, err)
		var in struct {
			Subject string `json:"subject"`
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		require.NoError(t, json.Unmarshal([]byte(k.input), &in))
		return in.Subject
	}
	plain := f.order(t, "9.90")
	require.Equal(t, "Order "+plain.String(), subject(plain))
	described := f.order(t, "9.90")
	_, err = f.pool.Exec(t.Context(), `UPDATE orders SET description = 'VPS 2 GB, one month' WHERE id = $1`, described)
	require.NoError(t, err)
	require.Equal(t, "VPS 2 GB, one month", subject(described))
}

// Paying an invoice of an order locks the order before the invoice, as
// every writer does (customer → order → invoice → payment): while another
// transaction holds the order, the payment waits without holding the
// invoice, so a writer that holds the invoice and waits for the order
// cannot be in a deadlock with it. Found by the mutation run: skipping the
// order's lock first passed every test (the payment still waited, holding
// the invoice, at its key to the order).
func TestPayingAnInvoiceLocksItsOrderFirst(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	ctx := t.Context()
	orderID := f.order(t, "20.00")
	inv := f.invoice(t, &orderID, "20.00")
	holder, err := f.pool.Begin(ctx)
	require.NoError(t, err)
	defer holder.Rollback(ctx) //nolint:errcheck // rolled back below
	_, err = holder.Exec(ctx, `SELECT 1 FROM orders WHERE id = $1 FOR UPDATE`, orderID)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		_, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{InvoiceID: &inv, GatewayInterfaceID: f.epayGW, ReturnURL: "https://x.example"})
		done <- err
	}()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var waiting int
		assert.NoError(c, f.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting))
		assert.Positive(c, waiting)
	}, 20*time.Second, 10*time.Millisecond, "the payment waits for the order")
	_, err = f.pool.Exec(ctx, `SELECT 1 FROM invoices WHERE id = $1 FOR UPDATE NOWAIT`, inv)
	require.NoError(t, err, "the waiting payment holds no lock on the invoice")
	require.NoError(t, holder.Rollback(ctx))
	require.NoError(t, <-done)
}

// What create_payment is asked beyond the amount: an invoice's payment is
// named by the invoice's number, and a gateway that saves cards is asked
// to save one for a renewing order only, named by the gateway customer
// it made before. Found by the mutation run: the number's test, both of
// recurringOrder's cycle tests and saveMethodFields' error test, turned
// around, passed every test of the package.
func TestCreatePaymentNamesTheInvoiceAndSavesTheCardOfARenewingOrder(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	gw, err := f.gws.Get(t.Context(), f.epayGW)
	require.NoError(t, err)
	k := &recording{answer: `{"payment_url":"https://pay.example/1","gateway_payment_id":"G-S"}`}
	gw.Plugin, gw.SavesMethods = k, true
	f.gws.set(gw)
	type asked struct {
		Subject           string `json:"subject"`
		SaveMethod        bool   `json:"save_method"`
		CustomerID        string `json:"customer_id"`
		GatewayCustomerID string `json:"gateway_customer_id"`
	}
	ask := func(in payment.NewPayment) asked {
		t.Helper()
		in.GatewayInterfaceID, in.ReturnURL = f.epayGW, "https://x.example"
		_, err := f.svc.CreatePayment(f.asAlice, in)
		require.NoError(t, err)
		var a asked
		k.mu.Lock()
		defer k.mu.Unlock()
		require.NoError(t, json.Unmarshal([]byte(k.input), &a))
		return a
	}
	once := f.order(t, "9.90")
	require.Equal(t, asked{Subject: "Order " + once.String()}, ask(payment.NewPayment{OrderID: &once}))
	monthly := f.order(t, "9.90")
	_, err = f.pool.Exec(t.Context(), `UPDATE orders SET billing_cycle = 'monthly', renewal_price = total_amount, renews = true WHERE id = $1`, monthly)
	require.NoError(t, err)
	require.Equal(t, asked{Subject: "Order " + monthly.String(), SaveMethod: true, CustomerID: f.alice.String()}, ask(payment.NewPayment{OrderID: &monthly}))
	// Once the gateway has made the customer, it is named to it again.
	_, err = f.pool.Exec(t.Context(), `INSERT INTO gateway_customers (gateway_interface_id, customer_id, gateway_customer_id, created_at)
		VALUES ($1, $2, 'cus_A', now())`, f.epayGW, f.alice)
	require.NoError(t, err)
	again := f.order(t, "9.90")
	_, err = f.pool.Exec(t.Context(), `UPDATE orders SET billing_cycle = 'monthly', renewal_price = total_amount, renews = true WHERE id = $1`, again)
	require.NoError(t, err)
	require.Equal(t, asked{Subject: "Order " + again.String(), SaveMethod: true, CustomerID: f.alice.String(), GatewayCustomerID: "cus_A"},
		ask(payment.NewPayment{OrderID: &again}))

	inv := f.invoice(t, nil, "5.00")
	require.Equal(t, asked{Subject: "Invoice INV-" + inv.String()[:12]}, ask(payment.NewPayment{InvoiceID: &inv}))
}
