package order_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
)

// errRollBack ends a transaction a test only looks into.
var errRollBack = errors.New("rolled back on purpose")

// The credit-limit rule is stated three times, and the three must agree to
// the cent: in Go, balance.Covers, which the billing run's
// PayInvoiceFromBalance asks under the locks; set-wise in SQL, the billing
// run's scan of the renewal invoices the balance now covers
// (ListUnpaidPeriodsCoveredByBalance: balance + credit_limit >= amount
// due); and in the schema, customers_balance_check (balance >=
// -credit_limit), the database's last word. Each case is a renewal invoice
// of its own, on the boundaries: exactly covered and a cent short, with
// and without a credit limit, from a negative balance, of a partly paid
// invoice. A disabled customer is covered by the arithmetic (the CHECK)
// but never charged by the billing run (the scan and Go).
func TestTheCreditLimitRuleAgreesInGoTheBillingScanAndTheSchema(t *testing.T) {
	t.Parallel()
	db := testdb.Pool(t)
	ctx := context.Background()
	cases := []struct {
		name            string
		balance, credit string
		amount, paid    string
		disabled        bool
		covered         bool
	}{
		{"the balance alone, exactly", "10.00", "0.00", "10.00", "0.00", false, true},
		{"the balance alone, a cent short", "9.99", "0.00", "10.00", "0.00", false, false},
		{"no balance, no credit limit", "0.00", "0.00", "0.01", "0.00", false, false},
		{"balance and credit limit, exactly", "4.00", "6.00", "10.00", "0.00", false, true},
		{"balance and credit limit, a cent short", "4.00", "5.99", "10.00", "0.00", false, false},
		{"the credit limit alone, exactly", "0.00", "10.00", "10.00", "0.00", false, true},
		{"a negative balance, exactly", "-3.00", "13.00", "10.00", "0.00", false, true},
		{"a negative balance, a cent short", "-3.01", "13.00", "10.00", "0.00", false, false},
		{"a balance at the credit limit already", "-5.00", "5.00", "0.01", "0.00", false, false},
		{"partly paid, the rest exactly", "4.00", "0.00", "10.00", "6.00", false, true},
		{"partly paid, the rest a cent short", "4.00", "0.00", "10.00", "5.99", false, false},
		{"partly paid, a negative balance and credit, exactly", "-1.00", "2.00", "10.00", "9.00", false, true},
		{"partly paid, a negative balance and credit, a cent short", "-1.01", "2.00", "10.00", "9.00", false, false},
		{"plenty, but the customer is disabled", "100.00", "0.00", "10.00", "0.00", true, true},
	}
	rows := make([]*renewalRows, len(cases))
	for i, c := range cases {
		rows[i] = &renewalRows{status: order.StatusActive, renews: true, balance: c.balance, credit: c.credit,
			amount: c.amount, paid: c.paid, disabled: c.disabled, paidUntil: periodEnd}
		seedRenewal(t, db, rows[i])
	}
	now := periodEnd.Add(24 * time.Hour)
	scanned, err := store.Q(db).ListUnpaidPeriodsCoveredByBalance(ctx, store.ListUnpaidPeriodsCoveredByBalanceParams{
		DueBefore: now, LiveStatuses: order.LiveStatuses(), MaxRows: 100,
	})
	require.NoError(t, err)

	for i, c := range cases {
		r := rows[i]
		charged := c.covered && !c.disabled
		require.Equal(t, charged, slices.Contains(scanned, r.order), "%s: the billing scan (SQL)", c.name)
		require.Equal(t, charged, payFromBalance(t, db, r, now), "%s: PayInvoiceFromBalance (balance.Covers)", c.name)
		require.Equal(t, c.covered, checkAllows(t, db, r), "%s: customers_balance_check", c.name)
	}
}

