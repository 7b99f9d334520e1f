package money

import "github.com/cockroachdb/apd/v3"

// ratioCtx holds every digit of a product of two int64 and of its quotient
// far past the unit, so the one rounding is the one asked for.
var ratioCtx = apd.BaseContext.WithPrecision(40)

// MulDiv is a × b / d, exactly, rounded once to a whole number by rounding
// (apd.RoundHalfEven, apd.RoundHalfUp, …): the share of a price in cents
// for a part of a period, or twelfths of a cent in cents. The product is
// not bounded by int64; the result must be. d must not be 0.
func MulDiv(a, b, d int64, rounding apd.Rounder) (int64, error) {
	ctx := *ratioCtx
	ctx.Rounding = rounding
	var p, q, r apd.Decimal
	if _, err := ctx.Mul(&p, apd.New(a, 0), apd.New(b, 0)); err != nil {
		return 0, err
	}
	if _, err := ctx.Quo(&q, &p, apd.New(d, 0)); err != nil {
		return 0, err
	}
	if _, err := ctx.Quantize(&r, &q, 0); err != nil {
		return 0, err
	}
	return r.Int64()
}
