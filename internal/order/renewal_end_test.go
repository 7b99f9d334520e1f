package order_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// renewing is a monthly order of alice that went active at start, with
// its renewal invoice of price issued for the second period (due when the
// first ends).
type renewing struct {
	order   uuid.UUID
	invoice store.Invoice
	start   time.Time
}

func (b *bundle) renewing(t *testing.T, price string) renewing {
	t.Helper()
	ctx := context.Background()
	start := store.Timestamp(time.Now().Add(-20 * 24 * time.Hour))
	var id uuid.UUID
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO orders (customer_id, total_amount, currency, status, billing_cycle, renewal_price, paid_at, description)
		VALUES ($1, 0, 'CNY', 'provisioning', 'monthly', $2, $3, 'VPS') RETURNING id`, b.alice, money.MustParse(price), start).Scan(&id))
	var inv store.Invoice
	require.NoError(t, store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		o, err := store.Q(tx).GetOrderForUpdate(ctx, id)
		require.NoError(t, err)
		moved, err := order.Transition(ctx, tx, o, order.Move{To: order.StatusActive, By: audit.System("test"), At: start})
		require.NoError(t, err)
		first, err := store.Q(tx).LatestServicePeriod(ctx, id)
		require.NoError(t, err)
		end := order.AddMonths(first.AnchorAt, 2, time.UTC)
		invs, err := order.IssueRenewals(ctx, tx, []order.Renewal{{
			Order: moved.Order, Latest: first, Last: first, Price: money.MustParse(price),
			Next: store.NewServicePeriod{OrderID: id, Seq: 2, StartsAt: first.EndsAt, EndsAt: end, AnchorAt: first.AnchorAt, AnchorMonths: 2, CreatedAt: start},
		}}, time.UTC, audit.System("test"), start)
		require.NoError(t, err)
		inv = invs[0]
		return nil
	}))
	return renewing{order: id, invoice: inv, start: start}
}

// pendingPayment inserts a pending gateway payment of amount of the
// renewal invoice through a new interface, as CreatePayment records one
// (carrying the invoice's order).
func (b *bundle) pendingPayment(t *testing.T, r renewing, amount string) store.Payment {
	t.Helper()
	gw := testfixture.GatewayInterface(t, b.pool, "epay")
	p, err := store.Q(b.pool).InsertGatewayPayment(context.Background(), store.InsertGatewayPaymentParams{
		ID:                 uuid.New(),
		OrderID:            &r.order,
		InvoiceID:          &r.invoice.ID,
		CustomerID:         b.alice,
		GatewayInterfaceID: &gw,
		Amount:             money.MustParse(amount),
		Currency:           "CNY",
		PaymentUrl:         "https://pay.example/x",
		NextReconcileAt:    time.Now(),
		CreatedAt:          time.Now(),
	})
	require.NoError(t, err)
	return p
}

func (b *bundle) invoiceOf(t *testing.T, id uuid.UUID) store.Invoice {
	t.Helper()
	inv, err := store.Q(b.pool).GetInvoice(context.Background(), id)
	require.NoError(t, err)
	return inv
}

func (b *bundle) paymentOf(t *testing.T, id uuid.UUID) store.Payment {
	t.Helper()
	p, err := store.Q(b.pool).GetPayment(context.Background(), id)
	require.NoError(t, err)
	return p
}

func (b *bundle) periodsOf(t *testing.T, id uuid.UUID) []store.ServicePeriod {
	t.Helper()
	ps, err := store.Q(b.pool).ListServicePeriods(context.Background(), id)
	require.NoError(t, err)
	return ps
}

// move moves the order as m says, in a transaction of its own.
func (b *bundle) move(t *testing.T, id uuid.UUID, m order.Move) (order.Moved, error) {
	t.Helper()
	ctx := context.Background()
	var out order.Moved
	err := store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		o, err := store.Q(tx).GetOrderForUpdate(ctx, id)
		require.NoError(t, err)
		if m.By == (audit.Actor{}) {
			m.By = audit.System("test")
		}
		if m.At.IsZero() {
			m.At = store.Timestamp(time.Now())
		}
		out, err = order.Transition(ctx, tx, o, m)
		return err
	})
	return out, err
}

// pay applies a payment of amount to invoice id through the one invoice
// writer, as a settlement or a balance payment does, with the order locked
// first. It writes no payment row: the money invariants do not hold after
// it, and the tests that use it do not check them.
func (b *bundle) pay(t *testing.T, r renewing, amount string) (order.InvoiceMoved, error) {
	t.Helper()
	ctx := context.Background()
	var out order.InvoiceMoved
	err := store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := store.Q(tx).GetOrderForUpdate(ctx, r.order)
		require.NoError(t, err)
		inv, err := store.Q(tx).GetInvoiceForUpdate(ctx, r.invoice.ID)
		require.NoError(t, err)
		out, err = order.InvoiceTransition(ctx, tx, inv, order.InvoiceMove{
			By: audit.System("test"), At: store.Timestamp(time.Now()), Pay: money.MustParse(amount), FailReason: "invoice paid by test",
		})
		return err
	})
	return out, err
}

// An order that ends, whichever final status it reaches, cancels its open
// renewal invoice in the same transaction, through the invoice writer: the
// invoice.cancel audit row, its pending payment failed and audited, the
// unpaid period cancelled; the periods are closed with the ending's
// outcome. (Planted: the move to refunded not closing the periods —
// caught; the ending not cancelling the invoice — caught.)
func TestAnOrderThatEndsCancelsItsOpenRenewalInvoiceAndFailsItsPayments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		to      order.Status
		m       order.Move
		outcome string
	}{
		{order.StatusRefunded, order.Move{To: order.StatusRefunded, Refunded: &order.OrderRefundedPayload{PaymentID: uuid.New(), RefundID: uuid.New()}}, store.OutcomeRefunded},
		{order.StatusTerminated, order.Move{To: order.StatusTerminated, EndReason: order.EndReasonAdmin}, store.OutcomeEnded},
		{order.StatusCompleted, order.Move{To: order.StatusCompleted, EndReason: order.EndReasonNotRenewed}, store.OutcomeEnded},
	} {
		t.Run(string(c.to), func(t *testing.T) {
			r := b.renewing(t, "10.00")
			pending := b.pendingPayment(t, r, "10.00")

			moved, err := b.move(t, r.order, c.m)
			require.NoError(t, err)
			require.Equal(t, string(c.to), moved.Order.Status)
			require.Len(t, moved.CancelledInvoices, 1)

			inv := b.invoiceOf(t, r.invoice.ID)
			require.Equal(t, string(order.InvoiceCancelled), inv.Status, "the ending cancels the open renewal invoice")
			p := b.paymentOf(t, pending.ID)
			require.Equal(t, "failed", p.Status, "and fails its pending payment")
			require.Contains(t, p.FailureReason, "the order ended")
			ps := b.periodsOf(t, r.order)
			require.Len(t, ps, 2)
			require.NotNil(t, ps[0].Outcome, "the paid period is closed")
			require.Equal(t, c.outcome, *ps[0].Outcome)
			require.Equal(t, store.PeriodCancelled, ps[1].Status)
			require.Equal(t, store.OutcomeUnpaid, *ps[1].Outcome)

			invAudit := b.audits(t, "invoice", r.invoice.ID.String())
			require.Equal(t, order.ActionInvoiceCancel, invAudit[len(invAudit)-1].Action)
			payAudit := b.audits(t, "payment", pending.ID.String())
			require.Equal(t, audit.ActionPaymentFail, payAudit[len(payAudit)-1].Action)
		})
	}
	testfixture.CheckMoneyInvariants(t, b.pool)
}

// A partly paid renewal invoice is the one exception: the ending leaves it
// (and its money) for an admin to decide.
func TestAnOrderThatEndsLeavesAPartlyPaidRenewalInvoiceForAnAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.renewing(t, "10.00")
	_, err := b.pay(t, r, "4.00")
	require.NoError(t, err)
	moved, err := b.move(t, r.order, order.Move{To: order.StatusTerminated, EndReason: order.EndReasonAdmin})
	require.NoError(t, err)
	require.Empty(t, moved.CancelledInvoices)
	inv := b.invoiceOf(t, r.invoice.ID)
	require.Equal(t, string(order.InvoiceIssued), inv.Status)
	require.Equal(t, "4.00", inv.PaidAmount.String())

	// Its period is closed with the order: paying the rest is a verdict
	// (FailedPrecondition), not a bug, and changes nothing.
	_, err = b.pay(t, r, "6.00")
	requireKind(t, err, apperr.FailedPrecondition)
	require.ErrorIs(t, err, order.ErrPeriodNotRenewable)
	require.Equal(t, "4.00", b.invoiceOf(t, r.invoice.ID).PaidAmount.String())
}

// An invoice paid in two parts is paid when the parts complete its amount,
// and its period is renewed; the other pending payment then fails. (Planted:
// only an exact single payment completing the invoice — caught; paying the
// invoice leaving its other pending payments pending — caught.)
func TestAnInvoicePaidInTwoPartsCompletesAndFailsTheOtherPendingPayments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.renewing(t, "10.00")
	other := b.pendingPayment(t, r, "10.00")

	first, err := b.pay(t, r, "4.00")
	require.NoError(t, err)
	require.Equal(t, string(order.InvoiceIssued), first.Invoice.Status, "a part leaves it issued")
	require.Empty(t, first.FailedPayments)
	require.Equal(t, "pending", b.paymentOf(t, other.ID).Status, "a part fails nothing")

	second, err := b.pay(t, r, "6.00")
	require.NoError(t, err)
	require.Equal(t, string(order.InvoicePaid), second.Invoice.Status, "the parts complete it")
	require.Equal(t, "10.00", second.Invoice.PaidAmount.String())
	require.NotNil(t, second.Invoice.PaidAt)
	require.Len(t, second.FailedPayments, 1)
	p := b.paymentOf(t, other.ID)
	require.Equal(t, "failed", p.Status, "paid in full: the other pending payment fails")
	require.Equal(t, "invoice paid by test", p.FailureReason)
	ps := b.periodsOf(t, r.order)
	require.Equal(t, store.PeriodPaid, ps[1].Status, "the period is renewed")
	require.Equal(t, store.OutcomeRenewed, *ps[0].Outcome)
}

// renewOnPaid resumes only an overdue suspension: an admin's stays when
// the renewal invoice is paid, and the payment still renews. (Planted: any
// suspension lifted by payment — caught.)
func TestPayingARenewalInvoiceResumesOnlyAnOverdueSuspension(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		reason string
		want   order.Status
	}{
		{order.SuspendReasonAdmin, order.StatusSuspended},
		{order.SuspendReasonOverdue, order.StatusActive},
	} {
		t.Run(c.reason, func(t *testing.T) {
			r := b.renewing(t, "10.00")
			_, err := b.move(t, r.order, order.Move{To: order.StatusSuspended, SuspendReason: c.reason})
			require.NoError(t, err)
			_, err = b.pay(t, r, "10.00")
			require.NoError(t, err)
			o := b.getOrder(t, r.order)
			require.Equal(t, string(c.want), o.Status)
			if c.want == order.StatusSuspended {
				require.Equal(t, order.SuspendReasonAdmin, o.SuspendReason)
			}
			require.Equal(t, store.PeriodPaid, b.periodsOf(t, r.order)[1].Status)
			var renewed order.ServiceRenewedPayload
			for _, e := range b.events(t, r.order) {
				if e.EventType == order.EventServiceRenewed {
					require.NoError(t, json.Unmarshal(e.Payload, &renewed))
				}
			}
			require.Equal(t, r.invoice.ID, renewed.InvoiceID)
			require.Equal(t, c.want == order.StatusActive, renewed.Resumed)
		})
	}
}

// An admin's CancelInvoice cancels an overdue renewal invoice as it does
// an issued one: the period is cancelled, the order stops renewing, the
// pending payment fails. (Planted: CancelInvoice of an overdue invoice not
// cancelling it — caught.)
func TestCancelInvoiceCancelsAnOverdueRenewalInvoice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, overdue := range []bool{false, true} {
		r := b.renewing(t, "10.00")
		pending := b.pendingPayment(t, r, "10.00")
		if overdue {
			b.exec(t, `UPDATE invoices SET status = 'overdue' WHERE id = $1`, r.invoice.ID)
		}
		got, err := b.svc.CancelInvoice(b.asAdmin, r.invoice.ID)
		require.NoError(t, err, "overdue %v", overdue)
		require.Equal(t, string(order.InvoiceCancelled), got.Status, "overdue %v", overdue)
		require.Equal(t, string(order.InvoiceCancelled), b.invoiceOf(t, r.invoice.ID).Status)
		require.Equal(t, "failed", b.paymentOf(t, pending.ID).Status)
		ps := b.periodsOf(t, r.order)
		require.Equal(t, store.PeriodCancelled, ps[1].Status)
		require.False(t, b.getOrder(t, r.order).Renews, "the order stops renewing")
	}
}

// A renewal invoice names what it renews (the order's description, or the
// order's id when it has none) and its period's dates in the billing time
// zone, UTC when none is given; it is due when the period starts, and its
// one line bills the period.
func TestARenewalInvoiceDescribesItsPeriodInTheBillingTimeZone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.renewing(t, "10.00")
	start := time.Date(2027, 3, 1, 20, 0, 0, 0, time.UTC)
	end := time.Date(2027, 4, 1, 20, 0, 0, 0, time.UTC)
	shanghai := time.FixedZone("UTC+8", 8*60*60)
	cases := []struct {
		name, description string
		loc               *time.Location
		want              string
	}{
		{"described, in UTC+8", "VPS", shanghai, "Renewal of VPS: period 3, 2027-03-02 to 2027-04-02"},
		{"described, in UTC", "VPS", time.UTC, "Renewal of VPS: period 3, 2027-03-01 to 2027-04-01"},
		{"no zone is UTC", "VPS", nil, "Renewal of VPS: period 3, 2027-03-01 to 2027-04-01"},
		{"no description", "", shanghai, "Renewal of order " + r.order.String() + ": period 3, 2027-03-02 to 2027-04-02"},
	}
	for _, c := range cases {
		err := store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
			o, err := store.Q(tx).GetOrderForUpdate(ctx, r.order)
			require.NoError(t, err)
			o.Description = c.description
			latest, err := store.Q(tx).LatestServicePeriod(ctx, r.order)
			require.NoError(t, err)
			invs, err := order.IssueRenewals(ctx, tx, []order.Renewal{{
				Order: o, Latest: latest, Last: latest, Price: money.MustParse("10.00"),
				Next: store.NewServicePeriod{OrderID: r.order, Seq: 3, StartsAt: start, EndsAt: end, AnchorAt: start, AnchorMonths: 1, CreatedAt: r.start},
			}}, c.loc, audit.System("test"), r.start)
			require.NoError(t, err, c.name)
			inv := invs[0]
			require.Equal(t, c.want, inv.Description, c.name)
			require.Equal(t, start, inv.DueAt.UTC(), c.name)
			lines, err := store.InvoiceLines(ctx, tx, []uuid.UUID{inv.ID})
			require.NoError(t, err)
			require.Len(t, lines[inv.ID], 1, "%s: one line, the period", c.name)
			l := lines[inv.ID][0]
			require.Equal(t, []any{c.want, int32(1), "10.00", "10.00"}, []any{l.Description, l.Quantity, l.UnitAmount.String(), l.Amount.String()}, c.name)
			require.Equal(t, start, l.PeriodStart.UTC(), c.name)
			require.Equal(t, end, l.PeriodEnd.UTC(), c.name)
			return errRollBack
		})
		require.ErrorIs(t, err, errRollBack, c.name)
	}
}

// Only money pays an invoice: a move to paid that carries no payment is
// refused as a transition the invoice writer does not make
// (ErrInvoiceTransition, FailedPrecondition), not left to the schema's
// paid-status CHECK, and changes nothing.
func TestAMoveToPaidWithoutAPaymentIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	r := b.renewing(t, "10.00")
	err := store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := store.Q(tx).GetOrderForUpdate(ctx, r.order)
		require.NoError(t, err)
		inv, err := store.Q(tx).GetInvoiceForUpdate(ctx, r.invoice.ID)
		require.NoError(t, err)
		_, err = order.InvoiceTransition(ctx, tx, inv, order.InvoiceMove{
			To: order.InvoicePaid, By: audit.System("test"), At: store.Timestamp(time.Now()), Pay: money.Zero(),
		})
		return err
	})
	require.ErrorIs(t, err, order.ErrInvoiceTransition)
	requireKind(t, err, apperr.FailedPrecondition)
	require.Equal(t, "issued", b.invoiceOf(t, r.invoice.ID).Status)
}
