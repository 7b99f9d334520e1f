package payment_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// maxCallbackRoundTrips bounds the round trips of a callback that settles a
// pending payment of a pending order (docs/performance.md, "one round trip
// per callback"). Adding one to settle fails
// TestASuccessfulCallbackSettlesInFewRoundTrips: raise it only with the
// reason in that note.
const maxCallbackRoundTrips = 3

// callbackRoundTripsBefore is what the same callback cost before settle was
// pipelined (issue 20): for the log.
const callbackRoundTripsBefore = 12

func TestASuccessfulCallbackSettlesInFewRoundTrips(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)

	// A service of its own on one traced connection: every statement of a
	// callback is seen, and after a first callback all are prepared.
	pool, trips := testdb.TracedPool(t, f.pool.Config().ConnString())
	svc := payment.NewService(pool, slog.New(slog.DiscardHandler), payment.WithGateways(f.gws), payment.WithClock(f.clock.Now))

	// The statements prepared on the one connection.
	prepared := func() int {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_prepared_statements`).Scan(&n))
		return n
	}
	settle := func(label string) []string {
		orderID := f.order(t, "12.30")
		p := f.pay(t, orderID)
		before := prepared()
		trips.Reset()
		res, err := svc.HandleCallback(context.Background(), f.callbackOf(notify(p.ID, "T-"+label, "12.30")))
		require.NoError(t, err)
		sent := trips.Reset()
		prepares := prepared() - before
		require.True(t, res.Applied)
		require.Equal(t, "success", f.payment(t, p.ID).Status)
		require.Equal(t, "paid", f.orderStatus(t, orderID))
		require.Equal(t, 1, f.orderPaidEvents(t, orderID))
		t.Logf("%s callback: %d round trips (%d before the pipelined settlement), %d statements prepared", label, len(sent), callbackRoundTripsBefore, prepares)
		for i, s := range sent {
			t.Logf("  %2d %s", i+1, s)
		}
		if label == "warm" {
			require.Zero(t, prepares, "a warm connection prepares nothing")
		}
		return sent
	}
	settle("cold")
	sent := settle("warm")
	require.LessOrEqual(t, len(sent), maxCallbackRoundTrips, fmt.Sprintf("round trips of a settling callback: %q", sent))
	testfixture.CheckMoneyInvariants(t, f.pool)
}
