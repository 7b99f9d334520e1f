package replica

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
)

// Only a standby whose lag is known and at most the maximum is usable.
func TestJudgeUsesOnlyAStandbyWithinTheMaximumLag(t *testing.T) {
	t.Parallel()
	const maxLag = 10 * time.Second
	for _, tc := range []struct {
		name string
		st   store.ReplicaState
		err  error
		want kind
	}{
		{"caught up", store.ReplicaState{Standby: true, LagKnown: true}, nil, usable},
		{"exactly the maximum", store.ReplicaState{Standby: true, Lag: maxLag, LagKnown: true}, nil, usable},
		{"a millisecond past it", store.ReplicaState{Standby: true, Lag: maxLag + time.Millisecond, LagKnown: true}, nil, lagging},
		{"nothing replayed yet", store.ReplicaState{Standby: true}, nil, lagUnknown},
		{"a primary", store.ReplicaState{Standby: false}, nil, notStandby},
		{"a primary reporting no lag", store.ReplicaState{Standby: false, LagKnown: true}, nil, notStandby},
		{"the check failed", store.ReplicaState{Standby: true, LagKnown: true}, errors.New("connection refused"), unreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := judge(tc.st, tc.err, maxLag)
			require.Equal(t, tc.want, v.kind)
			if v.kind != usable {
				require.NotEmpty(t, v.why, "an unusable verdict says why in its log line")
			}
		})
	}
}

// A usable verdict goes stale: a check that hangs must not keep the
// replica in use on an old answer.
func TestAnOldUsableVerdictIsNotTrusted(t *testing.T) {
	t.Parallel()
	w := New(nil, nil, nil, Options{Interval: 10 * time.Millisecond})
	w.last = verdict{kind: usable, lagKnown: true, at: time.Now()}
	require.True(t, w.InUse())
	w.last.at = time.Now().Add(-31 * time.Millisecond)
	require.False(t, w.InUse(), "three intervals without a check")
}
