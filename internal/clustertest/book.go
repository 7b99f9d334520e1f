package clustertest

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"connectrpc.com/connect"
)

// book is the harness's own account of a run: what it asked for, what the
// gateway was paid, and how every call ended.
type book struct {
	mu sync.Mutex
	// outcomes counts "op code" (code "ok" for success).
	outcomes map[string]int
	// paid maps a payment id the fake gateway took money for to its cents.
	paid map[string]int64
	// orders of the paid payments.
	orders map[string]string
	// balance payments: order id → cents.
	balance map[string]int64
	// hostileAccepted lists hostile callbacks that were accepted (bugs).
	hostileAccepted []string
	// unexpected lists answers no fault explains.
	unexpected []string
	// internal counts the Internal answers by "op: message".
	internal map[string]int
}

func newBook() *book {
	return &book{outcomes: map[string]int{}, paid: map[string]int64{}, orders: map[string]string{}, balance: map[string]int64{}, internal: map[string]int{}}
}

func codeName(err error) string {
	if err == nil {
		return "ok"
	}
	return connect.CodeOf(err).String()
}

func (b *book) count(op string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.outcomes[op+" "+codeName(err)]++
	if connect.CodeOf(err) == connect.CodeInternal {
		msg := err.Error()
		var ce *connect.Error
		if errors.As(err, &ce) {
			msg = ce.Message()
		}
		b.internal[op+": "+msg]++
	}
}

// InternalAnswers are the Internal answers of the run, grouped by call and
// message, most frequent first, each marked whether the message names a
// gateway's failure (a refund whose outcome is unknown, a plugin that
// failed) or not (a fault of the service's own).
func (w *Bundle) InternalAnswers() []string {
	b := w.book
	b.mu.Lock()
	defer b.mu.Unlock()
	keys := make([]string, 0, len(b.internal))
	for k := range b.internal {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if b.internal[keys[i]] != b.internal[keys[j]] {
			return b.internal[keys[i]] > b.internal[keys[j]]
		}
		return keys[i] < keys[j]
	})
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		kind := "service"
		if strings.Contains(k, ": gateway ") {
			kind = "gateway"
		}
		out = append(out, fmt.Sprintf("%5d × [%s] %s", b.internal[k], kind, k))
	}
	return out
}

func (b *book) unexpectedf(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.unexpected) < 50 {
		b.unexpected = append(b.unexpected, fmt.Sprintf(format, args...))
	}
}

func (b *book) total(op string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for k, v := range b.outcomes {
		if strings.HasPrefix(k, op+" ") {
			n += v
		}
	}
	return n
}

func (b *book) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	keys := make([]string, 0, len(b.outcomes))
	for k := range b.outcomes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, b.outcomes[k]))
	}
	var paid int64
	for _, c := range b.paid {
		paid += c
	}
	var bal int64
	for _, c := range b.balance {
		bal += c
	}
	return fmt.Sprintf("gateway paid %d payments (%s), %d balance payments (%s); calls: %s",
		len(b.paid), formatCents(paid), len(b.balance), formatCents(bal), strings.Join(parts, ", "))
}
