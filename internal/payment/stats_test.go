package payment_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

func TestPaymentStatsCountTodaysPaymentsByStatusAndSumWhatSucceeded(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	now := time.Date(2026, 5, 20, 15, 30, 0, 0, time.FixedZone("UTC+8", 8*3600))
	svc := payment.NewService(pool, slog.New(slog.DiscardHandler), payment.WithClock(func() time.Time { return now }))
	admin := auth.WithPrincipal(context.Background(), auth.Principal{Role: auth.RoleAdmin, ID: uuid.New(), Kind: auth.KindSession})
	customer := auth.WithPrincipal(context.Background(), auth.Principal{Role: auth.RoleCustomer, ID: uuid.New(), Kind: auth.KindJWT})

	// Nothing yet: no rate, no sums.
	st, err := svc.PaymentStats(admin, nil)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 5, 20, 0, 0, 0, 0, time.UTC), st.Since, "the start of the UTC day")
	require.False(t, st.HasRate)
	require.Zero(t, st.Total)
	require.Empty(t, st.Succeeded)

	c := testfixture.Customer(t, pool)
	gw := testfixture.GatewayInterface(t, pool, "epay")
	today := time.Date(2026, 5, 20, 0, 0, 0, 0, time.UTC)
	add := func(status, amount string, at time.Time) {
		testfixture.InsertPayment(t, pool, testfixture.Payment{Customer: c, Gateway: gw, Status: status, Amount: amount, CreatedAt: at})
	}
	add("success", "99.00", today.Add(-time.Microsecond)) // yesterday
	add("pending", "5.00", today.Add(-time.Hour))         // yesterday, pending now
	add("pending", "5.00", today)
	st, err = svc.PaymentStats(admin, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, st.Total)
	require.EqualValues(t, 1, st.Pending)
	require.EqualValues(t, 2, st.PendingNow)
	require.False(t, st.HasRate, "only pending payments: nothing is decided")

	add("success", "12.30", today.Add(time.Hour))
	add("success", "0.70", today.Add(2*time.Hour))
	add("refunded", "20.00", today.Add(3*time.Hour))
	add("failed", "3.00", today.Add(4*time.Hour))
	st, err = svc.PaymentStats(admin, nil)
	require.NoError(t, err)
	require.Equal(t, payment.Stats{
		Since: today, AsOf: now.UTC(),
		Total: 5, Pending: 1, Success: 2, Failed: 1, Refunded: 1,
		SuccessRate: 0.75, HasRate: true, PendingNow: 2,
		Succeeded: []payment.CurrencyTotal{{Currency: "CNY", Payments: 3, AmountCents: 3300, RefundedCents: 2000}},
	}, st)

	// An explicit window, in any offset, reaches back to yesterday.
	since := time.Date(2026, 5, 20, 7, 59, 0, 0, time.FixedZone("UTC+8", 8*3600)) // 23:59 UTC the day before
	st, err = svc.PaymentStats(admin, &since)
	require.NoError(t, err)
	require.Equal(t, since.UTC(), st.Since)
	require.EqualValues(t, 6, st.Total)
	require.EqualValues(t, 3, st.Success)

	// What it refuses.
	future := now.Add(time.Minute)
	_, err = svc.PaymentStats(admin, &future)
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.ErrorContains(t, err, "in the future")
	tooOld := now.Add(-payment.MaxStatsWindow - time.Minute)
	_, err = svc.PaymentStats(admin, &tooOld)
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.ErrorContains(t, err, "at most 366 days back")
	oldest := now.Add(-payment.MaxStatsWindow)
	_, err = svc.PaymentStats(admin, &oldest)
	require.NoError(t, err)
	_, err = svc.PaymentStats(customer, nil)
	require.True(t, apperr.Is(err, apperr.PermissionDenied), "%v", err)
	_, err = svc.PaymentStats(context.Background(), nil)
	require.True(t, apperr.Is(err, apperr.Unauthenticated), "%v", err)
}

// The dashboard's pending refunds, made the way an admin makes them: a bank
// transfer refunded by hand and an epay refund whose answer was lost stay
// pending until an admin records them; the count and the oldest follow.
func TestPaymentStatsCountThePendingRefundsAndTheOldest(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	stats := func() payment.Stats {
		t.Helper()
		st, err := f.svc.PaymentStats(f.admin, nil)
		require.NoError(t, err)
		return st
	}
	st := stats()
	require.Zero(t, st.RefundsPending)
	require.Nil(t, st.OldestPendingRefund)

	// A bank transfer, confirmed, then refunded by hand: pending.
	orderID := f.order(t, "75.00")
	bank, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &orderID, GatewayInterfaceID: f.bankGW, ReturnURL: "https://x.example"})
	require.NoError(t, err)
	_, err = f.svc.ConfirmBankTransfer(f.admin, bank.ID, "STMT-1")
	require.NoError(t, err)
	byHand, err := f.svc.RefundPayment(f.admin, bank.ID, "", "customer withdrew", "")
	require.NoError(t, err)
	require.Equal(t, store.RefundPending, byHand.Refund.Status)
	// A refund that succeeds at once is not pending.
	p := f.paidAtTheGateway(t, "50.00")
	_, err = f.svc.RefundPayment(f.admin, p.ID, "5.00", "", "")
	require.NoError(t, err)
	st = stats()
	require.EqualValues(t, 1, st.RefundsPending)
	require.NotNil(t, st.OldestPendingRefund)
	require.True(t, byHand.Refund.CreatedAt.Equal(*st.OldestPendingRefund), "oldest %s, want %s", st.OldestPendingRefund, byHand.Refund.CreatedAt)
	require.Equal(t, time.UTC, st.OldestPendingRefund.Location())

	// An hour later, an epay refund whose answer is lost: pending too.
	f.clock.Advance(time.Hour)
	f.fake.InjectFault(epay.Fault{Path: "/api.php", Act: "refund", Status: http.StatusBadGateway, Times: 1})
	_, err = f.svc.RefundPayment(f.admin, p.ID, "20.00", "", "")
	require.True(t, apperr.Is(err, apperr.Internal), "%v", err)
	var unknown store.Refund
	for _, r := range f.refunds(t, p.ID) {
		if r.Status == store.RefundPending {
			unknown = r
		}
	}
	require.Equal(t, "20.00", unknown.Amount.String())
	st = stats()
	require.EqualValues(t, 2, st.RefundsPending)
	require.True(t, byHand.Refund.CreatedAt.Equal(*st.OldestPendingRefund), "still the bank transfer's")

	// The admin sends the transfer back and records it: the epay refund is
	// the oldest now; once it is recorded too, nothing is pending.
	_, err = f.svc.ResolveRefund(f.admin, byHand.Refund.ID, store.RefundSucceeded, "SEPA-1", "sent back from the bank account")
	require.NoError(t, err)
	st = stats()
	require.EqualValues(t, 1, st.RefundsPending)
	require.True(t, unknown.CreatedAt.Equal(*st.OldestPendingRefund), "oldest %s, want %s", st.OldestPendingRefund, unknown.CreatedAt)
	_, err = f.svc.ResolveRefund(f.admin, unknown.ID, store.RefundFailed, "", "not in the gateway's refund list")
	require.NoError(t, err)
	st = stats()
	require.Zero(t, st.RefundsPending)
	require.Nil(t, st.OldestPendingRefund)
}
