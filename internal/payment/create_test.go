package payment_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/testfixture"
)

func TestCreatePaymentAsksTheGatewayAndReturnsThePendingPaymentAgain(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	orderID := f.order(t, "12.30")

	p := f.pay(t, orderID)
	require.Equal(t, "pending", p.Status)
	require.Equal(t, "12.30", p.Amount.String())
	require.Equal(t, "CNY", p.Currency)
	require.Equal(t, f.alice, p.CustomerID)
	require.Empty(t, p.GatewayPaymentID, "empty until a callback")
	require.True(t, strings.HasPrefix(p.PaymentUrl, f.fake.URL()+"/submit.php?trade_no="), p.PaymentUrl)
	require.Equal(t, f.clock.Now().Add(reconcileAfter).UTC().Truncate(1000), p.NextReconcileAt.UTC().Truncate(1000))

	o, ok := f.fake.Order(p.ID.String())
	require.True(t, ok, "the gateway order carries the payment id as out_trade_no")
	require.Equal(t, "12.30", o.Money)
	require.Equal(t, f.callback.URL+"/callbacks/"+f.epayGW.String(), o.NotifyURL)
	require.Equal(t, "https://shop.example/done", o.ReturnURL)

	again := f.pay(t, orderID)
	require.Equal(t, p.ID, again.ID, "the pending payment is returned, not a second one")
	require.Equal(t, p.PaymentUrl, again.PaymentUrl)
	require.Len(t, f.fake.Orders(), 1, "the gateway was not asked again")

	// Bank transfer: instructions instead of a URL, a separate pending payment.
	bank, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &orderID, GatewayInterfaceID: f.bankGW, ReturnURL: "https://shop.example/done"})
	require.NoError(t, err)
	require.NotEqual(t, p.ID, bank.ID)
	require.Contains(t, bank.Instructions, "12.30 CNY")
	require.Contains(t, bank.Instructions, strings.ToUpper(bank.ID.String()[:8]))
	require.Empty(t, bank.PaymentUrl)

	// An admin may create it for the customer; the customer owns it.
	adminMade, err := f.svc.CreatePayment(f.admin, payment.NewPayment{OrderID: &orderID, GatewayInterfaceID: f.epayGW, ReturnURL: "https://x.example"})
	require.NoError(t, err)
	require.Equal(t, p.ID, adminMade.ID)
	testfixture.CheckMoneyInvariants(t, f.pool)
}

func TestCreatePaymentOfAnInvoiceChargesWhatIsLeftAndCarriesItsOrder(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	orderID := f.order(t, "100.00")
	invoiceID := f.invoice(t, &orderID, "30.50")
	_, err := f.pool.Exec(context.Background(), `UPDATE invoices SET paid_amount = 10.25 WHERE id = $1`, invoiceID)
	require.NoError(t, err)

	p, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{InvoiceID: &invoiceID, GatewayInterfaceID: f.epayGW, ReturnURL: "https://x.example"})
	require.NoError(t, err)
	require.Equal(t, "20.25", p.Amount.String())
	require.Equal(t, orderID, *p.OrderID, "an order's invoice payment carries the order")

	both, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &orderID, InvoiceID: &invoiceID, GatewayInterfaceID: f.epayGW, ReturnURL: "https://x.example"})
	require.NoError(t, err)
	require.Equal(t, p.ID, both.ID, "naming the order too is the same payment")

	standalone := f.invoice(t, nil, "5.00")
	s, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{InvoiceID: &standalone, GatewayInterfaceID: f.epayGW, ReturnURL: "https://x.example"})
	require.NoError(t, err)
	require.Nil(t, s.OrderID)
	require.Equal(t, "5.00", s.Amount.String())
}

