package payment_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/ledger"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/payment/reconcile"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// renewalWorld is issue 35's finding 5 set up in the payment domain: a
// monthly order of alice paid through epay and active, its renewal invoice
// issued, and the customer's pending payments of that invoice through
// epay and by bank transfer (each carrying the order, as CreatePayment
// records them).
type renewalWorld struct {
	order, invoice uuid.UUID
	first          store.Payment // the order's own payment
	byEpay, byBank store.Payment // pending payments of the renewal invoice
	renewalPrice   string
}

func (f *flowBundle) renewalWorld(t *testing.T) renewalWorld {
	t.Helper()
	ctx := context.Background()
	w := renewalWorld{renewalPrice: "10.00"}
	w.order = f.order(t, "10.00")
	_, err := f.pool.Exec(ctx, `UPDATE orders SET billing_cycle = 'monthly', renewal_price = 10 WHERE id = $1`, w.order)
	require.NoError(t, err)
	w.first = f.pay(t, w.order)
	_, err = f.svc.HandleCallback(ctx, f.callbackOf(notify(w.first.ID, "FIRST-"+w.first.ID.String()[:8], "10.00")))
	require.NoError(t, err)
	now := store.Timestamp(f.clock.Now())
	require.NoError(t, store.WithTx(ctx, f.pool, func(tx pgx.Tx) error {
		o, err := store.Q(tx).GetOrderForUpdate(ctx, w.order)
		require.NoError(t, err)
		for _, to := range []order.Status{order.StatusProvisioning, order.StatusActive} {
			moved, err := order.Transition(ctx, tx, o, order.Move{To: to, By: audit.System("test"), At: now})
			require.NoError(t, err)
			o = moved.Order
		}
		first, err := store.Q(tx).LatestServicePeriod(ctx, w.order)
		require.NoError(t, err)
		end := order.AddMonths(first.AnchorAt, 2, time.UTC)
		invs, err := order.IssueRenewals(ctx, tx, []order.Renewal{{
			Order: o, Latest: first, Last: first, Price: money.MustParse(w.renewalPrice),
			Next: store.NewServicePeriod{OrderID: w.order, Seq: 2, StartsAt: first.EndsAt, EndsAt: end, AnchorAt: first.AnchorAt, AnchorMonths: 2, CreatedAt: now},
		}}, time.UTC, audit.System("test"), now)
		require.NoError(t, err)
		w.invoice = invs[0].ID
		return nil
	}))
	w.byEpay, err = f.svc.CreatePayment(f.asAlice, payment.NewPayment{InvoiceID: &w.invoice, GatewayInterfaceID: f.epayGW, ReturnURL: "https://shop.example/done"})
	require.NoError(t, err)
	require.Equal(t, w.order, *w.byEpay.OrderID, "a payment of the renewal invoice carries its order")
	w.byBank, err = f.svc.CreatePayment(f.asAlice, payment.NewPayment{InvoiceID: &w.invoice, GatewayInterfaceID: f.bankGW, ReturnURL: "https://shop.example/done"})
	require.NoError(t, err)
	return w
}

// refundFirst refunds the order's first payment in full (to the balance:
// no gateway round trip): it bought the current period, so the service
// ends now (terminated, docs/operations.md "Refunds and periods").
func (f *flowBundle) refundFirst(t *testing.T, w renewalWorld) {
	t.Helper()
	_, err := f.svc.RefundPayment(f.admin, w.first.ID, "", "customer left", store.RefundToBalance)
	require.NoError(t, err)
	require.Equal(t, "terminated", f.orderStatus(t, w.order))
	o, err := store.Q(f.pool).GetOrder(context.Background(), w.order)
	require.NoError(t, err)
	require.NotNil(t, o.PaidUntil)
	require.True(t, o.PaidUntil.Equal(store.Timestamp(f.clock.Now())), "the paid end is now (no test clock: the real one), not %s", o.PaidUntil)
}

func (f *flowBundle) invoiceOf(t *testing.T, id uuid.UUID) store.Invoice {
	t.Helper()
	inv, err := store.Q(f.pool).GetInvoice(context.Background(), id)
	require.NoError(t, err)
	return inv
}

// requireToReturn checks that p failed with its amount captured, that it
// is listed as money to return, and that the books hold.
func (f *flowBundle) requireToReturn(t *testing.T, id uuid.UUID, amount string) {
	t.Helper()
	got := f.payment(t, id)
	require.Equal(t, "failed", got.Status)
	require.Equal(t, amount, got.CapturedAmount.String(), "the money the gateway took is recorded as captured")
	list, _, err := store.ListPayments(context.Background(), f.pool, store.PaymentFilter{ToReturn: true}, 100, 0)
	require.NoError(t, err)
	var listed bool
	for _, p := range list {
		listed = listed || p.ID == id
	}
	require.True(t, listed, "listed as money to return")
	testfixture.CheckMoneyInvariants(t, f.pool)
	rep, err := ledger.Verify(context.Background(), f.pool)
	require.NoError(t, err)
	require.True(t, rep.OK(), rep.String())
}

