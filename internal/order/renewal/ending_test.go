package renewal_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/order/renewal"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// The billing run pays a renewal invoice from the balance down to exactly
// −credit_limit, and not a cent further. (Planted: the credit limit off by
// one cent on auto-pay — caught, either way.)
func TestAutoPayUsesTheCreditLimitToTheCent(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.March, 1, 0), defaults())
	exact := testfixture.Customer(t, b.pool)
	short := testfixture.Customer(t, b.pool)
	// Balance 2.00, limit 8.00: 10.00 is covered exactly; 9.99 is not.
	for c, limit := range map[string]string{exact.String(): "8.00", short.String(): "7.99"} {
		_, err := b.pool.Exec(context.Background(), `UPDATE customers SET credit_limit = $2 WHERE id = $1`, c, money.MustParse(limit))
		require.NoError(t, err)
	}
	b.topUp(t, exact, "2.00")
	b.topUp(t, short, "2.00")
	paid := b.activeOrder(t, exact, "monthly", "10.00")
	unpaid := b.activeOrder(t, short, "monthly", "10.00")
	b.clock.Set(at(time.March, 25, 0))
	r := b.pass(t)
	require.Equal(t, 2, r.Issued)
	require.Equal(t, 1, r.AutoPaid)
	require.Equal(t, store.PeriodPaid, b.periods(t, paid)[1].Status, "covered to the cent by the credit limit")
	require.Equal(t, store.PeriodUnpaid, b.periods(t, unpaid)[1].Status, "one cent short")
	acct, err := store.GetBalanceAccount(context.Background(), b.pool, exact)
	require.NoError(t, err)
	require.Equal(t, "-8.00", acct.Balance.String())
	// A later pass (the balance scan) does not pay it either.
	b.clock.Set(at(time.March, 26, 0))
	require.Zero(t, b.pass(t).AutoPaid)
	b.checkMoney(t)
}

// A partly paid renewal invoice past its termination day is not treated
// as unpaid: the order is neither terminated nor its invoice cancelled
// (the money would be stranded); it is left for an admin, counted in the
// overview. (Planted: treated as unpaid — caught.)
func TestAPartlyPaidRenewalInvoicePastTerminationIsLeftForAnAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.March, 1, 0), defaults())
	id := b.activeOrder(t, testfixture.Customer(t, b.pool), "monthly", "10.00")
	b.clock.Set(at(time.March, 30, 0))
	require.Equal(t, 1, b.pass(t).Issued)
	inv := *b.periods(t, id)[1].InvoiceID
	_, err := b.pool.Exec(context.Background(), `UPDATE invoices SET paid_amount = 4 WHERE id = $1`, inv)
	require.NoError(t, err)
	// The metric counts it from the termination day on, not before.
	// (Planted: the window `now - TerminateAfter` as `now + TerminateAfter`
	// — caught.)
	b.clock.Set(at(time.April, 14, 23)) // an hour before the termination day
	n, err := b.run.PartlyPaidPastTermination(context.Background())
	require.NoError(t, err)
	require.Zero(t, n, "not yet past the termination day")

	b.clock.Set(at(time.April, 20, 0)) // 19 days past due
	r := b.pass(t)
	require.Zero(t, r.Terminated)
	require.Equal(t, string(order.StatusSuspended), b.order(t, id).Status, "suspended, not terminated")
	got := b.invoice(t, inv)
	require.Equal(t, string(order.InvoiceOverdue), got.Status, "not cancelled")
	require.Equal(t, "4.00", got.PaidAmount.String())
	require.Equal(t, store.PeriodUnpaid, b.periods(t, id)[1].Status)
	require.Zero(t, b.pass(t).Terminated, "nor on a later pass")

	svc := order.NewService(b.pool, []string{"CNY"}, nil, nil, slog.New(slog.DiscardHandler))
	ov, err := svc.RenewalOverview(b.admin(t), b.clock.Now(), 30*24*time.Hour, time.Duration(defaults().TerminateAfterDays)*24*time.Hour)
	require.NoError(t, err)
	require.EqualValues(t, 1, ov.PartlyPaidPastTerminationCount)
	require.Len(t, ov.PartlyPaidPastTermination, 1)
	require.Equal(t, id, ov.PartlyPaidPastTermination[0].Order.ID)
	// The metric renewal_partly_paid_past_termination reads the run's count.
	n, err = b.run.PartlyPaidPastTermination(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	off := renewal.New(b.pool, renewal.Options{Clock: b.clock.Now, TerminateAfterDays: 0})
	n, err = off.PartlyPaidPastTermination(context.Background())
	require.NoError(t, err)
	require.Zero(t, n, "0 while the run ends no service")
}

