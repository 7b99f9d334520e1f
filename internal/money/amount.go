package money

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Limits of NUMERIC(12,2).
const (
	maxIntDigits  = 10
	maxFracDigits = 2
	// maxCents is 9999999999.99, the largest magnitude NUMERIC(12,2) holds.
	maxCents int64 = 999_999_999_999
)

var (
	// ErrInvalid reports text (or a database value) that is not a plain decimal.
	ErrInvalid = errors.New("money: not a plain decimal")
	// ErrTooManyDecimals reports a value with a non-zero third fractional digit.
	ErrTooManyDecimals = errors.New("money: more than 2 fractional digits")
	// ErrNegative reports a negative amount where none is allowed.
	ErrNegative = errors.New("money: negative amount")
	// ErrNotPositive reports zero or a negative amount where one greater than zero
	// is required. ParsePositive wraps it together with ErrNegative for negatives.
	ErrNotPositive = errors.New("money: amount must be greater than zero")
	// ErrOutOfRange reports a value beyond NUMERIC(12,2): |v| > 9999999999.99.
	ErrOutOfRange = errors.New("money: out of NUMERIC(12,2) range")
	// ErrNull reports SQL NULL or JSON null where an Amount is required; use
	// NullAmount for nullable values.
	ErrNull = errors.New("money: null amount")
)

// Amount is an exact NUMERIC(12,2) value. It is an immutable value type: copy
// it, share it between goroutines, compare it with == or use it as a map key.
// The zero value is 0.00.
type Amount struct {
	// cents is the value times 100; |cents| <= maxCents always holds.
	cents int64
}

// Zero returns 0.00.
func Zero() Amount { return Amount{} }

// FromCents returns c/100, or ErrOutOfRange when |c| > 999999999999.
func FromCents(c int64) (Amount, error) {
	if c > maxCents || c < -maxCents {
		return Amount{}, fmt.Errorf("%w: %d cents", ErrOutOfRange, c)
	}
	return Amount{cents: c}, nil
}

// Cents returns the value times 100.
func (a Amount) Cents() int64 { return a.cents }

// String formats a with exactly two decimals: "12.30", "0.00", "-5.00".
func (a Amount) String() string {
	var buf [24]byte
	return string(a.appendTo(buf[:0]))
}

// AppendText implements encoding.TextAppender.
func (a Amount) AppendText(b []byte) ([]byte, error) {
	return a.appendTo(b), nil
}

func (a Amount) appendTo(b []byte) []byte {
	c := a.cents
	if c < 0 {
		b = append(b, '-')
		c = -c // cannot overflow: |cents| <= maxCents
	}
	b = strconv.AppendInt(b, c/100, 10)
	frac := c % 100
	return append(b, '.', byte('0'+frac/10), byte('0'+frac%10))
}

// Add returns a+b, or ErrOutOfRange when the sum leaves NUMERIC(12,2).
func (a Amount) Add(b Amount) (Amount, error) {
	// Both operands are within ±maxCents, so the int64 sum cannot overflow.
	s := a.cents + b.cents
	if s > maxCents || s < -maxCents {
		return Amount{}, fmt.Errorf("%w: %s + %s", ErrOutOfRange, a, b)
	}
	return Amount{cents: s}, nil
}

// Sub returns a-b, or ErrOutOfRange when the difference leaves NUMERIC(12,2).
func (a Amount) Sub(b Amount) (Amount, error) {
	d := a.cents - b.cents
	if d > maxCents || d < -maxCents {
		return Amount{}, fmt.Errorf("%w: %s - %s", ErrOutOfRange, a, b)
	}
	return Amount{cents: d}, nil
}

// Neg returns -a. The range is symmetric, so this cannot fail; Neg of zero is zero.
func (a Amount) Neg() Amount { return Amount{cents: -a.cents} }

// Cmp returns -1, 0 or +1 as a is less than, equal to or greater than b.
func (a Amount) Cmp(b Amount) int {
	switch {
	case a.cents < b.cents:
		return -1
	case a.cents > b.cents:
		return 1
	default:
		return 0
	}
}

// Equal reports whether a and b are the same amount.
func (a Amount) Equal(b Amount) bool { return a.cents == b.cents }

// Sign returns -1, 0 or +1 for negative, zero and positive amounts.
func (a Amount) Sign() int { return a.Cmp(Amount{}) }

// IsZero reports whether a is 0.00.
func (a Amount) IsZero() bool { return a.cents == 0 }

// Sum returns the total of xs (0.00 for none). Only the total has to fit in
// NUMERIC(12,2); a partial sum may leave the range on the way, so the result does
// not depend on the order of xs, as with SQL's sum().
func Sum(xs ...Amount) (Amount, error) {
	var total int64
	for _, x := range xs {
		// Each term is within ±maxCents (~2^40), so overflowing int64 takes more
		// than eight million terms; guard anyway rather than wrap around.
		if (x.cents > 0 && total > math.MaxInt64-x.cents) || (x.cents < 0 && total < math.MinInt64-x.cents) {
			return Amount{}, fmt.Errorf("%w: sum of %d amounts", ErrOutOfRange, len(xs))
		}
		total += x.cents
	}
	if total > maxCents || total < -maxCents {
		return Amount{}, fmt.Errorf("%w: sum of %d amounts is %d cents", ErrOutOfRange, len(xs), total)
	}
	return Amount{cents: total}, nil
}