func TestCreatePaymentRefusesWhatCannotBePaid(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		_, err := f.pool.Exec(ctx, sql, args...)
		require.NoError(t, err)
	}
	pending := f.order(t, "10.00")
	paid := f.order(t, "10.00")
	exec(`UPDATE orders SET status = 'paid', paid_at = now() WHERE id = $1`, paid)
	cancelled := f.order(t, "10.00")
	exec(`UPDATE orders SET status = 'cancelled', cancelled_at = now(), cancel_reason = 'customer' WHERE id = $1`, cancelled)
	free := f.order(t, "0.00")
	bobs := testfixture.Order(t, f.pool, f.bob, "10.00")
	cancelledInvoice := f.invoice(t, &pending, "3.00")
	exec(`UPDATE invoices SET status = 'cancelled' WHERE id = $1`, cancelledInvoice)
	paidInvoice := f.invoice(t, &pending, "3.00")
	exec(`UPDATE invoices SET status = 'paid', paid_amount = amount WHERE id = $1`, paidInvoice)
	otherOrder := f.order(t, "1.00")
	foreignInvoice := f.invoice(t, &otherOrder, "1.00")
	disabled := testfixture.GatewayInterface(t, f.pool, "epay")
	gw, err := f.gws.Get(ctx, f.epayGW)
	require.NoError(t, err)
	gw.InterfaceID, gw.Enabled = disabled, false
	f.gws.set(gw)
	unloaded := testfixture.GatewayInterface(t, f.pool, "epay")
	gw.InterfaceID, gw.Enabled, gw.Plugin = unloaded, true, nil
	f.gws.set(gw)
	missing := uuid.New()

	ptr := func(id uuid.UUID) *uuid.UUID { return &id }
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		in      payment.NewPayment
		message string
	}{
		{"unknown order", f.asAlice, payment.NewPayment{OrderID: ptr(uuid.New())}, "does not exist"},
		{"another customer's order", f.asAlice, payment.NewPayment{OrderID: &bobs}, "does not exist"},
		{"paid order", f.asAlice, payment.NewPayment{OrderID: &paid}, "already paid"},
		{"cancelled order", f.asAlice, payment.NewPayment{OrderID: &cancelled}, "cancelled"},
		{"free order", f.asAlice, payment.NewPayment{OrderID: &free}, "nothing to pay"},
		{"unknown invoice", f.asAlice, payment.NewPayment{InvoiceID: ptr(uuid.New())}, "does not exist"},
		{"cancelled invoice", f.asAlice, payment.NewPayment{InvoiceID: &cancelledInvoice}, "cancelled"},
		{"paid invoice", f.asAlice, payment.NewPayment{InvoiceID: &paidInvoice}, "already paid"},
		{"invoice of another order", f.asAlice, payment.NewPayment{OrderID: &pending, InvoiceID: &foreignInvoice}, "does not belong"},
		{"another customer's invoice", f.asBob, payment.NewPayment{InvoiceID: &foreignInvoice}, "does not exist"},
		{"neither order nor invoice", f.asAlice, payment.NewPayment{}, "required"},
		{"unknown interface", f.asAlice, payment.NewPayment{OrderID: &pending, GatewayInterfaceID: missing}, "does not exist"},
		{"disabled interface", f.asAlice, payment.NewPayment{OrderID: &pending, GatewayInterfaceID: disabled}, "disabled"},
		{"plugin not loaded", f.asAlice, payment.NewPayment{OrderID: &pending, GatewayInterfaceID: unloaded}, "no loaded plugin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.in.GatewayInterfaceID == uuid.Nil {
				tc.in.GatewayInterfaceID = f.epayGW
			}
			tc.in.ReturnURL = "https://shop.example/done"
			_, err := f.svc.CreatePayment(tc.ctx, tc.in)
			require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
			require.Contains(t, err.Error(), tc.message)
		})
	}
	_, err = f.svc.CreatePayment(context.Background(), payment.NewPayment{OrderID: &pending, GatewayInterfaceID: f.epayGW})
	require.True(t, apperr.Is(err, apperr.Unauthenticated), "%v", err)
	require.Zero(t, f.count(t, `SELECT count(*) FROM payments`))
	require.Empty(t, f.fake.Orders(), "nothing reached the gateway")
}

func TestCreatePaymentPluginFailureIsInternalAndLeavesNoPayment(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	orderID := f.order(t, "12.30")
	f.fake.InjectFault(epay.Fault{Path: "/mapi.php", Status: http.StatusBadGateway, Times: 1})

	_, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &orderID, GatewayInterfaceID: f.epayGW, ReturnURL: "https://x.example"})
	require.True(t, apperr.Is(err, apperr.Internal), "%v", err)
	require.Zero(t, f.count(t, `SELECT count(*) FROM payments`))

	// The fault is gone: the next call creates it.
	p := f.pay(t, orderID)
	require.Equal(t, "pending", p.Status)
}

func TestConcurrentCreatePaymentsMakeOnePayment(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	orderID := f.order(t, "50.00")
	const n = 10
	ids := make([]uuid.UUID, n)
	errs := make([]error, n) // required here: FailNow in a goroutine would end it, not the test
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			p, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &orderID, GatewayInterfaceID: f.epayGW, ReturnURL: "https://x.example"})
			if errs[i] = err; err == nil {
				ids[i] = p.ID
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "call %d", i)
	}
	for _, id := range ids {
		require.Equal(t, ids[0], id)
	}
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM payments WHERE order_id = $1`, orderID))
	// Losers may have created gateway orders; none of their URLs was handed out.
	for _, o := range f.fake.Orders() {
		if o.OutTradeNo != ids[0].String() {
			require.Zero(t, f.count(t, `SELECT count(*) FROM payments WHERE id::text = $1`, o.OutTradeNo))
		}
	}
	testfixture.CheckMoneyInvariants(t, f.pool)
}
