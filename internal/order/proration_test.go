package order_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
)

// The unused share of a period is counted in seconds of the calendar
// period (its start..end), rounded half-even to the cent.
func TestUnusedShareOfAPeriod(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	apr := time.Date(2027, time.April, 1, 0, 0, 0, 0, time.UTC) // 30 days
	may := time.Date(2027, time.May, 1, 0, 0, 0, 0, time.UTC)   // 31 days
	jun := time.Date(2027, time.June, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name       string
		price      string
		start, end time.Time
		now        time.Time
		want       string
	}{
		{"30-day period ended on day 10: 20/30", "30.00", apr, may, apr.Add(10 * day), "20.00"},
		{"20/30 of 10.00 is 6.666…: 6.67", "10.00", apr, may, apr.Add(10 * day), "6.67"},
		{"31-day period, 21 days left: 21/31 of 31.00", "31.00", may, jun, may.Add(10 * day), "21.00"},
		{"31-day period, not a 30-day month: 21/31 of 10.00 is 6.774…", "10.00", may, jun, may.Add(10 * day), "6.77"},
		{"at the very start: the whole price", "10.00", apr, may, apr, "10.00"},
		{"before the start (paid ahead): the whole price", "10.00", apr, may, apr.Add(-day), "10.00"},
		{"at the very end: nothing", "10.00", apr, may, may, "0.00"},
		{"after the end: nothing", "10.00", apr, may, may.Add(time.Hour), "0.00"},
		// Half a cent: 0.01 × 15/30 = 0.005 → 0.00 (half-even: to the even
		// cent), 0.03 × 15/30 = 0.015 → 0.02, 0.05 × 15/30 = 0.025 → 0.02.
		{"half a cent rounds to even (down)", "0.01", apr, may, apr.Add(15 * day), "0.00"},
		{"half a cent rounds to even (up)", "0.03", apr, may, apr.Add(15 * day), "0.02"},
		{"2.5 cents rounds to 2", "0.05", apr, may, apr.Add(15 * day), "0.02"},
		{"a second before the end of 30 days: 1/2592000 of 0.01 is 0.00", "0.01", apr, may, may.Add(-time.Second), "0.00"},
		{"a second after the start: all but 1/2592000 rounds to the whole", "10.00", apr, may, apr.Add(time.Second), "10.00"},
		{"sub-second parts are not counted", "30.00", apr, may, apr.Add(10*day + 999*time.Millisecond), "20.00"},
		{"free period: nothing", "0.00", apr, may, apr.Add(10 * day), "0.00"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := order.UnusedShare(money.MustParse(c.price), c.start, c.end, c.now)
			require.NoError(t, err)
			require.Equal(t, c.want, got.String())
		})
	}
	_, err := order.UnusedShare(money.MustParse("1.00"), apr, apr, apr)
	require.Error(t, err, "an empty period has no share")
	_, err = order.UnusedShare(money.MustParse("-1.00"), apr, may, apr)
	require.Error(t, err, "a negative price")
}

// Whatever the price and the moment, the share is between nothing and the
// price, and it never grows as time passes.
func TestUnusedShareIsBoundedAndShrinks(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		start := time.Date(2027, time.January, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rapid.Int64Range(0, 1e6).Draw(t, "start")) * time.Second)
		end := start.Add(time.Duration(rapid.Int64Range(1, 400*86400).Draw(t, "length")) * time.Second)
		price, err := money.FromCents(rapid.Int64Range(0, 99_999_999_999).Draw(t, "cents"))
		require.NoError(t, err)
		a := start.Add(time.Duration(rapid.Int64Range(-86400, 401*86400).Draw(t, "a")) * time.Second)
		b := a.Add(time.Duration(rapid.Int64Range(0, 86400).Draw(t, "later")) * time.Second)
		sa, err := order.UnusedShare(price, start, end, a)
		require.NoError(t, err)
		sb, err := order.UnusedShare(price, start, end, b)
		require.NoError(t, err)
		require.GreaterOrEqual(t, sa.Sign(), 0)
		require.LessOrEqual(t, sa.Cmp(price), 0, "never more than what was paid")
		require.LessOrEqual(t, sb.Cmp(sa), 0, "never grows with time")
	})
}
