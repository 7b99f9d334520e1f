package payment_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/paging"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/rpc"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testdb"
	"github.com/rustbill/paymentd/internal/testfixture"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testdb.Main(m)) }

type bundle struct {
	pool      *pgxpool.Pool
	svc       *payment.Service
	alice     uuid.UUID
	bob       uuid.UUID
	gateway   uuid.UUID
	asAlice   context.Context
	asBob     context.Context
	asAdmin   context.Context
	anonymous context.Context
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool := testdb.Pool(t)
	b := &bundle{pool: pool, svc: payment.NewService(pool, slog.New(slog.DiscardHandler))}
	b.alice = testfixture.Customer(t, pool)
	b.bob = testfixture.Customer(t, pool)
	b.gateway = testfixture.GatewayInterface(t, pool, "epay")
	bg := context.Background()
	b.asAlice = auth.WithPrincipal(bg, auth.Principal{Role: auth.RoleCustomer, ID: b.alice, Kind: auth.KindJWT})
	b.asBob = auth.WithPrincipal(bg, auth.Principal{Role: auth.RoleCustomer, ID: b.bob, Kind: auth.KindJWT})
	b.asAdmin = auth.WithPrincipal(bg, auth.Principal{Role: auth.RoleAdmin, ID: uuid.New(), Kind: auth.KindSession})
	b.anonymous = bg
	return b
}

func TestGetPaymentIsScopedToItsCustomer(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := testfixture.InsertPayment(t, b.pool, testfixture.Payment{Customer: b.alice, Gateway: b.gateway, Amount: "12.30"})

	p, err := b.svc.Get(b.asAlice, id)
	require.NoError(t, err)
	require.Equal(t, "12.30", p.Amount.String())

	_, err = b.svc.Get(b.asAdmin, id)
	require.NoError(t, err, "admins see every payment")

	_, err = b.svc.Get(b.asBob, id)
	require.True(t, apperr.Is(err, apperr.PermissionDenied), "%v", err)

	_, err = b.svc.Get(b.anonymous, id)
	require.True(t, apperr.Is(err, apperr.Unauthenticated), "%v", err)

	_, err = b.svc.Get(b.asAdmin, uuid.New())
	require.True(t, apperr.Is(err, apperr.NotFound), "%v", err)
}

func TestListPaymentsPagesNewestFirstAndScopesCustomers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	base := time.Now().Add(-time.Hour)
	var alices []uuid.UUID
	for i := range 5 {
		alices = append(alices, testfixture.InsertPayment(t, b.pool, testfixture.Payment{
			Customer: b.alice, Gateway: b.gateway, CreatedAt: base.Add(time.Duration(i) * time.Minute),
		}))
	}
	testfixture.InsertPayment(t, b.pool, testfixture.Payment{Customer: b.bob, Gateway: b.gateway, Status: "success"})

	rows, page, err := b.svc.List(b.asAlice, store.PaymentFilter{}, 1, 2)
	require.NoError(t, err)
	require.Equal(t, paging.Page{Number: 1, Size: 2, Total: 5}, page)
	require.Equal(t, uint32(3), page.TotalPages())
	require.Equal(t, []uuid.UUID{alices[4], alices[3]}, []uuid.UUID{rows[0].ID, rows[1].ID})

	rows, _, err = b.svc.List(b.asAlice, store.PaymentFilter{}, 3, 2)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, alices[0], rows[0].ID)

	rows, page, err = b.svc.List(b.asAlice, store.PaymentFilter{}, 4, 2)
	require.NoError(t, err)
	require.Empty(t, rows, "past the last page is empty, not an error")
	require.Equal(t, uint64(5), page.Total)

	// A customer cannot widen the scope with a filter on someone else's data.
	other := b.bob
	rows, page, err = b.svc.List(b.asAlice, store.PaymentFilter{CustomerID: &other}, 0, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(5), page.Total)
	require.Equal(t, uint32(paging.DefaultSize), page.Size)
	for _, r := range rows {
		require.Equal(t, b.alice, r.CustomerID)
	}

	_, page, err = b.svc.List(b.asAdmin, store.PaymentFilter{}, 1, 100)
	require.NoError(t, err)
	require.Equal(t, uint64(6), page.Total, "admins see all")

	success := "success"
	rows, _, err = b.svc.List(b.asAdmin, store.PaymentFilter{Status: &success}, 1, 10)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, b.bob, rows[0].CustomerID)

	_, _, err = b.svc.List(b.asAdmin, store.PaymentFilter{}, 1, 101)
	require.True(t, apperr.Is(err, apperr.InvalidArgument))

	_, _, err = b.svc.List(b.anonymous, store.PaymentFilter{}, 1, 10)
	require.True(t, apperr.Is(err, apperr.Unauthenticated))
}

func TestRecordFormatsMoneyAndTimes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pending := testfixture.InsertPayment(t, b.pool, testfixture.Payment{Customer: b.alice, Gateway: b.gateway, Amount: "5"})
	paid := testfixture.InsertPayment(t, b.pool, testfixture.Payment{Customer: b.alice, Gateway: b.gateway, Status: "success"})

	p, err := b.svc.Get(b.asAdmin, pending)
	require.NoError(t, err)
	rec := rpc.PaymentRecord(p)
	require.Equal(t, "5.00", rec.Amount)
	require.Equal(t, "0.00", rec.RefundedAmount)
	require.Empty(t, rec.PaidAt, "paid_at is empty while unpaid")
	require.Empty(t, rec.GatewayPaymentId, "empty until a callback")
	require.Empty(t, rec.InvoiceId)
	_, err = time.Parse(time.RFC3339, rec.CreatedAt)
	require.NoError(t, err)

	p, err = b.svc.Get(b.asAdmin, paid)
	require.NoError(t, err)
	rec = rpc.PaymentRecord(p)
	_, err = time.Parse(time.RFC3339, rec.PaidAt)
	require.NoError(t, err)
	require.Equal(t, "success", rec.Status)
}
