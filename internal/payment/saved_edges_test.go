package payment_test

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
)

// A success from a gateway that saves cards keeps the card its
// notification names, for the payment's customer; a failure naming one
// keeps nothing. Found by the mutation run: keepSavedMethod's first and
// last tests turned around (no method saved at all) passed every test of
// the package, whose gateways save nothing.
func TestASettledPaymentKeepsTheCardItsGatewayNamed(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	card := `"saved_method":{"gateway_customer_id":"cus_K","gateway_method_id":"pm_K","brand":"visa","last4":"4242","exp_month":12,"exp_year":2031}`
	settle := func(status string) {
		t.Helper()
		final := `"final":` + strconv.FormatBool(status == "failed") + `,` // a failure counts once final
		p := f.pay(t, f.order(t, "9.90"))
		f.epayAnswers(t, "parse_callback", `{"valid":true,"payment_id":"`+p.ID.String()+`","amount":"9.90","currency":"CNY","status":"`+status+`",`+
			`"gateway_payment_id":"T-`+p.ID.String()[:8]+`","gateway_tx_id":"T-`+p.ID.String()[:8]+`","ack":"success",`+final+card+`}`)
		gw, err := f.gws.Get(t.Context(), f.epayGW)
		require.NoError(t, err)
		gw.SavesMethods = true
		f.gws.set(gw)
		res, err := f.svc.HandleCallback(t.Context(), payment.Callback{GatewayInterfaceID: f.epayGW, Method: http.MethodGet, Payload: "x=1"})
		require.NoError(t, err)
		require.Equal(t, status, res.Payment.Status)
		gw.SavesMethods, gw.Plugin = false, f.epayPlugin
		f.gws.set(gw)
	}
	settle("failed")
	require.Equal(t, 0, f.count(t, `SELECT count(*) FROM saved_payment_methods`), "a failed payment keeps no card")
	settle("success")
	saved, err := f.svc.ListSavedMethods(f.asAlice, [16]byte{})
	require.NoError(t, err)
	require.Len(t, saved, 1)
	require.Equal(t, []string{f.alice.String(), "cus_K", "pm_K", "visa", "4242"},
		[]string{saved[0].CustomerID.String(), saved[0].GatewayCustomerID, saved[0].GatewayMethodID, saved[0].Brand, saved[0].Last4})
	require.Equal(t, [2]int32{12, 2031}, [2]int32{saved[0].ExpMonth, saved[0].ExpYear})
}

// [billing].reconcile_after dates a new payment's first status check; an
// unset one (0) is the default. Found by the mutation run: the default's
// test turned around (every setting replaced by the default) or moved
// (0 kept, so a payment is checked as it is made) passed every test of the
// package, which sets the default's own 10 minutes.
func TestANewPaymentIsFirstCheckedReconcileAfterItsCreation(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	for _, c := range []struct {
		set, want time.Duration
	}{{3 * time.Minute, 3 * time.Minute}, {0, payment.DefaultReconcileAfter}} {
		svc := payment.NewService(f.pool, slog.New(slog.DiscardHandler), payment.WithGateways(f.gws),
			payment.WithPublicURL(f.callback.URL), payment.WithReconcileAfter(c.set), payment.WithClock(f.clock.Now))
		orderID := f.order(t, "9.90")
		p, err := svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &orderID, GatewayInterfaceID: f.epayGW, ReturnURL: "https://x.example"})
		require.NoError(t, err)
		var after time.Duration
		require.NoError(t, f.pool.QueryRow(context.Background(),
			`SELECT (extract(epoch FROM next_reconcile_at - created_at) * 1e6)::bigint FROM payments WHERE id = $1`, p.ID).Scan((*int64)(&after)))
		require.Equal(t, c.want, after*time.Microsecond, "reconcile_after %s", c.set)
	}
}

// A customer's list of payments reads the primary, so the payment just
// made is in it; an admin's is a report and reads the replica. Found by
// the mutation run: the test turned around (customers on the replica,
// admins on the primary) passed every test of the package, which has no
// replica. The replica here is another, empty database.
func TestACustomersListReadsThePrimaryAndAnAdminsTheReplica(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	replica := testdb.Pool(t)
	svc := payment.NewService(f.pool, slog.New(slog.DiscardHandler), payment.WithGateways(f.gws),
		payment.WithReads(func() store.DB { return replica }))
	p := f.pay(t, f.order(t, "9.90"))
	mine, _, err := svc.List(f.asAlice, store.PaymentFilter{}, 1, 10)
	require.NoError(t, err)
	require.Len(t, mine, 1, "the customer's list is the primary's")
	require.Equal(t, p.ID, mine[0].ID)
	all, _, err := svc.List(f.admin, store.PaymentFilter{}, 1, 10)
	require.NoError(t, err)
	require.Empty(t, all, "the admin's list is the replica's")
}
