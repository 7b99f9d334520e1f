package payment_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
)

// A gateway's paid_at outside the times the service stores and encodes
// (year 0000 east of UTC is year -1; year 9999 west of it is year 10000)
// is no better than none: the payment settles at the service's time. It
// used to reach the order's audit row, whose JSON cannot hold such a year,
// so the status query (and the reconciler after it, forever) answered
// Internal and the money the gateway took was never recorded.
func TestAPaidAtTheServiceCannotStoreSettlesAtTheServicesTime(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	reports := map[string]uuid.UUID{"0000-01-01T00:00:00+08:00": f.order(t, "20.00"), "1969-12-31T23:59:59Z": f.order(t, "20.00")}
	payments := map[uuid.UUID]store.Payment{}
	for _, orderID := range reports {
		payments[orderID] = f.pay(t, orderID)
	}
	gw, err := f.gws.Get(context.Background(), f.epayGW)
	require.NoError(t, err)
	answer := ""
	gw.Plugin = callerFunc(func(string) (string, error) { return answer, nil })
	f.gws.set(gw)

	for paidAt, orderID := range reports {
		p := payments[orderID]
		answer = `{"status":"success","amount":"20.00","gateway_payment_id":"T-` + p.ID.String() + `","paid_at":"` + paidAt + `"}`
		_, err = f.svc.QueryPaymentStatus(f.admin, p.ID)
		require.NoError(t, err, paidAt)
		got := f.payment(t, p.ID)
		require.Equal(t, "success", got.Status)
		require.NotNil(t, got.PaidAt)
		require.WithinDuration(t, f.clock.Now(), *got.PaidAt, time.Millisecond, "%s: paid at the service's time", paidAt)
		require.Equal(t, "paid", f.orderStatus(t, orderID))
	}
}