// A renewal paid from the balance carries its order, as a gateway payment
// of the invoice does, so a refund treats it alike: refunded in full while
// its period is the current one, the service ends now (terminated) and its
// open renewal invoice is cancelled (docs/operations.md, "Refunds and
// periods").
func TestARefundOfABalancePaidRenewalRefundsTheOrderLikeAGatewayOne(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.March, 1, 0), defaults())
	customer := testfixture.Customer(t, b.pool)
	b.topUp(t, customer, "10.00")
	id := b.activeOrder(t, customer, "monthly", "10.00")
	b.clock.Set(at(time.March, 25, 0))
	r := b.pass(t)
	require.Equal(t, 1, r.AutoPaid)
	renewal := *b.periods(t, id)[1].InvoiceID
	pays, _, err := store.ListPayments(context.Background(), b.pool, store.PaymentFilter{OrderID: &id}, 10, 0)
	require.NoError(t, err)
	require.Len(t, pays, 1, "the balance payment of the renewal invoice carries the order")
	require.Equal(t, renewal, *pays[0].InvoiceID)

	// The next renewal invoice is issued, unpaid (the balance is spent).
	b.clock.Set(at(time.April, 25, 0))
	require.Equal(t, 1, b.pass(t).Issued)
	next := *b.periods(t, id)[2].InvoiceID

	pay := payment.NewService(b.pool, slog.New(slog.DiscardHandler), payment.WithClock(b.clock.Now))
	res, err := pay.RefundPayment(b.admin(t), pays[0].ID, "", "goodwill", "")
	require.NoError(t, err)
	require.Equal(t, "refunded", res.Payment.Status)
	require.Equal(t, string(order.StatusTerminated), b.order(t, id).Status, "a full refund of the current period's payment ends the service, as for a gateway payment")
	require.Equal(t, string(order.InvoiceCancelled), b.invoice(t, next).Status, "and cancels its open renewal invoice")
	ps := b.periods(t, id)
	require.Equal(t, store.OutcomeEnded, *ps[1].Outcome)
	require.Equal(t, store.PeriodCancelled, ps[2].Status)
	b.checkMoney(t)
}

// Cancelling a renewal invoice by hand turns the order's renewal off (its
// service ends at its paid end) with an order.renewal audit row, by the
// admin who cancelled, naming the invoice (issue 38, §4: before, a CTE in
// the query turned it off with no row). The service then ends at the
// paid end and no further invoice is issued: before, the end step read
// the cancelled period as the last and never ended it. (Planted: the audit
// row left out of cancelUnpaidPeriod; the end step reading the cancelled
// period — each caught.)
func TestCancellingARenewalInvoiceTurnsRenewalOffWithAnAuditRow(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.March, 1, 0), defaults())
	id := b.activeOrder(t, testfixture.Customer(t, b.pool), "monthly", "10.00")
	b.clock.Set(at(time.March, 25, 0))
	require.Equal(t, 1, b.pass(t).Issued)
	inv := *b.periods(t, id)[1].InvoiceID
	require.True(t, b.order(t, id).Renews)

	svc := order.NewService(b.pool, []string{"CNY"}, nil, b.clock.Now, slog.New(slog.DiscardHandler))
	ctx := b.admin(t)
	_, err := svc.CancelInvoice(ctx, inv)
	require.NoError(t, err)
	require.False(t, b.order(t, id).Renews)
	require.Equal(t, store.PeriodCancelled, b.periods(t, id)[1].Status)
	var kind, before, after, note string
	require.NoError(t, b.pool.QueryRow(context.Background(), `
		SELECT actor_kind, before->>'renews', after->>'renews', after->>'note' FROM audit_log
		WHERE entity_type = 'order' AND entity_id = $1 AND action = $2`, id.String(), order.ActionOrderRenewal).Scan(&kind, &before, &after, &note))
	require.Equal(t, "admin", kind)
	require.Equal(t, "true", before)
	require.Equal(t, "false", after)
	require.Contains(t, note, inv.String())

	// At the paid end the service ends (completed), with no second
	// renewal row and no invoice.
	b.clock.Set(at(time.April, 1, 1))
	r := b.pass(t)
	require.Equal(t, 1, r.Ended)
	require.Zero(t, r.Issued)
	require.Equal(t, string(order.StatusCompleted), b.order(t, id).Status)
	var rows int
	require.NoError(t, b.pool.QueryRow(context.Background(), `
		SELECT count(*) FROM audit_log WHERE entity_type = 'order' AND entity_id = $1 AND action = $2`, id.String(), order.ActionOrderRenewal).Scan(&rows))
	require.Equal(t, 1, rows)
	b.checkMoney(t)
}

