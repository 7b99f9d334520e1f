package plugintest_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
)

// instructionsFor is the smallest instruction budget (within 1%) under
// which epay's parse_callback of payload completes.
func instructionsFor(t *testing.T, sc *plugin.Script, payload string) int64 {
	t.Helper()
	completes := func(n int64) bool {
		p := plugin.NewRuntime(plugin.Options{Limits: plugin.Limits{Instructions: n, PoolSize: 1}}).Load(sc)
		defer p.Close()
		_, err := plugintest.CallErr(p, "parse_callback", map[string]any{"api_url": "http://127.0.0.1:1/", "pid": "1001", "key": "k3y"},
			map[string]any{"method": "GET", "payload": payload})
		var ce *plugin.CallError
		if errors.As(err, &ce) && ce.Kind == plugin.KindBudget {
			return false
		}
		require.NoError(t, err)
		return true
	}
	lo, hi := int64(100), plugin.DefaultLimits().Instructions
	require.True(t, completes(hi), "over the whole budget")
	for hi-lo > hi/100 {
		if mid := (lo + hi) / 2; completes(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// pairs builds a GET payload: pid and sign (so the signature is computed,
// the most expensive path), then n-2 more parts of the given shape, the
// whole padded to size bytes with its last value.
func pairs(n, size int, part func(i int) string) string {
	var b strings.Builder
	b.WriteString("pid=1001&sign=0123456789abcdef0123456789abcdef")
	for i := range n - 2 {
		b.WriteString("&" + part(i))
	}
	if pad := size - b.Len(); pad > 0 {
		b.WriteString(strings.Repeat("A", pad))
	}
	return b.String()
}

// The callback bounds (payment.MaxCallbackPairs parts in
// payment.MaxCallbackBytes) keep the worst payload they let through far
// below parse_callback's instruction budget, so no junk anyone can send
// exhausts it; the figures are the ones MaxCallbackPairs's comment cites
// (run with -v to see them).
func TestEpayParseCallbackWorstCaseUnderTheCallbackBounds(t *testing.T) {
	t.Parallel()
	sc := plugintest.Compile(t, "gateway/epay.lua")
	n, size := payment.MaxCallbackPairs, payment.MaxCallbackBytes
	plain := func(i int) string { return fmt.Sprintf("k%d=v", i) }
	percent := func(i int) string { return fmt.Sprintf("%%6B%d=%%76%s", i, strings.Repeat("%41", 150)) }
	long := func(i int) string { return fmt.Sprintf("k%d=%s", i, strings.Repeat("v", size/n-8)) }

	budget := plugin.DefaultLimits().Instructions
	var worst int64
	for name, payload := range map[string]string{
		"short parts, the rest in the last value": pairs(n, size, plain),
		"percent-encoded parts":                   pairs(n, size, percent),
		"long parts":                              pairs(n, size, long),
	} {
		require.LessOrEqual(t, len(payload), size, name)
		require.Equal(t, n-1, strings.Count(payload, "&"), name)
		cost := instructionsFor(t, sc, payload)
		t.Logf("%-40s %6d bytes, %d parts: %8d instructions (%.1f%% of the budget)", name, len(payload), n, cost, 100*float64(cost)/float64(budget))
		worst = max(worst, cost)
	}
	require.Less(t, worst, budget/10, "the worst payload within the bounds must cost under a tenth of the budget")

	// A real notification's cost, for scale: 40 parameters, signed.
	real := url.Values{}
	for i := range 38 {
		real.Set(fmt.Sprintf("param_%02d", i), fmt.Sprintf("value-%d", i))
	}
	real.Set("pid", "1001")
	real.Set("sign", md5hex("x"))
	t.Logf("%-40s %6d bytes, 40 parts: %8d instructions", "a 40-parameter notification", len(real.Encode()), instructionsFor(t, sc, real.Encode()))
}
