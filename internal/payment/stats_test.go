package payment_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/payment"
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
