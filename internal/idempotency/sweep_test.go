package idempotency_test

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/idempotency"
	"github.com/rustbill/paymentd/internal/startstop"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testsignal"
)

// Expired keys are deleted while this instance leads, every one of them
// however many statements it takes, and the live ones stay; while another
// instance leads nothing goes; Stop ends the sweeps with none half done.
func TestTheSweeperDeletesExpiredKeysOnlyWhileActive(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	now := time.Date(2026, 5, 20, 12, 0, 0, 0, time.UTC)
	claim := func(key string, expires time.Time) {
		claimed, err := store.ClaimIdempotencyKey(t.Context(), pool, store.IdempotencyClaim{
			Principal: "admin:sweep", Key: key, Procedure: "/test/Refund", RequestHash: []byte{1},
			CreatedAt: expires.Add(-idempotency.DefaultTTL), ExpiresAt: expires,
		})
		require.NoError(t, err)
		require.True(t, claimed)
	}
	for i := range 5 {
		claim(fmt.Sprintf("expired-%d", i), now.Add(-time.Duration(i)*time.Minute)) // the first expires now
	}
	claim("live-1", now.Add(time.Second))
	claim("live-2", now.Add(23*time.Hour))

	var leads atomic.Bool
	rounds := testsignal.New()
	s := idempotency.NewSweeper(pool, idempotency.SweepOptions{
		Interval: time.Millisecond, BatchSize: 2, Clock: func() time.Time { return now },
		Job: startstop.Job{Active: leads.Load, Rounds: rounds, Logger: slog.New(slog.DiscardHandler)},
	})
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(s.Stop)

	rounds.WaitNext(t, 3, "three ticks while another instance leads")
	require.Len(t, keys(t, pool), 7, "nothing swept while not leading")

	leads.Store(true)
	rounds.WaitNext(t, 1, "a tick once leading")
	require.Equal(t, []string{"live-1", "live-2"}, keys(t, pool), "every expired key went, in statements of two")

	s.Stop()
	require.Equal(t, testsignal.Mark(rounds.Count()), rounds.Mark(), "Stop waited for the tick under way")
}

// keys are the kept keys, in order.
func keys(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT key FROM idempotency_keys ORDER BY key`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}
