package payment

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A saved card is charged on the due day, then on each retry day past it,
// and never before its day or after the last.
func TestSavedChargeAttemptsFallOnTheDueDayAndTheRetryDays(t *testing.T) {
	due := time.Date(2026, 3, 31, 10, 0, 0, 0, time.UTC)
	days := DefaultCardRetryDays
	at := func(d int, off time.Duration) time.Time { return due.Add(time.Duration(d)*24*time.Hour + off) }
	for _, tc := range []struct {
		attempt int
		now     time.Time
		want    bool
	}{
		{0, at(0, -time.Second), false},
		{0, at(0, 0), true},
		{1, at(1, time.Hour), false},
		{1, at(2, -time.Second), false},
		{1, at(2, 0), true},
		{2, at(4, 23*time.Hour), false},
		{2, at(5, 0), true},
		{3, at(8, 0), false},
		{3, at(9, 0), true},
		{4, at(30, 0), false},
	} {
		require.Equal(t, tc.want, attemptDue(tc.attempt, days, due, tc.now), "attempt %d at %s", tc.attempt, tc.now)
	}
	require.False(t, attemptDue(1, nil, due, at(30, 0)), "no retry days: one attempt")
}
