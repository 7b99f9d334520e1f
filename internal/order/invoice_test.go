package order_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
)

func TestCreateInvoiceForAnOrderTakesItsCustomerAndCurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := b.orderIn(t, b.asAlice, "10.00", "USD")
	due := future()

	inv, err := b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{
		OrderID: &o.ID, Amount: money.MustParse("25.50"), Description: "setup fee", DueAt: due,
	})
	require.NoError(t, err, "the amount need not match what is unpaid")
	require.Equal(t, b.alice, inv.CustomerID)
	require.Equal(t, o.ID, *inv.OrderID)
	require.Equal(t, "USD", inv.Currency)
	require.Equal(t, "issued", inv.Status)
	require.Equal(t, "25.50", inv.Amount.String())
	require.Equal(t, "0.00", inv.PaidAmount.String())
	require.Equal(t, "setup fee", inv.Description)
	require.NotNil(t, inv.IssuedAt)
	require.WithinDuration(t, due, *inv.DueAt, time.Microsecond)
	require.Regexp(t, `^INV-\d{4}-000001$`, *inv.Number, "the first of its year's series")
	audits := b.audits(t, "invoice", inv.ID.String())
	require.Len(t, audits, 1)
	require.Equal(t, order.ActionInvoiceCreate, audits[0].Action)
	require.Equal(t, "admin", audits[0].ActorKind)

	same, err := b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{OrderID: &o.ID, Amount: money.MustParse("1.00"), Currency: "USD", DueAt: due})
	require.NoError(t, err, "naming the order's own currency is fine")
	require.NotEqual(t, *inv.Number, *same.Number)

	for name, in := range map[string]order.NewInvoice{
		"OtherCurrency":  {OrderID: &o.ID, Amount: money.MustParse("1.00"), Currency: "CNY", DueAt: due},
		"ZeroAmount":     {OrderID: &o.ID, Amount: money.Zero(), DueAt: due},
		"NegativeAmount": {OrderID: &o.ID, Amount: money.MustParse("-1.00"), DueAt: due},
		"DueInThePast":   {OrderID: &o.ID, Amount: money.MustParse("1.00"), DueAt: time.Now().Add(-time.Minute)},
		"NoTarget":       {Amount: money.MustParse("1.00"), DueAt: due},
		"BothTargets":    {OrderID: &o.ID, CustomerID: &b.alice, Amount: money.MustParse("1.00"), DueAt: due},
	} {
		_, err := b.svc.CreateInvoice(b.asAdmin, in)
		requireKind(t, err, apperr.InvalidArgument, name)
	}

	_, err = b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{OrderID: ptr(uuid.New()), Amount: money.MustParse("1.00"), DueAt: due})
	requireKind(t, err, apperr.NotFound)
	_, err = b.svc.CreateInvoice(b.asAlice, order.NewInvoice{OrderID: &o.ID, Amount: money.MustParse("1.00"), DueAt: due})
	requireKind(t, err, apperr.PermissionDenied)
	_, err = b.svc.CreateInvoice(b.anonymous, order.NewInvoice{OrderID: &o.ID, Amount: money.MustParse("1.00"), DueAt: due})
	requireKind(t, err, apperr.Unauthenticated)

	_, err = b.svc.CancelOrder(b.asAlice, o.ID)
	require.NoError(t, err)
	_, err = b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{OrderID: &o.ID, Amount: money.MustParse("1.00"), DueAt: due})
	requireKind(t, err, apperr.InvalidArgument, "no invoice for a cancelled order")
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM invoices`))
}

func TestCreateInvoiceForACustomerChecksTheCurrency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	due := future()

	inv, err := b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{CustomerID: &b.bob, Amount: money.MustParse("9.99"), DueAt: due})
	require.NoError(t, err)
	require.Equal(t, b.bob, inv.CustomerID)
	require.Nil(t, inv.OrderID)
	require.Equal(t, "CNY", inv.Currency, "empty takes the customer's balance currency")

	inv, err = b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{CustomerID: &b.bob, Amount: money.MustParse("9.99"), Currency: "USD", DueAt: due})
	require.NoError(t, err)
	require.Equal(t, "USD", inv.Currency)

	_, err = b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{CustomerID: &b.bob, Amount: money.MustParse("9.99"), Currency: "EUR", DueAt: due})
	requireKind(t, err, apperr.InvalidArgument, "EUR is not accepted")
	_, err = b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{CustomerID: ptr(uuid.New()), Amount: money.MustParse("9.99"), DueAt: due})
	requireKind(t, err, apperr.NotFound)
}

func TestInvoicesAreScopedToTheirCustomer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	o := b.order(t, b.asAlice, "10.00")
	due := future()
	forOrder, err := b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{OrderID: &o.ID, Amount: money.MustParse("10.00"), DueAt: due})
	require.NoError(t, err)
	loose, err := b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{CustomerID: &b.alice, Amount: money.MustParse("3.00"), DueAt: due})
	require.NoError(t, err)
	bobs, err := b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{CustomerID: &b.bob, Amount: money.MustParse("4.00"), DueAt: due})
	require.NoError(t, err)

	got, lines, err := b.svc.GetInvoice(b.asAlice, forOrder.ID)
	require.NoError(t, err)
	require.Equal(t, forOrder, got)
	require.Len(t, lines, 1)
	_, _, err = b.svc.GetInvoice(b.asBob, forOrder.ID)
	requireKind(t, err, apperr.NotFound, "another customer's invoice reads as none")
	_, _, err = b.svc.GetInvoice(b.asAlice, uuid.New())
	requireKind(t, err, apperr.NotFound)
	_, _, err = b.svc.GetInvoice(b.anonymous, forOrder.ID)
	requireKind(t, err, apperr.Unauthenticated)

	rows, page, err := b.svc.ListInvoices(b.asAlice, store.InvoiceFilter{}, 0, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(2), page.Total)
	require.Equal(t, []uuid.UUID{loose.ID, forOrder.ID}, []uuid.UUID{rows[0].ID, rows[1].ID}, "newest first")

	_, _, err = b.svc.ListInvoices(b.asAlice, store.InvoiceFilter{CustomerID: &b.bob}, 1, 10)
	requireKind(t, err, apperr.PermissionDenied)

	rows, _, err = b.svc.ListInvoices(b.asAlice, store.InvoiceFilter{OrderID: &o.ID}, 1, 10)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, forOrder.ID, rows[0].ID)

	rows, _, err = b.svc.ListInvoices(b.asBob, store.InvoiceFilter{OrderID: &o.ID}, 1, 10)
	require.NoError(t, err)
	require.Empty(t, rows, "bob cannot reach alice's invoices through a filter")

	_, page, err = b.svc.ListInvoices(b.asAdmin, store.InvoiceFilter{}, 1, 10)
	require.NoError(t, err)
	require.Equal(t, uint64(3), page.Total)
	rows, _, err = b.svc.ListInvoices(b.asAdmin, store.InvoiceFilter{CustomerID: &b.bob, Status: ptr("issued")}, 1, 10)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, bobs.ID, rows[0].ID)
}

// invoicePayment inserts a pending gateway payment of an invoice.
func (b *bundle) invoicePayment(t *testing.T, inv store.Invoice, gateway uuid.UUID) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	require.NoError(t, b.pool.QueryRow(context.Background(), `INSERT INTO payments
		(invoice_id, order_id, customer_id, method, gateway_interface_id, amount, currency, status)
		VALUES ($1, $2, $3, 'gateway', $4, $5, $6, 'pending') RETURNING id`,
		inv.ID, inv.OrderID, inv.CustomerID, gateway, inv.Amount, inv.Currency).Scan(&id))
	return id
}

func TestCancelInvoiceCancelsAnUnpaidInvoiceAndFailsItsPendingPayments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	inv, err := b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{CustomerID: &b.alice, Amount: money.MustParse("8.00"), DueAt: future()})
	require.NoError(t, err)
	gw := testfixture.GatewayInterface(t, b.pool, "epay")
	pending := b.invoicePayment(t, inv, gw)

	_, err = b.svc.CancelInvoice(b.asAlice, inv.ID)
	requireKind(t, err, apperr.PermissionDenied)

	c, err := b.svc.CancelInvoice(b.asAdmin, inv.ID)
	require.NoError(t, err)
	require.Equal(t, "cancelled", c.Status)
	pay, err := store.Q(b.pool).GetPayment(context.Background(), pending)
	require.NoError(t, err)
	require.Equal(t, "failed", pay.Status)
	require.Equal(t, "invoice cancelled", pay.FailureReason)
	audits := b.audits(t, "invoice", inv.ID.String())
	require.Len(t, audits, 2)
	require.Equal(t, order.ActionInvoiceCancel, audits[1].Action)
	require.Equal(t, "issued", audits[1].Before["status"])
	require.Equal(t, "cancelled", audits[1].After["status"])

	_, err = b.svc.CancelInvoice(b.asAdmin, inv.ID)
	requireKind(t, err, apperr.InvalidArgument, "already cancelled")
	_, err = b.svc.CancelInvoice(b.asAdmin, uuid.New())
	requireKind(t, err, apperr.NotFound)

	overdue, err := b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{CustomerID: &b.alice, Amount: money.MustParse("8.00"), DueAt: future()})
	require.NoError(t, err)
	b.exec(t, `UPDATE invoices SET status = 'overdue' WHERE id = $1`, overdue.ID)
	_, err = b.svc.CancelInvoice(b.asAdmin, overdue.ID)
	require.NoError(t, err, "an overdue invoice can be cancelled")
}

func TestCancelInvoiceRefusesPaidAndPartlyPaidInvoices(t *testing.T) {
	t.Parallel()
	b := setup(t)
	paid, err := b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{CustomerID: &b.alice, Amount: money.MustParse("8.00"), DueAt: future()})
	require.NoError(t, err)
	b.exec(t, `UPDATE invoices SET status = 'paid', paid_amount = amount, paid_at = now() WHERE id = $1`, paid.ID)
	_, err = b.svc.CancelInvoice(b.asAdmin, paid.ID)
	requireKind(t, err, apperr.InvalidArgument)
	require.Contains(t, err.Error(), "paid")

	partly, err := b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{CustomerID: &b.alice, Amount: money.MustParse("8.00"), DueAt: future()})
	require.NoError(t, err)
	b.exec(t, `UPDATE invoices SET paid_amount = 3 WHERE id = $1`, partly.ID)
	_, err = b.svc.CancelInvoice(b.asAdmin, partly.ID)
	requireKind(t, err, apperr.InvalidArgument)
	require.Contains(t, err.Error(), "partly paid")
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM invoices WHERE status <> 'cancelled'`))
}
