package payment_test

import (
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
	"github.com/rustbill/paymentd/internal/testsignal"
)

// The trends' changes are folded into their rollup while this instance
// leads, never while another does, and Stop ends the folds with none
// half done.
func TestTheTrendFolderFoldsOnlyWhileActive(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	customer, gw := testfixture.Customer(t, pool), testfixture.GatewayInterface(t, pool, "epay")
	testfixture.InsertPayment(t, pool, testfixture.Payment{Customer: customer, Gateway: gw, Status: "success"})
	waiting := unfoldedTrendChanges(t, pool)
	require.NotZero(t, waiting, "the payment's changes wait for a fold")

	var leads atomic.Bool
	rounds := testsignal.New()
	f := payment.NewTrendFolder(pool, payment.TrendFoldOptions{
		Interval: time.Millisecond, Job: startstop.Job{Active: leads.Load, Rounds: rounds, Logger: slog.New(slog.DiscardHandler)},
	})
	require.NoError(t, f.Start(t.Context()))
	t.Cleanup(f.Stop)

	rounds.WaitNext(t, 3, "three ticks while another instance leads")
	require.Equal(t, waiting, unfoldedTrendChanges(t, pool), "nothing folded while not leading")

	leads.Store(true)
	rounds.WaitNext(t, 1, "a tick once leading")
	require.Zero(t, unfoldedTrendChanges(t, pool), "folded once leading")
	var created, succeeded int64
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT sum(created), sum(succeeded) FROM payment_trend_currency_quarters`).Scan(&created, &succeeded))
	require.Equal(t, [2]int64{1, 1}, [2]int64{created, succeeded}, "into the rollup")

	f.Stop()
	require.Equal(t, testsignal.Mark(rounds.Count()), rounds.Mark(), "Stop waited for the tick under way")
}

// unfoldedTrendChanges counts the trends' change rows no fold has taken.
func unfoldedTrendChanges(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM payment_trend_currency_changes)
		+ (SELECT count(*) FROM payment_trend_gateway_changes) + (SELECT count(*) FROM payment_trend_seconds_changes)`).Scan(&n))
	return n
}
