package money

import (
	"github.com/rustbill/paymentd/internal/text"

	"strconv"
)

// Parse reads a plain decimal: an optional '-', an integer part without leading
// zeros ("0" itself is fine) of at most 10 digits, and optionally '.' followed by
// one or two digits. "-0" is zero. Anything else fails with an error wrapping
// ErrInvalid, ErrTooManyDecimals or ErrOutOfRange; see the package doc for the
// grammar and the reasons.
func Parse(s string) (Amount, error) {
	c, err := parseCents(s, false)
	if err != nil {
		return Amount{}, err
	}
	return Amount{cents: c}, nil
}

// ParseNonNegative is Parse that also rejects negative amounts (ErrNegative).
// "-0" and "-0.00" are zero and accepted.
func ParseNonNegative(s string) (Amount, error) {
	a, err := Parse(s)
	if err != nil {
		return Amount{}, err
	}
	if a.cents < 0 {
		return Amount{}, newInputError(s, ErrNegative)
	}
	return a, nil
}

// ParsePositive is Parse that also requires an amount greater than zero. Zero
// fails with ErrNotPositive, a negative amount with an error wrapping both
// ErrNotPositive and ErrNegative.
func ParsePositive(s string) (Amount, error) {
	a, err := Parse(s)
	if err != nil {
		return Amount{}, err
	}
	switch {
	case a.cents < 0:
		return Amount{}, newInputError(s, ErrNotPositive, ErrNegative)
	case a.cents == 0:
		return Amount{}, newInputError(s, ErrNotPositive)
	}
	return a, nil
}

// MustParse is Parse that panics on error; for tests and package-level constants.
func MustParse(s string) Amount {
	a, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return a
}

// parseCents implements the grammar of Parse. With zeroPadding, fractional digits
// beyond the second are allowed as long as they are all '0': that is how
// PostgreSQL prints a NUMERIC of larger scale ("1.000"), and such a value is
// exact in NUMERIC(12,2). User input never gets that latitude.
func parseCents(s string, zeroPadding bool) (int64, error) {
	i := 0
	neg := false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}

	intStart := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intPart := s[intStart:i]
	if len(intPart) == 0 || (len(intPart) > 1 && intPart[0] == '0') {
		return 0, newInputError(s, ErrInvalid)
	}

	var frac string
	if i < len(s) && s[i] == '.' {
		i++
		fracStart := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		frac = s[fracStart:i]
		if len(frac) == 0 {
			return 0, newInputError(s, ErrInvalid)
		}
	}
	if i != len(s) {
		return 0, newInputError(s, ErrInvalid)
	}

	if len(frac) > maxFracDigits {
		if !zeroPadding || !allZeros(frac[maxFracDigits:]) {
			return 0, newInputError(s, ErrTooManyDecimals)
		}
		frac = frac[:maxFracDigits]
	}
	if len(intPart) > maxIntDigits {
		return 0, newInputError(s, ErrOutOfRange)
	}

	// At most 10 + 2 digits: no overflow, and the result is within ±maxCents.
	var c int64
	for j := 0; j < len(intPart); j++ {
		c = c*10 + int64(intPart[j]-'0')
	}
	for j := 0; j < maxFracDigits; j++ {
		c *= 10
		if j < len(frac) {
			c += int64(frac[j] - '0')
		}
	}
	if neg {
		c = -c
	}
	return c, nil
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

func allZeros(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '0' {
			return false
		}
	}
	return true
}

// inputError names the rejected input (quoted, truncated) and unwraps to one or
// more sentinel errors; the first one gives the message.
type inputError struct {
	input string
	kinds []error
}

func newInputError(input string, kinds ...error) error {
	return &inputError{input: text.Clip(input, maxQuoted), kinds: kinds}
}

func (e *inputError) Error() string {
	return e.kinds[0].Error() + ": " + strconv.Quote(e.input)
}

func (e *inputError) Unwrap() []error { return e.kinds }

// maxQuoted bounds how much of a rejected input lands in an error message (and
// from there in logs); amounts are short, so more than this is garbage anyway.
const maxQuoted = 32
