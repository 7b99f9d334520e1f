package renewal_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// A balance topped up after a renewal invoice was issued unpaid, and
// before its due day, pays it at the next pass: before the period starts,
// so the service never goes overdue. (Planted: the balance step's window
// cut to periods already started, `now.Add(366/day)` — caught: the invoice
// stayed unpaid until its due day.)
func TestATopUpBeforeTheDueDayPaysTheIssuedRenewalAtTheNextPass(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.March, 1, 0), defaults())
	customer := testfixture.Customer(t, b.pool)
	id := b.activeOrder(t, customer, "monthly", "10.00")

	// Mar 25, seven days before the period of Apr 1: issued, nothing to
	// pay it with.
	b.clock.Set(at(time.March, 25, 0))
	r := b.pass(t)
	require.Equal(t, 1, r.Issued)
	require.Zero(t, r.AutoPaid)
	require.Equal(t, store.PeriodUnpaid, b.periods(t, id)[1].Status)

	// Mar 27: the customer tops up; the next pass, days before Apr 1,
	// pays the invoice from the balance.
	b.clock.Set(at(time.March, 27, 0))
	b.topUp(t, customer, "10.00")
	b.clock.Set(at(time.March, 28, 0))
	r = b.pass(t)
	require.Zero(t, r.Issued)
	require.Equal(t, 1, r.AutoPaid, "the top-up pays the issued renewal before its period starts")
	ps := b.periods(t, id)
	require.Equal(t, store.PeriodPaid, ps[1].Status)
	require.True(t, ps[1].StartsAt.After(b.clock.Now()), "paid before the period starts")
	inv := b.invoice(t, *ps[1].InvoiceID)
	require.Equal(t, "10.00", inv.PaidAmount.String())
	require.Equal(t, string(order.StatusActive), b.order(t, id).Status)
	b.checkMoney(t)
}
