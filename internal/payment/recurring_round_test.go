package payment_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/payment"
)

// A month of a price is exact in twelfths of a cent and rounded half up to
// the cent only when answered: 100.00 a year is 8.33 a month, three of
// them 25.00 exactly; half a cent goes up, less than half down.
func TestTwelfthsRoundHalfUpToTheCentWhenAnswered(t *testing.T) {
	t.Parallel()
	annual := payment.Twelfths(10000 * 12 / 12) // 100.00 a year, in twelfths a month
	for _, tc := range []struct {
		t    payment.Twelfths
		want string
	}{
		{0, "0.00"},
		{annual, "8.33"},
		{3 * annual, "25.00"},
		{12 * 1000, "10.00"},               // 10.00 a month
		{4 * 1000 * 12 / 4, "10.00"},       // 30.00 a quarter
		{6, "0.01"},                        // half a cent: up
		{5, "0.00"},                        // five twelfths of a cent: down
		{1200*99 + 1188 + 5, "99.99"},      // 99.99 and five twelfths of a cent
		{1200*99 + 1188 + 6, "100.00"},     // 99.995
		{1<<62 - 1, "3843071682022823.25"}, // 3843071682022823.2525…
	} {
		require.Equal(t, tc.want, tc.t.String(), "%d twelfths", tc.t)
	}
}
