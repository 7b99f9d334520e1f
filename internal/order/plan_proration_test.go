package order_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
)

// A plan change now is worth (new − old) × the unused share of the
// calendar period, rounded once half-even to the cent: the worked examples
// of docs/operations.md, "Plan changes".
func TestProrationAmountIsTheDifferenceTimesTheUnusedShareRoundedOnce(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	apr := time.Date(2027, time.April, 1, 0, 0, 0, 0, time.UTC)
	may := time.Date(2027, time.May, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		old, new string
		now      time.Time
		want     string
	}{
		{"upgrade 30.00 → 60.00 on day 10", "30.00", "60.00", apr.Add(9 * day), "21.00"},
		{"downgrade 60.00 → 30.00 on day 10", "60.00", "30.00", apr.Add(9 * day), "-21.00"},
		{"10.00 → 20.00 with 2/3 left: 6.666… → 6.67, once", "10.00", "20.00", apr.Add(10 * day), "6.67"},
		{"the same price", "30.00", "30.00", apr.Add(10 * day), "0.00"},
		{"at the period's end: nothing", "30.00", "60.00", may, "0.00"},
		{"at its start: the whole difference", "30.00", "60.00", apr, "30.00"},
		{"half a cent to the even cent: 0.01 half-way → 0.00", "0.00", "0.01", apr.Add(15 * day), "0.00"},
		{"0.03 half-way → 0.02", "0.00", "0.03", apr.Add(15 * day), "0.02"},
	} {
		got, err := order.ProrationAmount(money.MustParse(c.old), money.MustParse(c.new), apr, may, c.now)
		require.NoError(t, err, c.name)
		require.Equal(t, c.want, got.String(), c.name)
	}
	// Rounded once, not line by line: 10.00 → 20.00 with 2/3 left bills
	// 6.67, though the new plan's share (13.33) less the old one's (6.67)
	// is 6.66.
	oldShare, err := order.UnusedShare(money.MustParse("10.00"), apr, may, apr.Add(10*day))
	require.NoError(t, err)
	newShare, err := order.UnusedShare(money.MustParse("20.00"), apr, may, apr.Add(10*day))
	require.NoError(t, err)
	apart, err := newShare.Sub(oldShare)
	require.NoError(t, err)
	require.Equal(t, "6.66", apart.String())
}

// An upgrade and the downgrade back at the same instant cancel out, and
// the amount never exceeds the difference of the prices.
func TestProrationAmountIsBoundedAndAntisymmetric(t *testing.T) {
	t.Parallel()
	apr := time.Date(2027, time.April, 1, 0, 0, 0, 0, time.UTC)
	may := time.Date(2027, time.May, 1, 0, 0, 0, 0, time.UTC)
	rapid.Check(t, func(t *rapid.T) {
		a, err := money.FromCents(rapid.Int64Range(0, 1_000_000).Draw(t, "old"))
		require.NoError(t, err)
		b, err := money.FromCents(rapid.Int64Range(0, 1_000_000).Draw(t, "new"))
		require.NoError(t, err)
		now := apr.Add(time.Duration(rapid.Int64Range(-1000, int64(may.Sub(apr)/time.Second)+1000).Draw(t, "s")) * time.Second)
		up, err := order.ProrationAmount(a, b, apr, may, now)
		require.NoError(t, err)
		down, err := order.ProrationAmount(b, a, apr, may, now)
		require.NoError(t, err)
		require.Equal(t, up.Neg().String(), down.String())
		diff, err := b.Sub(a)
		require.NoError(t, err)
		abs := func(x money.Amount) money.Amount {
			if x.Sign() < 0 {
				return x.Neg()
			}
			return x
		}
		require.LessOrEqual(t, abs(up).Cmp(abs(diff)), 0)
	})
}