// admin is a context of a new admin user (refunds name who asked).
func (b *bundle) admin(t *testing.T) context.Context {
	t.Helper()
	var id uuid.UUID
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`INSERT INTO admin_users (username, password_hash) VALUES ($1, 'x') RETURNING id`, "admin-"+uuid.NewString()[:8]).Scan(&id))
	return auth.WithPrincipal(context.Background(), auth.Principal{Role: auth.RoleAdmin, ID: id, Kind: auth.KindSession})
}

// A renewal invoice cancelled (renewal turned off with it), then renewal
// turned back on before the paid end: the next pass issues a new invoice
// for the same next period, once; the cancelled period's row is reissued
// for it (same seq and start, the new invoice, an order.period_reissue
// audit row naming both invoices); paying it extends the service by
// exactly one period and the next renewal follows on. Before, the run read
// the cancelled period as the order's last and issued nothing, pass after
// pass, and the service neither renewed nor ended. (Planted: the run
// reading the latest period, cancelled, again — caught.)
func TestARenewalTurnedBackOnAfterItsInvoiceWasCancelledIsInvoicedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.March, 1, 0), defaults())
	customer := testfixture.Customer(t, b.pool)
	id := b.activeOrder(t, customer, "monthly", "10.00")
	b.clock.Set(at(time.March, 25, 0))
	require.Equal(t, 1, b.pass(t).Issued)
	cancelled := *b.periods(t, id)[1].InvoiceID

	svc := order.NewService(b.pool, []string{"CNY"}, nil, b.clock.Now, slog.New(slog.DiscardHandler))
	_, err := svc.CancelInvoice(b.admin(t), cancelled)
	require.NoError(t, err)
	require.False(t, b.order(t, id).Renews)
	o, err := svc.SetOrderRenewal(asCustomer(customer), id, true)
	require.NoError(t, err)
	require.True(t, o.Renews)

	b.clock.Set(at(time.March, 26, 0))
	require.Equal(t, 1, b.pass(t).Issued, "a new invoice for the same next period")
	require.Zero(t, b.pass(t).Issued, "once")
	ps := b.periods(t, id)
	require.Len(t, ps, 2, "the cancelled period's row is reissued, not a second row")
	require.EqualValues(t, 2, ps[1].Seq)
	require.Equal(t, store.PeriodUnpaid, ps[1].Status)
	require.Nil(t, ps[1].Outcome)
	require.Equal(t, at(time.April, 1, 0), ps[1].StartsAt.UTC())
	require.Equal(t, at(time.May, 1, 0), ps[1].EndsAt.UTC())
	reissued := *ps[1].InvoiceID
	require.NotEqual(t, cancelled, reissued)
	inv := b.invoice(t, reissued)
	require.Equal(t, string(order.InvoiceIssued), inv.Status)
	require.Equal(t, "10.00", inv.Amount.String())
	require.Equal(t, at(time.April, 1, 0), inv.DueAt.UTC())
	require.Equal(t, string(order.InvoiceCancelled), b.invoice(t, cancelled).Status, "the cancelled invoice stays cancelled")
	var before, after string
	require.NoError(t, b.pool.QueryRow(context.Background(), `
		SELECT before->>'invoice_id', after->>'invoice_id' FROM audit_log
		WHERE entity_type = 'order' AND entity_id = $1 AND action = $2`, id.String(), order.ActionOrderPeriodReissue).Scan(&before, &after))
	require.Equal(t, cancelled.String(), before)
	require.Equal(t, reissued.String(), after)

	// Paid from the balance: one period more, nothing billed twice.
	b.topUp(t, customer, "10.00")
	b.clock.Set(at(time.March, 27, 0))
	require.Equal(t, 1, b.pass(t).AutoPaid)
	ps = b.periods(t, id)
	require.Equal(t, store.PeriodPaid, ps[1].Status)
	require.Equal(t, store.OutcomeRenewed, *ps[0].Outcome)
	var paidFor time.Duration
	for _, p := range ps {
		if p.Status == store.PeriodPaid {
			paidFor += p.EndsAt.Sub(p.StartsAt)
		}
	}
	require.Equal(t, at(time.May, 1, 0), b.order(t, id).PaidUntil.UTC(), "extended by exactly one period")
	require.Equal(t, b.order(t, id).PaidUntil.UTC(), ps[0].StartsAt.Add(paidFor).UTC(), "the paid end is the sum of the paid periods")
	var invoices int
	var billed string
	require.NoError(t, b.pool.QueryRow(context.Background(), `
		SELECT count(*), coalesce(sum(paid_amount), 0)::text FROM invoices WHERE order_id = $1`, id).Scan(&invoices, &billed))
	require.Equal(t, 2, invoices)
	require.Equal(t, "10.00", billed)
	acct, err := store.GetBalanceAccount(context.Background(), b.pool, customer)
	require.NoError(t, err)
	require.Equal(t, "0.00", acct.Balance.String())

	// The renewals go on: the next period follows the reissued one.
	b.clock.Set(at(time.April, 24, 0))
	require.Equal(t, 1, b.pass(t).Issued)
	ps = b.periods(t, id)
	require.Len(t, ps, 3)
	require.Equal(t, at(time.May, 1, 0), ps[2].StartsAt.UTC())
	require.Equal(t, at(time.June, 1, 0), ps[2].EndsAt.UTC())
	b.checkMoney(t)
}

