package money

import (
	"fmt"

	"github.com/cockroachdb/apd/v3"
)

// Decimal returns a as an apd.Decimal with exponent -2 (12.30 is 1230e-2), for
// callers that need decimal arithmetic beyond Add and Sub. The result is a fresh
// value that shares nothing with a.
func (a Amount) Decimal() apd.Decimal {
	var d apd.Decimal
	d.SetFinite(a.cents, -2)
	return d
}

// FromDecimal converts d exactly. It fails with ErrInvalid for nil, NaN and
// infinities, with ErrTooManyDecimals when d has a non-zero digit beyond the
// second decimal (1.005; 1.000 is fine), and with ErrOutOfRange beyond
// NUMERIC(12,2). It never rounds: round with apd first if rounding is intended.
func FromDecimal(d *apd.Decimal) (Amount, error) {
	if d == nil {
		return Amount{}, fmt.Errorf("%w: nil decimal", ErrInvalid)
	}
	if d.Form != apd.Finite {
		return Amount{}, newInputError(d.String(), ErrInvalid)
	}
	if d.Coeff.Sign() == 0 {
		return Amount{}, nil // any exponent, either sign: zero
	}

	var coeff apd.BigInt
	coeff.Abs(&d.Coeff)
	digits := apd.NumDigits(&coeff)
	// shift is the power of ten that turns d into cents.
	shift := int64(d.Exponent) + maxFracDigits

	var cents int64
	switch {
	case shift >= 0:
		// digits+shift is the number of digits of the cents value.
		if digits+shift > maxIntDigits+maxFracDigits {
			return Amount{}, newInputError(d.String(), ErrOutOfRange)
		}
		cents = coeff.Int64() * pow10(shift)
	default:
		drop := -shift
		// A non-zero coefficient with no more digits than we drop is not a
		// multiple of 10^drop. Checking first also bounds 10^drop below by the
		// size of the coefficient, whatever the exponent.
		if drop >= digits {
			return Amount{}, newInputError(d.String(), ErrTooManyDecimals)
		}
		var div, q, r apd.BigInt
		div.Exp(apd.NewBigInt(10), apd.NewBigInt(drop), nil)
		q.QuoRem(&coeff, &div, &r)
		if r.Sign() != 0 {
			return Amount{}, newInputError(d.String(), ErrTooManyDecimals)
		}
		if apd.NumDigits(&q) > maxIntDigits+maxFracDigits {
			return Amount{}, newInputError(d.String(), ErrOutOfRange)
		}
		cents = q.Int64()
	}
	// apd keeps Coeff non-negative, but a hand-built Decimal may not.
	if d.Negative != (d.Coeff.Sign() < 0) {
		cents = -cents
	}
	return FromCents(cents)
}

// pow10 returns 10^n for 0 <= n <= 12.
func pow10(n int64) int64 {
	p := int64(1)
	for range n {
		p *= 10
	}
	return p
}
