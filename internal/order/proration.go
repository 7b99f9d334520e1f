package order

import (
	"fmt"
	"time"

	"github.com/cockroachdb/apd/v3"

	"github.com/rustbill/paymentd/internal/money"
)

// UnusedShare is the part of price that pays for the rest of the calendar
// period [start, end) at now: price × (end − now) / (end − start), the
// times counted in whole seconds (truncated), rounded half-even to the
// cent (docs/operations.md, "Ending a service"). now at or before start is
// the whole price; at or after end, nothing. The share is never more than
// price and never negative, so a credit of it never exceeds what was paid
// for the period. Plan changes prorate with it too (issue 38, §2).
func UnusedShare(price money.Amount, start, end, now time.Time) (money.Amount, error) {
	total := int64(end.Sub(start) / time.Second)
	if total <= 0 {
		return money.Amount{}, fmt.Errorf("proration: the period %s..%s is empty", start, end)
	}
	if price.Sign() < 0 {
		return money.Amount{}, fmt.Errorf("proration: a negative price %s", price)
	}
	unused := int64(end.Sub(now) / time.Second)
	switch {
	case unused <= 0:
		return money.Amount{}, nil
	case unused >= total:
		return price, nil
	}
	// cents × unused / total, exactly, then rounded half-even to a whole
	// cent.
	c, err := money.MulDiv(price.Cents(), unused, total, apd.RoundHalfEven)
	if err != nil {
		return money.Amount{}, err
	}
	if c > price.Cents() { // cannot happen (unused < total); a guard for the rule
		c = price.Cents()
	}
	return money.FromCents(c)
}
