package payment_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
)

// transitionsSeen records the payment transitions a service counts.
type transitionsSeen struct {
	mu   sync.Mutex
	seen []string
}

func (r *transitionsSeen) PaymentTransition(gw, status string, _ money.Amount, _ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, gw+":"+status)
}
func (r *transitionsSeen) MoneyCaptured(string, money.Amount, string)         {}
func (r *transitionsSeen) CallbackOutcome(string, string)                     {}
func (r *transitionsSeen) RefundOutcome(string, string, money.Amount, string) {}

func (r *transitionsSeen) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// Money captured for a payment that is already failed moves nothing, so
// the payment transitions metric does not count it. (capture's
// `st.moved = Status(p.Status) != StatusFailed` negated counted a move to
// failed that never happened, and no test looked at the metric.)
func TestALateSuccessCapturedForAFailedPaymentCountsNoTransition(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	rec := &transitionsSeen{}
	svc := f.metered(rec)
	orderID := f.order(t, "15.00")
	p := f.pay(t, orderID)
	orders := order.NewService(f.pool, []string{"CNY"}, nil, nil, nil)
	_, err := orders.CancelOrder(f.asAlice, orderID)
	require.NoError(t, err)

	_, err = svc.HandleCallback(context.Background(), f.callbackOf(notify(p.ID, "T9", "15.00")))
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.Contains(t, err.Error(), "late success")
	require.Equal(t, "failed", f.payment(t, p.ID).Status)
	require.Empty(t, rec.get(), "the payment was failed before and after")
}
