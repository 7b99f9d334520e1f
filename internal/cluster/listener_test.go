package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/testdb"
)

func requireWake(t *testing.T, wake <-chan struct{}, within time.Duration, why string) {
	t.Helper()
	select {
	case <-wake:
	case <-time.After(within):
		t.Fatalf("no wake-up within %s: %s", within, why)
	}
}

func drain(wake <-chan struct{}) {
	select {
	case <-wake:
	default:
	}
}

func TestListenerWakesSubscribersOfTheNotifiedChannelOnly(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	l := startListener(t, pool, "listener-test")
	events, unsubscribe := l.Subscribe(cluster.ChannelEvents)
	defer unsubscribe()
	leadership, unsubscribeLeadership := l.Subscribe(cluster.ChannelLeadership)
	defer unsubscribeLeadership()
	drain(events)
	drain(leadership)

	_, err := pool.Exec(context.Background(), "SELECT pg_notify($1, 'x')", cluster.ChannelEvents)
	require.NoError(t, err)
	requireWake(t, events, 2*time.Second, "NOTIFY paymentd_events")
	// The listener handles notifications one at a time, in order: once the
	// second one has woken its subscriber, the first one's wake-ups are all
	// done, and the other channel's subscriber must have none.
	_, err = pool.Exec(context.Background(), "SELECT pg_notify($1, 'y')", cluster.ChannelEvents)
	require.NoError(t, err)
	requireWake(t, events, 2*time.Second, "the second NOTIFY paymentd_events")
	select {
	case <-leadership:
		t.Fatal("a subscriber of another channel was woken")
	default:
	}
}

// The listener's connection is killed by the server: it reconnects, wakes
// every subscriber once (what was notified meanwhile is lost), and listens
// again.
func TestListenerReconnectsAfterItsConnectionIsKilled(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	const app = "listener-reconnect-test"
	l := startListener(t, pool, app)
	events, unsubscribe := l.Subscribe(cluster.ChannelEvents)
	defer unsubscribe()
	drain(events)

	ctx := context.Background()
	var killed int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND datname = current_database()`, app).Scan(&killed))
	require.Equal(t, 1, killed)

	requireWake(t, events, 5*time.Second, "the wake-up after reconnecting")
	require.Eventually(t, l.Connected, 5*time.Second, 5*time.Millisecond)
	drain(events)
	_, err := pool.Exec(ctx, "SELECT pg_notify($1, 'x')", cluster.ChannelEvents)
	require.NoError(t, err)
	requireWake(t, events, 2*time.Second, "NOTIFY after the reconnect")
}