// Renewal turned back on once the paid end has passed is refused
// (FailedPrecondition), whether the billing run has ended the service yet
// or not, and changes nothing: the service ended at its paid end; a new
// order buys it again. Before, an order the run had not ended yet took
// the flag, and the run then neither renewed it nor ended it. (Planted:
// the check of the paid end left out — caught.)
func TestRenewalTurnedBackOnAfterThePaidEndIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.March, 1, 0), defaults())
	customer := testfixture.Customer(t, b.pool)
	id := b.activeOrder(t, customer, "monthly", "10.00")
	b.clock.Set(at(time.March, 25, 0))
	require.Equal(t, 1, b.pass(t).Issued)
	svc := order.NewService(b.pool, []string{"CNY"}, nil, b.clock.Now, slog.New(slog.DiscardHandler))
	_, err := svc.CancelInvoice(b.admin(t), *b.periods(t, id)[1].InvoiceID)
	require.NoError(t, err)

	// Past the paid end, before the pass that ends the service.
	b.clock.Set(at(time.April, 1, 1))
	_, err = svc.SetOrderRenewal(asCustomer(customer), id, true)
	require.Equal(t, connect.CodeFailedPrecondition, codeOf(err), "%v", err)
	require.False(t, b.order(t, id).Renews)
	r := b.pass(t)
	require.Equal(t, 1, r.Ended)
	require.Zero(t, r.Issued)
	require.Equal(t, string(order.StatusCompleted), b.order(t, id).Status)

	// Ended: refused too.
	_, err = svc.SetOrderRenewal(asCustomer(customer), id, true)
	require.Equal(t, connect.CodeFailedPrecondition, codeOf(err), "%v", err)
	require.Zero(t, b.pass(t))
	require.Len(t, b.periods(t, id), 2)
	b.checkMoney(t)
}

// A paid period followed by one whose invoice was cancelled can be
// extended by an admin (before, the cancelled period was read as the last
// and the extension refused as "already invoiced, unpaid"); renewal turned
// back on then bills the cancelled period again from the new end.
// (Planted: the extension reading the latest period, cancelled — caught.)
func TestAPeriodBeforeACancelledOneCanBeExtendedAndRenewsFromTheNewEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.March, 1, 0), defaults())
	customer := testfixture.Customer(t, b.pool)
	id := b.activeOrder(t, customer, "monthly", "10.00")
	b.clock.Set(at(time.March, 25, 0))
	require.Equal(t, 1, b.pass(t).Issued)
	svc := order.NewService(b.pool, []string{"CNY"}, nil, b.clock.Now, slog.New(slog.DiscardHandler))
	admin := b.admin(t)
	_, err := svc.CancelInvoice(admin, *b.periods(t, id)[1].InvoiceID)
	require.NoError(t, err)
	_, p, err := svc.ExtendServicePeriod(admin, id, at(time.April, 11, 0), "goodwill")
	require.NoError(t, err)
	require.EqualValues(t, 1, p.Seq)
	require.Equal(t, at(time.April, 11, 0), b.order(t, id).PaidUntil.UTC())
	_, err = svc.SetOrderRenewal(asCustomer(customer), id, true)
	require.NoError(t, err)
	b.clock.Set(at(time.April, 4, 0))
	require.Equal(t, 1, b.pass(t).Issued)
	ps := b.periods(t, id)
	require.Len(t, ps, 2)
	require.Equal(t, store.PeriodUnpaid, ps[1].Status)
	require.Equal(t, at(time.April, 11, 0), ps[1].StartsAt.UTC(), "from the new end")
	require.Equal(t, at(time.May, 11, 0), ps[1].EndsAt.UTC())
	require.Equal(t, at(time.April, 11, 0), b.invoice(t, *ps[1].InvoiceID).DueAt.UTC())
	b.checkMoney(t)
}
