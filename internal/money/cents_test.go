package money_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
)

func TestFormatCentsHasTwoDecimalsBeyondTheColumnRange(t *testing.T) {
	t.Parallel()
	for c, want := range map[int64]string{
		0:                 "0.00",
		5:                 "0.05",
		1230:              "12.30",
		-500:              "-5.00",
		999_999_999_999:   "9999999999.99",
		1_000_000_000_000: "10000000000.00",
		math.MaxInt64:     "92233720368547758.07",
		math.MinInt64:     "-92233720368547758.08",
	} {
		require.Equal(t, want, money.FormatCents(c), "%d cents", c)
	}
	// The same text as Amount within the column's range.
	for _, s := range []string{"0.00", "0.01", "12.30", "-7.05", "9999999999.99"} {
		a := money.MustParse(s)
		require.Equal(t, a.String(), money.FormatCents(a.Cents()))
	}
}