// payFromBalance is whether order.PayInvoiceFromBalance pays r's invoice,
// locked customer → order → invoice as the billing run does; nothing is
// kept.
func payFromBalance(t *testing.T, db *pgxpool.Pool, r *renewalRows, now time.Time) bool {
	t.Helper()
	ctx := context.Background()
	var paid bool
	err := store.WithTx(ctx, db, func(tx pgx.Tx) error {
		acct, err := store.LockBalanceAccount(ctx, tx, r.customer)
		require.NoError(t, err)
		_, err = store.Q(tx).GetOrderForUpdate(ctx, r.order)
		require.NoError(t, err)
		inv, err := store.Q(tx).GetInvoiceForUpdate(ctx, r.invoice)
		require.NoError(t, err)
		paid, err = order.PayInvoiceFromBalance(ctx, tx, acct, inv, audit.System("test"), now)
		require.NoError(t, err)
		return errRollBack
	})
	require.ErrorIs(t, err, errRollBack)
	return paid
}

// checkAllows is whether the schema lets r's customer pay what r's invoice
// still asks (customers_balance_check); nothing is kept.
func checkAllows(t *testing.T, db *pgxpool.Pool, r *renewalRows) bool {
	t.Helper()
	ctx := context.Background()
	err := store.WithTx(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE customers SET balance = balance - (SELECT amount - paid_amount FROM invoices WHERE id = $2) WHERE id = $1`,
			r.customer, r.invoice); err != nil {
			return err
		}
		return errRollBack
	})
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.ConstraintName == "customers_balance_check" {
		return false
	}
	require.ErrorIs(t, err, errRollBack)
	return true
}

// An invoice with nothing left to pay (paid_amount = amount, still issued:
// the schema allows it) is left alone: PayInvoiceFromBalance answers false
// without writing a payment of 0.00, which payments.amount > 0 would
// refuse, failing the caller's whole transaction (the billing run's pass
// over the order).
func TestPayInvoiceFromBalanceLeavesAnInvoiceWithNothingDueAlone(t *testing.T) {
	t.Parallel()
	db := testdb.Pool(t)
	r := &renewalRows{status: order.StatusActive, renews: true, balance: "100.00", credit: "0.00",
		amount: "10.00", paid: "10.00", paidUntil: periodEnd}
	seedRenewal(t, db, r)
	require.False(t, payFromBalance(t, db, r, periodEnd.Add(24*time.Hour)))
}

// A balance payment of an order's invoice carries the order, as a gateway
// payment of the invoice does (a full refund of it then refunds the
// order); one of a customer's invoice for no order carries none.
func TestPayInvoiceFromBalanceRecordsThePaymentAgainstTheInvoicesOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	payKept := func(customer, invoice uuid.UUID) store.Payment {
		t.Helper()
		require.NoError(t, store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
			acct, err := store.LockBalanceAccount(ctx, tx, customer)
			require.NoError(t, err)
			inv, err := store.Q(tx).GetInvoiceForUpdate(ctx, invoice)
			require.NoError(t, err)
			paid, err := order.PayInvoiceFromBalance(ctx, tx, acct, inv, audit.System("test"), store.Timestamp(time.Now()))
			require.True(t, paid)
			return err
		}))
		var id uuid.UUID
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT id FROM payments WHERE invoice_id = $1 AND method = 'balance'`, invoice).Scan(&id))
		return b.paymentOf(t, id)
	}

	r := &renewalRows{status: order.StatusActive, renews: true, balance: "10.00", credit: "0.00",
		amount: "10.00", paid: "0.00", paidUntil: periodEnd}
	seedRenewal(t, b.pool, r)
	p := payKept(r.customer, r.invoice)
	require.NotNil(t, p.OrderID, "the renewal invoice's payment")
	require.Equal(t, r.order, *p.OrderID)

	b.setAccount(t, b.alice, "5.00", "0.00")
	inv, err := b.svc.CreateInvoice(b.asAdmin, order.NewInvoice{CustomerID: &b.alice, Amount: money.MustParse("5.00"), DueAt: future()})
	require.NoError(t, err)
	p = payKept(b.alice, inv.ID)
	require.Nil(t, p.OrderID, "the payment of a customer's invoice for no order")
}
