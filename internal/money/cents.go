package money

import "strconv"

// FormatCents formats c/100 with exactly two decimals, like Amount.String,
// for totals that may leave NUMERIC(12,2): a sum of many amounts is exact
// in int64 cents far beyond 9999999999.99.
func FormatCents(c int64) string {
	neg := c < 0
	u := uint64(c)
	if neg {
		u = -u // two's complement: also right for math.MinInt64
	}
	b := make([]byte, 0, 24)
	if neg {
		b = append(b, '-')
	}
	b = strconv.AppendUint(b, u/100, 10)
	frac := u % 100
	return string(append(b, '.', byte('0'+frac/10), byte('0'+frac%10)))
}
