package payment_test

import (
	"log/slog"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/store"
)

// refundsSeen records the refund outcomes and payment transitions a
// service counts.
type refundsSeen struct {
	mu   sync.Mutex
	seen []string
}

func (r *refundsSeen) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, s)
}

func (r *refundsSeen) PaymentTransition(gw, status string, amount money.Amount, _ string) {
	r.add("transition " + gw + ":" + status + " " + amount.String())
}
func (r *refundsSeen) MoneyCaptured(string, money.Amount, string) {}
func (r *refundsSeen) CallbackOutcome(string, string)             {}
func (r *refundsSeen) RefundOutcome(gw, outcome string, amount money.Amount, _ string) {
	r.add("refund " + gw + ":" + outcome + " " + amount.String())
}

func (r *refundsSeen) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// Each refund's outcome is counted once, and a payment's move to refunded
// only when the last refund empties it.
func TestRefundMetricsCountEachOutcomeAndTheMoveToRefunded(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	rec := &refundsSeen{}
	svc := f.metered(rec)
	p := f.paidAtTheGateway(t, "10.00")

	_, err := svc.RefundPayment(f.admin, p.ID, "4.00", "", "")
	require.NoError(t, err)
	f.fake.InjectFault(epay.Fault{Path: "/api.php", Act: "refund", Status: http.StatusBadRequest, Times: 1})
	_, err = svc.RefundPayment(f.admin, p.ID, "1.00", "", "")
	require.True(t, apperr.Is(err, apperr.Internal), "%v", err)
	_, err = svc.RefundPayment(f.admin, p.ID, "", "", "")
	require.NoError(t, err)

	require.Equal(t, []string{
		"refund epay:succeeded 4.00",
		"refund epay:failed 1.00",
		"refund epay:succeeded 6.00",
		"transition epay:refunded 10.00",
	}, rec.get())
}

// A refund an admin resolves is counted under its payment's gateway, as
// one the gateway answered. Found by the mutation run: the gateway lookup
// of ResolveRefund's count turned around (every resolution counted under
// "unknown") passed every test.
func TestAResolvedRefundIsCountedUnderItsGateway(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	rec := &refundsSeen{}
	svc := f.metered(rec)
	p := f.paidAtTheGateway(t, "10.00")

	for range 2 {
		f.fake.InjectFault(epay.Fault{Path: "/api.php", Act: "refund", Status: http.StatusBadGateway, Times: 1})
		_, err := svc.RefundPayment(f.admin, p.ID, "3.00", "", "")
		require.True(t, apperr.Is(err, apperr.Internal), "%v", err)
	}
	rs := f.refunds(t, p.ID)
	require.Len(t, rs, 2)
	_, err := svc.ResolveRefund(f.admin, rs[0].ID, store.RefundFailed, "", "not in the gateway's refund list")
	require.NoError(t, err)
	_, err = svc.ResolveRefund(f.admin, rs[1].ID, store.RefundSucceeded, "R-2", "in the gateway's refund list")
	require.NoError(t, err)
	require.Equal(t, []string{
		"refund epay:unknown 3.00",
		"refund epay:unknown 3.00",
		"refund epay:failed 3.00",
		"refund epay:succeeded 3.00",
	}, rec.get())
}

// metered is a service over f's database and gateways that counts into m.
func (f *flowBundle) metered(m payment.Metrics) *payment.Service {
	return payment.NewService(f.pool, slog.New(slog.DiscardHandler),
		payment.WithGateways(f.gws), payment.WithClock(f.clock.Now), payment.WithMetrics(m))
}
