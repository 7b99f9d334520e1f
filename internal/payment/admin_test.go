package payment_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/paging"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/store"
)

// An admin finds the refunds waiting for them across payments, newest
// first, and pages through every refund; a payment's own list still
// answers all its refunds at once when no page is asked for.
func TestListRefundsFindsEveryPaymentsRefundsByStatusForAdmins(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	p1 := f.paidAtTheGateway(t, "100.00")
	p2 := f.paidAtTheGateway(t, "50.00")
	quiet := f.paidAtTheGateway(t, "1.00")

	// Each refund a second after the last, by the service's clock.
	refund := func(p store.Payment, amount string, lost bool) store.Refund {
		t.Helper()
		f.clock.Advance(time.Second)
		if lost {
			// The gateway's answer is lost: the refund stays pending.
			f.fake.InjectFault(epay.Fault{Path: "/api.php", Act: "refund", Status: http.StatusBadGateway, Times: 1})
			_, err := f.svc.RefundPayment(f.admin, p.ID, amount, "", "")
			require.True(t, apperr.Is(err, apperr.Internal), "%v", err)
			rs := f.refunds(t, p.ID)
			return rs[len(rs)-1]
		}
		res, err := f.svc.RefundPayment(f.admin, p.ID, amount, "", "")
		require.NoError(t, err)
		return res.Refund
	}
	r1 := refund(p1, "30.00", false) // succeeded
	r2 := refund(p1, "20.00", true)  // pending
	r3 := refund(p2, "10.00", true)  // pending, then recorded as failed
	r4 := refund(p2, "15.00", true)  // pending
	_, err := f.svc.ResolveRefund(f.admin, r3.ID, store.RefundFailed, "", "not in the gateway's refund list")
	require.NoError(t, err)
	r5 := refund(p2, "5.00", false) // succeeded
	for _, r := range []store.Refund{r2, r4} {
		require.Equal(t, store.RefundPending, r.Status)
	}

	type want struct {
		ids  []uuid.UUID
		page paging.Page
	}
	ids := func(rs ...store.Refund) []uuid.UUID {
		out := []uuid.UUID{}
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	status := func(s string) *string { return &s }
	for _, c := range []struct {
		name string
		q    payment.RefundQuery
		want want
	}{
		{"pending, no paging: page 1 of 20", payment.RefundQuery{Status: status("pending")},
			want{ids(r4, r2), paging.Page{Number: 1, Size: 20, Total: 2}}},
		{"every refund", payment.RefundQuery{Paged: true},
			want{ids(r5, r4, r3, r2, r1), paging.Page{Number: 1, Size: 20, Total: 5}}},
		{"every refund, page 2 of 2", payment.RefundQuery{Paged: true, Page: 2, Size: 2},
			want{ids(r3, r2), paging.Page{Number: 2, Size: 2, Total: 5}}},
		{"past the last page", payment.RefundQuery{Paged: true, Page: 4, Size: 2},
			want{ids(), paging.Page{Number: 4, Size: 2, Total: 5}}},
		{"failed", payment.RefundQuery{Status: status("failed")},
			want{ids(r3), paging.Page{Number: 1, Size: 20, Total: 1}}},
		{"one payment's, no paging: all of them", payment.RefundQuery{PaymentID: &p2.ID},
			want{ids(r5, r4, r3), paging.Page{Number: 1, Size: 3, Total: 3}}},
		{"one payment's, paged", payment.RefundQuery{PaymentID: &p2.ID, Paged: true, Page: 2, Size: 1},
			want{ids(r4), paging.Page{Number: 2, Size: 1, Total: 3}}},
		{"one payment's pending", payment.RefundQuery{PaymentID: &p2.ID, Status: status("pending"), Paged: true},
			want{ids(r4), paging.Page{Number: 1, Size: 20, Total: 1}}},
		{"a payment without refunds", payment.RefundQuery{PaymentID: &quiet.ID},
			want{ids(), paging.Page{Number: 1, Size: 0, Total: 0}}},
	} {
		rs, page, err := f.svc.ListRefunds(f.admin, c.q)
		require.NoError(t, err, c.name)
		got := []uuid.UUID{}
		for _, r := range rs {
			got = append(got, r.ID)
			require.Equal(t, "CNY", r.Currency, c.name)
		}
		require.Equal(t, c.want, want{got, page}, c.name)
	}
	all, _, err := f.svc.ListRefunds(f.admin, payment.RefundQuery{})
	require.NoError(t, err)
	require.Equal(t, r4.ID, all[1].ID)
	require.NotEmpty(t, all[1].Error, "a pending refund says why it waits")
	var admin string
	require.NoError(t, f.pool.QueryRow(t.Context(), `SELECT username FROM admin_users WHERE id = $1`, f.adminID).Scan(&admin))
	for _, r := range all {
		require.Equal(t, admin, r.RequestedByName, "every refund names the admin who asked for it")
	}
	require.Equal(t, r3.ID, all[2].ID)
	require.Equal(t, "failed at the gateway (checked by an admin)", all[2].Error, "an admin's failed resolution says so")

	// What it refuses.
	for _, c := range []struct {
		name string
		q    payment.RefundQuery
		kind apperr.Kind
	}{
		{"an unknown payment", payment.RefundQuery{PaymentID: new(uuid.New())}, apperr.NotFound},
		{"an unknown payment, paged", payment.RefundQuery{PaymentID: new(uuid.New()), Paged: true}, apperr.NotFound},
		{"a page of more than 100", payment.RefundQuery{Paged: true, Size: 101}, apperr.InvalidArgument},
		{"an unknown status", payment.RefundQuery{Status: status("refunded")}, apperr.InvalidArgument},
	} {
		_, _, err := f.svc.ListRefunds(f.admin, c.q)
		require.True(t, apperr.Is(err, c.kind), "%s: %v", c.name, err)
	}
	_, _, err = f.svc.ListRefunds(f.asAlice, payment.RefundQuery{PaymentID: &p1.ID})
	require.True(t, apperr.Is(err, apperr.PermissionDenied), "a customer, even of her own payment: %v", err)
	_, _, err = f.svc.ListRefunds(t.Context(), payment.RefundQuery{})
	require.True(t, apperr.Is(err, apperr.Unauthenticated), "%v", err)
}
