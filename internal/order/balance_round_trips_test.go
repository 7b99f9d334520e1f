package order_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// maxBalancePaymentRoundTrips bounds the round trips of a PayWithBalance of
// a pending order (docs/performance.md, "PayWithBalance no dearer than a
// callback"). Raise it only with the reason in that note.
const maxBalancePaymentRoundTrips = 3

// balancePaymentRoundTripsBefore is what the same call cost before it was
// pipelined (issue 40): for the log.
const balancePaymentRoundTripsBefore = 13

func TestABalancePaymentTakesFewRoundTrips(t *testing.T) {
	t.Parallel()
	// A service of its own on one traced connection: every statement of a
	// payment is seen, and after a first payment all are prepared.
	pool, trips := testdb.TracedPool(t, testdb.URL(t))
	b := setupWithPool(t, pool)
	b.setAccount(t, b.alice, "100.00", "0.00")

	prepared := func() int {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_prepared_statements`).Scan(&n))
		return n
	}
	// updates is (all, HOT) updates of table so far, the statistics
	// flushed first (the pool's one connection made them).
	updates := func(table string) (int64, int64) {
		var all, hot int64
		_, err := pool.Exec(context.Background(), `SELECT pg_stat_force_next_flush()`)
		require.NoError(t, err)
		require.NoError(t, pool.QueryRow(context.Background(), `
			SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = $1`, table).Scan(&all, &hot))
		return all, hot
	}
	pay := func(label string) []string {
		o := b.order(t, b.asAlice, "12.30")
		before := prepared()
		cAll, cHot := updates("customers")
		oAll, oHot := updates("orders")
		trips.Reset()
		res, err := b.svc.PayWithBalance(b.asAlice, o.ID)
		require.NoError(t, err)
		sent := trips.Reset()
		prepares := prepared() - before
		cAll1, cHot1 := updates("customers")
		oAll1, oHot1 := updates("orders")
		t.Logf("%s balance payment: customers %d updates, %d HOT; orders %d updates, %d HOT", label, cAll1-cAll, cHot1-cHot, oAll1-oAll, oHot1-oHot)
		require.Equal(t, "provisioning", b.getOrder(t, o.ID).Status)
		require.NotNil(t, res.Payment)
		require.Len(t, b.events(t, o.ID), 1)
		t.Logf("%s balance payment: %d round trips (%d before the pipelined payment), %d statements prepared", label, len(sent), balancePaymentRoundTripsBefore, prepares)
		for i, s := range sent {
			t.Logf("  %2d %s", i+1, s)
		}
		if label == "warm" {
			require.Zero(t, prepares, "a warm connection prepares nothing")
		}
		return sent
	}
	pay("cold")
	sent := pay("warm")
	require.LessOrEqual(t, len(sent), maxBalancePaymentRoundTrips, fmt.Sprintf("round trips of a balance payment: %q", sent))
	testfixture.CheckMoneyInvariants(t, b.pool)
}
