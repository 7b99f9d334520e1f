package renewal_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// In production the billing test clock is off, and the payment service
// has no billing clock of its own: the dunning step must still read the
// real time. It read the zero time instead (the billing clock's "none"),
// found no invoice due before year 1, and never charged a saved card.
// Found by the renewal model, whose payment service, as production's, has
// no billing clock.
func TestWithoutATestClockTheDunningChargesTheSavedCardOnTheDueDay(t *testing.T) {
	t.Parallel()
	b := setup(t, at(time.January, 10, 0), defaults())
	w := newPayWorld(t, b)
	pays := payment.NewService(b.pool, slog.New(slog.DiscardHandler), payment.WithGateways(w), payment.WithClock(b.clock.Now))
	customer := testfixture.Customer(t, b.pool)
	id := b.activeOrder(t, customer, "monthly", "7.00")
	w.card.saveCard(t, b, customer, b.clock.Now())

	// The renewal invoice, issued unpaid (no balance), is due on Feb 10.
	b.clock.Set(at(time.February, 4, 0))
	require.Equal(t, 1, b.pass(t).Issued)
	ps := b.periods(t, id)
	require.Len(t, ps, 2)
	r, err := pays.ChargeDue(t.Context(), cardRetryDays, "test")
	require.NoError(t, err)
	require.Zero(t, r.Charged, "not before the due day")

	b.clock.Set(at(time.February, 10, 1))
	r, err = pays.ChargeDue(t.Context(), cardRetryDays, "test")
	require.NoError(t, err)
	require.Equal(t, 1, r.Charged, "charged on the due day: %+v", r)
	require.Equal(t, string(order.InvoicePaid), b.invoice(t, *ps[1].InvoiceID).Status)
	require.Equal(t, "paid", b.periods(t, id)[1].Status)
	b.checkMoney(t)
}
