package order

import (
	"slices"
	"strings"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
)

// BillingCycle is how often a product is billed (products.billing_cycle);
// an order keeps the one it was bought with (orders.billing_cycle). A
// product's price is the price of one cycle.
type BillingCycle string

// The billing cycles. One-time is the default: a product created without a
// cycle is bought once, as every product was before cycles existed.
const (
	CycleOneTime    BillingCycle = store.OneTime
	CycleMonthly    BillingCycle = "monthly"
	CycleQuarterly  BillingCycle = "quarterly"
	CycleSemiAnnual BillingCycle = "semi_annual"
	CycleAnnual     BillingCycle = "annual"
)

// BillingCycles lists every billing cycle, shortest first: the schema's
// CHECKs and the API's `in` rules list the same values (cycle_test.go).
var BillingCycles = []BillingCycle{CycleOneTime, CycleMonthly, CycleQuarterly, CycleSemiAnnual, CycleAnnual}

// billingCycleField names the cycle in messages, as the API names it.
const billingCycleField = "billing_cycle"

// parseCycle checks a cycle a caller sent; "" is one-time. One outside
// the list is InvalidArgument naming the field and the value.
func parseCycle(c string) (BillingCycle, error) {
	if c == "" {
		return CycleOneTime, nil
	}
	if !slices.Contains(BillingCycles, BillingCycle(c)) {
		names := make([]string, len(BillingCycles))
		for i, b := range BillingCycles {
			names[i] = string(b)
		}
		return "", apperr.New(apperr.InvalidArgument, "%s %q is not a billing cycle (one of: %s)", billingCycleField, c, strings.Join(names, ", "))
	}
	return BillingCycle(c), nil
}

// billingOf is what an order of product p bills its later periods at: the
// product's cycle and price, and no renewal price for a one-time product.
func billingOf(p store.Product) store.OrderBilling {
	b := store.OrderBilling{BillingCycle: p.BillingCycle}
	if BillingCycle(p.BillingCycle) != CycleOneTime {
		b.RenewalPrice = money.NullAmount{Amount: p.Price, Valid: true}
	}
	return b
}

// nonFinalStatuses are the statuses of the orders that still have later
// periods: those UpdateProduct's apply_to_existing_orders moves.
func nonFinalStatuses() []string {
	var out []string
	for _, s := range Statuses {
		if !s.IsFinal() {
			out = append(out, string(s))
		}
	}
	return out
}