// Issue 35, finding 5: the order's first payment is refunded in full while
// the customer pays the renewal invoice. The refund cancels the invoice
// and fails its pending payments; the gateway's success that follows is
// captured to be returned — refused (the payment did not apply) and then
// acknowledged, never Internal — and so is a bank transfer confirmed
// after it. Before the fix the invoice stayed issued and the callback
// answered Internal, rolled back, forever.
func TestMoneyPaidIntoARefundedOrdersRenewalInvoiceIsCapturedToReturn(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	ctx := context.Background()
	w := f.renewalWorld(t)
	f.refundFirst(t, w)

	inv := f.invoiceOf(t, w.invoice)
	require.Equal(t, string(order.InvoiceCancelled), inv.Status, "the refund cancelled the renewal invoice")
	for _, p := range []store.Payment{w.byEpay, w.byBank} {
		require.Equal(t, "failed", f.payment(t, p.ID).Status, "and failed its pending payments")
	}
	_, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{InvoiceID: &w.invoice, GatewayInterfaceID: f.epayGW})
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)

	_, err = f.svc.HandleCallback(ctx, f.callbackOf(notify(w.byEpay.ID, "R1", "10.00")))
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "refused, not Internal: %v", err)
	require.Contains(t, err.Error(), "captured money to return")
	res, err := f.svc.HandleCallback(ctx, f.callbackOf(notify(w.byEpay.ID, "R1", "10.00")))
	require.NoError(t, err, "the repeat is acknowledged")
	require.True(t, res.Duplicate)
	f.requireToReturn(t, w.byEpay.ID, "10.00")

	confirmed, err := f.svc.ConfirmBankTransfer(f.admin, w.byBank.ID, "STATEMENT-9")
	require.NoError(t, err, "a confirmation answers the captured record")
	require.Equal(t, "10.00", confirmed.CapturedAmount.String())
	f.requireToReturn(t, w.byBank.ID, "10.00")

	inv = f.invoiceOf(t, w.invoice)
	require.Equal(t, string(order.InvoiceCancelled), inv.Status)
	require.True(t, inv.PaidAmount.IsZero(), "nothing applied to the invoice")
	ps, err := store.Q(f.pool).ListServicePeriods(ctx, w.order)
	require.NoError(t, err)
	require.Equal(t, store.PeriodCancelled, ps[1].Status, "the period is not renewed")
	require.Equal(t, "terminated", f.orderStatus(t, w.order))
}

// The same money found by the reconciler, and by an admin's status query.
func TestMoneyPaidIntoARefundedOrdersRenewalInvoiceIsFoundByTheReconcilerAndTheStatusQuery(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	f.fake.DropNotify(true)
	ctx := context.Background()

	w := f.renewalWorld(t)
	f.refundFirst(t, w)
	require.NoError(t, f.fake.Pay(w.byEpay.ID.String()))
	r := f.reconciler(reconcile.Options{BaseBackoff: reconcileAfter, LateCapture: 24 * time.Hour, Clock: f.clock.Now})
	f.clock.Advance(reconcileAfter + time.Minute)
	round, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, round.Captured, "%+v", round)
	f.requireToReturn(t, w.byEpay.ID, "10.00")

	q := f.renewalWorld(t)
	f.refundFirst(t, q)
	require.NoError(t, f.fake.Pay(q.byEpay.ID.String()))
	got, err := f.svc.QueryPaymentStatus(f.admin, q.byEpay.ID)
	require.NoError(t, err)
	require.Equal(t, "10.00", got.CapturedAmount.String())
	f.requireToReturn(t, q.byEpay.ID, "10.00")
}

// A pending payment of an invoice whose order was refunded — an invoice
// the ending does not cancel (it bills extras, not a period) — is not
// accepted: CreatePayment refuses a new one, and a success for the one
// pending is captured to be returned, the invoice left unpaid. (Planted:
// paying the invoice of a refunded order accepted — caught, both in
// CreatePayment and in the settlement.)
func TestPayingTheInvoiceOfARefundedOrderIsNotAccepted(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	ctx := context.Background()
	orderID := f.order(t, "20.00")
	first := f.pay(t, orderID)
	_, err := f.svc.HandleCallback(ctx, f.callbackOf(notify(first.ID, "O1", "20.00")))
	require.NoError(t, err)
	extras := f.invoice(t, &orderID, "5.00")
	pending, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{InvoiceID: &extras, GatewayInterfaceID: f.epayGW})
	require.NoError(t, err)
	_, err = f.svc.RefundPayment(f.admin, first.ID, "", "refund", store.RefundToBalance)
	require.NoError(t, err)
	require.Equal(t, "refunded", f.orderStatus(t, orderID))

	_, err = f.svc.CreatePayment(f.asAlice, payment.NewPayment{InvoiceID: &extras, GatewayInterfaceID: f.bankGW})
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.Contains(t, err.Error(), "refunded")

	_, err = f.svc.HandleCallback(ctx, f.callbackOf(notify(pending.ID, "X1", "5.00")))
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.Contains(t, err.Error(), "refunded")
	inv := f.invoiceOf(t, extras)
	require.Equal(t, string(order.InvoiceIssued), inv.Status, "the invoice took nothing")
	require.True(t, inv.PaidAmount.IsZero())
	f.requireToReturn(t, pending.ID, "5.00")
}

// Paying an invoice in full fails its other pending payments, whichever
// settles it. (Planted: paying an invoice leaving its other pending
// payments pending — caught.)
func TestPayingAnInvoiceFailsItsOtherPendingPayments(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	inv := f.invoice(t, nil, "12.00")
	byEpay, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{InvoiceID: &inv, GatewayInterfaceID: f.epayGW})
	require.NoError(t, err)
	byBank, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{InvoiceID: &inv, GatewayInterfaceID: f.bankGW})
	require.NoError(t, err)

	_, err = f.svc.ConfirmBankTransfer(f.admin, byBank.ID, "ST-1")
	require.NoError(t, err)
	require.Equal(t, string(order.InvoicePaid), f.invoiceOf(t, inv).Status)
	other := f.payment(t, byEpay.ID)
	require.Equal(t, "failed", other.Status, "the invoice is paid: its other pending payment fails")
	require.Contains(t, other.FailureReason, byBank.ID.String())
	testfixture.CheckMoneyInvariants(t, f.pool)
}
