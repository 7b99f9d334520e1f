package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/cluster"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testkit"
)

// nodeByID finds a node in a listing; t may be an EventuallyWithT
// condition's collector.
func nodeByID(t testkit.T, nodes []store.NodeState, id string) store.NodeState {
	t.Helper()
	for _, n := range nodes {
		if n.ID == id {
			return n
		}
	}
	t.Errorf("node %s not listed", id)
	t.FailNow()
	return store.NodeState{}
}

func TestHeartbeatsListNodesAndReportASilentOneLost(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	// Beats every 100 ms, lost after 2 s of silence: room for a live node's
	// beats to be late on a machine busy with other work.
	const lostAfter = 2 * time.Second
	start := func(id string) (*cluster.Heartbeat, context.CancelFunc) {
		h, err := cluster.NewHeartbeat(pool, cluster.HeartbeatOptions{
			Node:     cluster.NodeInfo{ID: id, Hostname: "host-" + id, Version: "1.2.3"},
			Interval: 100 * time.Millisecond, LostAfter: lostAfter, Logger: quietLog(),
		})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		require.NoError(t, h.Start(ctx))
		t.Cleanup(func() { h.Stop(); cancel() })
		return h, cancel
	}
	watcher, _ := start("alive")
	_, kill := start("doomed")

	ctx := context.Background()
	require.Eventually(t, func() bool {
		nodes, err := store.Q(pool).ListNodesWithAge(ctx, lostAfter)
		return err == nil && len(nodes) == 2
	}, 5*time.Second, 10*time.Millisecond)
	nodes, err := store.Q(pool).ListNodesWithAge(ctx, lostAfter)
	require.NoError(t, err)
	alive := nodeByID(t, nodes, "alive")
	require.Equal(t, "host-alive", alive.Hostname)
	require.Equal(t, "1.2.3", alive.Version)
	require.False(t, alive.Lost)
	require.Less(t, alive.HeartbeatAge, lostAfter)
	startedAt := alive.StartedAt

	kill() // no Stop: the row stays, and ages
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		nodes, err := store.Q(pool).ListNodesWithAge(ctx, lostAfter)
		require.NoError(c, err)
		assert.True(c, nodeByID(c, nodes, "doomed").Lost, "doomed is reported lost")
	}, 10*time.Second, 20*time.Millisecond)
	require.Eventually(t, func() bool { return len(watcher.Lost()) == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, []string{"doomed"}, watcher.Lost())

	nodes, err = store.Q(pool).ListNodesWithAge(ctx, lostAfter)
	require.NoError(t, err)
	alive = nodeByID(t, nodes, "alive")
	require.False(t, alive.Lost, "the live node keeps beating")
	require.Equal(t, startedAt, alive.StartedAt, "started_at is the first beat's")
	require.Greater(t, nodeByID(t, nodes, "doomed").HeartbeatAge, lostAfter)
}

func TestAStoppedNodeLeavesTheList(t *testing.T) {
	t.Parallel()
	pool := testdb.Pool(t)
	h, err := cluster.NewHeartbeat(pool, cluster.HeartbeatOptions{
		Node: cluster.NodeInfo{ID: cluster.NewNodeID()}, Interval: 50 * time.Millisecond, LostAfter: time.Second, Logger: quietLog(),
	})
	require.NoError(t, err)
	require.NoError(t, h.Start(context.Background()))
	require.Eventually(t, func() bool {
		nodes, err := store.Q(pool).ListNodesWithAge(context.Background(), time.Second)
		return err == nil && len(nodes) == 1
	}, 5*time.Second, 10*time.Millisecond)
	h.Stop()
	nodes, err := store.Q(pool).ListNodesWithAge(context.Background(), time.Second)
	require.NoError(t, err)
	require.Empty(t, nodes)
}

func TestNodeIDsAreUniquePerProcessStart(t *testing.T) {
	t.Parallel()
	a, b := cluster.NewNodeID(), cluster.NewNodeID()
	require.NotEqual(t, a, b)
	require.NotEmpty(t, a)
}
