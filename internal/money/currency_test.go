package money_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
)

func TestIsCurrencyCodeTakesThreeCapitalLettersOnly(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"CNY": true, "USD": true, "EUR": true,
		// The ends of the range, and the characters just past them.
		"ZAR": true, "AZN": true, "@SD": false, "US[": false,
		"": false, "usd": false, "Usd": false, "US": false, "USDT": false, "U5D": false, "ÜSD": false, " USD": false, "*": false,
	} {
		require.Equal(t, want, money.IsCurrencyCode(s), "%q", s)
	}
}
