package renewal

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// New gives a zero or negative Interval and BatchSize, and a nil Location
// and Clock, their defaults, and keeps the ones set. A zero interval kept
// would make a follower look in a busy loop, a zero batch size would scan
// for nothing. (Planted: `opts.Interval <= 0` as `< 0` and negated, the same
// for BatchSize; SuspendAfter's `days*day` as `days/day`; a follower
// running the pass, `Active == nil` negated — each caught.)
func TestNewTakesTheDefaultsOfZeroOptions(t *testing.T) {
	t.Parallel()
	for _, opts := range []Options{{}, {Interval: -time.Second, BatchSize: -1}} {
		r := New(nil, opts)
		require.Equal(t, DefaultInterval, r.opts.Interval)
		require.Equal(t, DefaultBatchSize, r.opts.BatchSize)
		require.Equal(t, time.UTC, r.opts.Location)
		require.NotNil(t, r.opts.Clock)
	}
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	r := New(nil, Options{Interval: time.Hour, BatchSize: 5, Location: shanghai})
	require.Equal(t, time.Hour, r.opts.Interval)
	require.Equal(t, 5, r.opts.BatchSize)
	require.Equal(t, shanghai, r.opts.Location)
	// What GetRenewalOverview tells of the run's settings, in whole days.
	steps := New(nil, Options{SuspendAfterDays: 3, TerminateAfterDays: 14})
	require.Equal(t, 3*24*time.Hour, steps.SuspendAfter())
	require.Equal(t, 14*24*time.Hour, steps.TerminateAfter())

	// An instance that does not lead looks again within a second, or
	// within its interval when that is shorter; never at once.
	follower := func() bool { return false }
	require.Equal(t, followerPoll, New(nil, Options{Active: follower}).round(context.Background()))
	require.Equal(t, 100*time.Millisecond, New(nil, Options{Interval: 100 * time.Millisecond, Active: follower}).round(context.Background()))
}
