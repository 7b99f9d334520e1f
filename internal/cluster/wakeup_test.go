package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/testdb"
)

// A Wakeup sends NOTIFY paymentd_events for the wakes asked of it, and the
// wakes asked while one is on its way, or within its gap of the last, go
// as one: a burst of a hundred wakes is a few NOTIFYs, and a wake after
// the burst still gets its own.
func TestAWakeupSendsOneNotifyForABurstOfWakes(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	ctx := context.Background()
	listen, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { _ = listen.Close(context.Background()) })
	_, err = listen.Exec(ctx, `LISTEN `+cluster.ChannelEvents)
	require.NoError(t, err)
	count := func(within time.Duration) int {
		n := 0
		for {
			wctx, cancel := context.WithTimeout(ctx, within)
			_, err := listen.WaitForNotification(wctx)
			cancel()
			if err != nil {
				return n
			}
			n++
		}
	}

	w := cluster.NewWakeup(pool, 50*time.Millisecond, nil)
	require.NoError(t, w.Start(ctx))
	t.Cleanup(w.Stop)
	require.Zero(t, count(100*time.Millisecond), "no wake, no NOTIFY")
	for range 100 {
		w.Wake()
	}
	n := count(300 * time.Millisecond)
	require.GreaterOrEqual(t, n, 1, "a burst is notified")
	require.LessOrEqual(t, n, 2, "a burst of 100 wakes within one gap is one NOTIFY, or two")
	w.Wake()
	require.Equal(t, 1, count(300*time.Millisecond), "a wake after the burst is notified")
}
