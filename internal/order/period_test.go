package order_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/rustbill/paymentd/internal/order"
)

func TestAddMonthsKeepsTheAnchorDay(t *testing.T) {
	t.Parallel()
	utc := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 10, 30, 0, 0, time.UTC) }
	jan31 := utc(2027, time.January, 31)
	for _, c := range []struct {
		n    int
		want time.Time
	}{
		{0, jan31},
		{1, utc(2027, time.February, 28)},
		{2, utc(2027, time.March, 31)},
		{3, utc(2027, time.April, 30)},
		{11, utc(2027, time.December, 31)},
		{12, utc(2028, time.January, 31)},
		{13, utc(2028, time.February, 29)}, // leap year
		{-1, utc(2026, time.December, 31)},
	} {
		require.Equal(t, c.want, order.AddMonths(jan31, c.n, time.UTC), "Jan 31 + %d months", c.n)
	}
	// Quarterly from Nov 30: Feb 28, May 30, Aug 30.
	nov30 := utc(2026, time.November, 30)
	require.Equal(t, utc(2027, time.February, 28), order.AddMonths(nov30, 3, time.UTC))
	require.Equal(t, utc(2027, time.May, 30), order.AddMonths(nov30, 6, time.UTC))
}

// The month is counted in the billing time zone: 23:30 UTC on Jan 31 is
// already Feb 1 in Shanghai, so a month later is Mar 1 there, not Feb 28.
func TestAddMonthsCountsInTheBillingTimeZone(t *testing.T) {
	t.Parallel()
	sh, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	start := time.Date(2027, time.January, 31, 23, 30, 0, 0, time.UTC)
	require.Equal(t, time.Date(2027, time.February, 28, 23, 30, 0, 0, time.UTC), order.AddMonths(start, 1, time.UTC))
	require.Equal(t, time.Date(2027, time.March, 1, 7, 30, 0, 0, sh), order.AddMonths(start, 1, sh))
	// Across a daylight saving change the local time of day stays.
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	feb := time.Date(2027, time.February, 15, 0, 30, 0, 0, ny)
	end := order.AddMonths(feb, 1, ny)
	require.Equal(t, time.Date(2027, time.March, 15, 0, 30, 0, 0, ny), end)
	require.Equal(t, 27*24*time.Hour+23*time.Hour, end.Sub(feb), "one hour fewer: the clocks went forward")
}

// Properties, for any anchor and month counts: periods follow each other
// without gap or overlap, each is between 28 and 31 days a month long
// (±1 hour for daylight saving), and the day is the anchor's unless the
// month is shorter.
func TestAddMonthsProperties(t *testing.T) {
	t.Parallel()
	locs := []string{"UTC", "Asia/Shanghai", "America/New_York", "Europe/Berlin", "Australia/Sydney"}
	rapid.Check(t, func(t *rapid.T) {
		loc, err := time.LoadLocation(rapid.SampledFrom(locs).Draw(t, "loc"))
		require.NoError(t, err)
		anchor := time.Unix(rapid.Int64Range(946684800, 4102444800).Draw(t, "anchor"), 0).In(loc)
		months := rapid.SampledFrom([]int{1, 3, 6, 12}).Draw(t, "cycle")
		k := rapid.IntRange(0, 60).Draw(t, "k")
		start, end := order.AddMonths(anchor, k*months, loc), order.AddMonths(anchor, (k+1)*months, loc)
		require.True(t, end.After(start))
		days := end.Sub(start).Hours() / 24
		require.GreaterOrEqual(t, days, float64(28*months)-1.0/24, "too short: %s → %s", start, end)
		require.LessOrEqual(t, days, float64(31*months)+1.0/24, "too long: %s → %s", start, end)
		a, e := anchor.In(loc), end.In(loc)
		if e.Day() != a.Day() {
			last := time.Date(e.Year(), e.Month()+1, 0, 0, 0, 0, 0, loc).Day()
			require.True(t, e.Day() == last && a.Day() > last, "day %d of a month of %d days, anchor day %d", e.Day(), last, a.Day())
		}
	})
}
