package timerange

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A date is checked as a date: 1970-01-01 to 9998-12-31, whatever zone
// its midnight is read in.
func TestCheckDateTakesTheRangeAsCalendarDates(t *testing.T) {
	t.Parallel()
	kiritimati, err := time.LoadLocation("Pacific/Kiritimati")
	require.NoError(t, err)
	require.NoError(t, CheckDate("from", time.Date(1970, 1, 1, 0, 0, 0, 0, kiritimati)))
	require.NoError(t, CheckDate("to", time.Date(9998, 12, 31, 0, 0, 0, 0, time.UTC)))
	require.EqualError(t, CheckDate("to", time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)),
		"validation error: to: 9999-01-01 is outside the accepted range 1970-01-01 to 9998-12-31")
	require.ErrorContains(t, CheckDate("from", time.Date(1969, 12, 31, 0, 0, 0, 0, kiritimati)), "from: 1969-12-31 is outside")
	require.ErrorContains(t, CheckDate("from", time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)), "from: 0000-01-01 is outside")
}

// An end or expiry may lie up to ten years after the caller's now, and not
// a second more.
func TestCheckAheadRefusesMoreThanTenYears(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 23, 0, 0, 0, time.FixedZone("UTC+8", 8*3600))
	limit := time.Date(2036, 11, 28, 15, 0, 0, 0, time.UTC)
	require.NoError(t, CheckAhead("expires_at", limit, now))
	require.NoError(t, CheckAhead("expires_at", now.Add(-time.Hour), now), "the past is another rule's")
	require.EqualError(t, CheckAhead("expires_at", limit.Add(time.Second), now),
		"validation error: expires_at: 2036-11-28T15:00:01Z is more than 10 years ahead (after 2036-11-28T15:00:00Z)")
}

// A time is checked in UTC: an offset can carry year 9999 as written into
// year 10000, and the refusal says so; the range's ends are Earliest
// included and Latest excluded.
func TestCheckTakesTheRangeInUTC(t *testing.T) {
	t.Parallel()
	west := time.FixedZone("UTC-23:59", -(23*3600 + 59*60))
	require.EqualError(t, Check("paid_at", time.Date(9999, 12, 31, 23, 59, 59, 0, west)),
		"validation error: paid_at: 9999-12-31T23:59:59-23:59 (10000-01-01T23:58:59Z in UTC) is outside the accepted range 1970-01-01T00:00:00Z to 9999-01-01T00:00:00Z (UTC, end excluded)")
	require.True(t, Contains(Earliest))
	require.False(t, Contains(Earliest.Add(-time.Nanosecond)))
	require.True(t, Contains(Latest.Add(-time.Nanosecond)))
	require.False(t, Contains(Latest))
	require.NoError(t, Check("paid_at", Latest.Add(-time.Nanosecond)))
}
