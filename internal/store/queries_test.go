package store_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

func TestAdminUsersBootstrapQueries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	n, err := b.q.CountAdmins(ctx)
	require.NoError(t, err)
	require.Zero(t, n)

	_, err = b.q.GetAdminByUsername(ctx, "admin")
	require.ErrorIs(t, store.MapError(err), store.ErrNotFound)

	created, err := b.q.CreateAdmin(ctx, dbsqlc.CreateAdminParams{Username: "admin", PasswordHash: "$argon2id$x"})
	require.NoError(t, err)
	got, err := b.q.GetAdminByUsername(ctx, "admin")
	require.NoError(t, err)
	require.Equal(t, created.ID, got.ID)
	require.Nil(t, got.DisabledAt)
	require.False(t, got.CreatedAt.IsZero())

	_, err = b.q.CreateAdmin(ctx, dbsqlc.CreateAdminParams{Username: "admin", PasswordHash: "$argon2id$y"})
	err = store.MapError(err)
	require.ErrorIs(t, err, store.ErrConflict)
	require.Equal(t, "admin_users_username_key", store.ConstraintOf(err))

	n, err = b.q.CountAdmins(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
}

func TestInsertPaymentRoundTripsEveryColumn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	p := b.pendingPayment()
	p.InvoiceID = ptr(b.invoiceID)
	p.Amount = money.MustParse("12.30")
	p.ReturnUrl = "https://shop.example/return"
	p.NextReconcileAt = ptr(time.Now().Add(time.Minute).Truncate(time.Microsecond))
	ins, err := b.q.InsertPayment(ctx, p)
	require.NoError(t, err)

	got, err := b.q.GetPayment(ctx, ins.ID)
	require.NoError(t, err)
	require.Equal(t, ins, got)
	require.Equal(t, "12.30", got.Amount.String())
	require.Equal(t, "0.00", got.RefundedAmount.String())
	require.Equal(t, b.invoiceID, *got.InvoiceID)
	require.Equal(t, b.gatewayA, *got.GatewayInterfaceID)
	require.Equal(t, "pending", got.Status)
	require.Empty(t, got.GatewayPaymentID)
	require.Nil(t, got.PaidAt)
	require.True(t, p.NextReconcileAt.Equal(*got.NextReconcileAt))

	_, err = b.q.GetPayment(ctx, uuid.New())
	require.ErrorIs(t, store.MapError(err), store.ErrNotFound)
}

func TestBalancePaymentNeedsNoGatewayInterface(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.pendingPayment()
	p.Method = "balance"
	p.GatewayInterfaceID = nil
	p.Status = "success"
	p.PaidAt = ptr(time.Now())
	got, err := b.q.InsertPayment(context.Background(), p)
	require.NoError(t, err)
	require.Nil(t, got.GatewayInterfaceID)
	require.NotNil(t, got.PaidAt)
}

func TestListPaymentsFiltersScopesAndOrdersNewestFirst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	// Three payments in one transaction share created_at, so id DESC breaks the tie.
	var sameTime []uuid.UUID
	require.NoError(t, store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		for _, gw := range []uuid.UUID{b.gatewayA, b.gatewayB} {
			p := b.pendingPayment()
			p.GatewayInterfaceID = ptr(gw)
			row, err := q.InsertPayment(ctx, p)
			if err != nil {
				return err
			}
			sameTime = append(sameTime, row.ID)
		}
		p := b.pendingPayment()
		p.InvoiceID = ptr(b.invoiceID)
		p.Status, p.FailedAt = "failed", ptr(time.Now())
		row, err := q.InsertPayment(ctx, p)
		sameTime = append(sameTime, row.ID)
		return err
	}))
	// A later payment of another customer's order.
	var otherOrder uuid.UUID
	require.NoError(t, b.pool.QueryRow(ctx, `INSERT INTO orders (customer_id, total_amount, currency)
		VALUES ($1, 5.00, 'CNY') RETURNING id`, b.otherID).Scan(&otherOrder))
	p := b.pendingPayment()
	p.OrderID, p.CustomerID, p.Amount = ptr(otherOrder), b.otherID, money.MustParse("5.00")
	latest, err := b.q.InsertPayment(ctx, p)
	require.NoError(t, err)

	ids := func(f dbsqlc.ListPaymentsParams) []uuid.UUID {
		t.Helper()
		if f.RowLimit == 0 {
			f.RowLimit = 100
		}
		rows, err := b.q.ListPayments(ctx, f)
		require.NoError(t, err)
		count, err := b.q.CountPayments(ctx, dbsqlc.CountPaymentsParams{
			CustomerID: f.CustomerID, OrderID: f.OrderID, InvoiceID: f.InvoiceID,
			GatewayInterfaceID: f.GatewayInterfaceID, Status: f.Status,
		})
		require.NoError(t, err)
		out := make([]uuid.UUID, 0, len(rows))
		for _, r := range rows {
			out = append(out, r.ID)
		}
		if f.RowOffset == 0 && f.RowLimit == 100 {
			require.EqualValues(t, len(out), count, "CountPayments agrees with ListPayments")
		}
		return out
	}
	byIDDesc := sortedDesc(sameTime)

	require.Equal(t, append([]uuid.UUID{latest.ID}, byIDDesc...), ids(dbsqlc.ListPaymentsParams{}))
	require.Equal(t, byIDDesc, ids(dbsqlc.ListPaymentsParams{CustomerID: ptr(b.customerID)}))
	require.Equal(t, []uuid.UUID{latest.ID}, ids(dbsqlc.ListPaymentsParams{CustomerID: ptr(b.otherID)}))
	require.Equal(t, byIDDesc, ids(dbsqlc.ListPaymentsParams{OrderID: ptr(b.orderID)}))
	require.Equal(t, []uuid.UUID{sameTime[2]}, ids(dbsqlc.ListPaymentsParams{InvoiceID: ptr(b.invoiceID)}))
	require.Equal(t, []uuid.UUID{sameTime[2]}, ids(dbsqlc.ListPaymentsParams{Status: ptr("failed")}))
	require.Equal(t, []uuid.UUID{sameTime[1]}, ids(dbsqlc.ListPaymentsParams{GatewayInterfaceID: ptr(b.gatewayB)}))
	require.Empty(t, ids(dbsqlc.ListPaymentsParams{CustomerID: ptr(b.otherID), OrderID: ptr(b.orderID)}),
		"the customer scope holds whatever the other filters say")

	// Paging: page 2 of size 2.
	require.Equal(t, byIDDesc[1:], ids(dbsqlc.ListPaymentsParams{RowLimit: 2, RowOffset: 2}))
}

// sortedDesc orders ids as PostgreSQL's ORDER BY id DESC does (bytewise).
func sortedDesc(in []uuid.UUID) []uuid.UUID {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b uuid.UUID) int { return bytes.Compare(b[:], a[:]) })
	return out
}

func TestGetPaymentForUpdateHoldsTheRowUntilTheTransactionEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	pay, err := b.q.InsertPayment(ctx, b.pendingPayment())
	require.NoError(t, err)

	require.NoError(t, store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := dbsqlc.New(tx).GetPaymentForUpdate(ctx, pay.ID)
		require.NoError(t, err)

		err = store.WithTx(ctx, b.pool, func(other pgx.Tx) error {
			if _, err := other.Exec(ctx, `SET LOCAL lock_timeout = '50ms'`); err != nil {
				return err
			}
			_, err := dbsqlc.New(other).GetPaymentForUpdate(ctx, pay.ID)
			return store.MapError(err)
		})
		require.ErrorIs(t, err, store.ErrLockNotAvailable)
		return nil
	}))
}

func TestGetOrderAndGetOrderForUpdate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	o, err := b.q.GetOrder(ctx, b.orderID)
	require.NoError(t, err)
	require.Equal(t, "pending", o.Status)
	require.Equal(t, "100.00", o.TotalAmount.String())
	require.NoError(t, store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		locked, err := dbsqlc.New(tx).GetOrderForUpdate(ctx, b.orderID)
		require.Equal(t, o, locked)
		return err
	}))
	_, err = b.q.GetOrder(ctx, uuid.New())
	require.ErrorIs(t, store.MapError(err), store.ErrNotFound)
}

func TestLeaderLeaseElectionRenewalExpiryAndResignation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const ttl = 30 * time.Second

	a, err := b.q.LeaderAttemptElect(ctx, dbsqlc.LeaderAttemptElectParams{Role: "event_worker", Holder: "node-a", Ttl: ttl})
	require.NoError(t, err)
	require.Equal(t, "node-a", a.Holder)
	require.Equal(t, ttl, a.ExpiresAt.Sub(a.ElectedAt))

	// Held and unexpired: nobody else is elected, and not node-a again either.
	for _, holder := range []string{"node-b", "node-a"} {
		_, err = b.q.LeaderAttemptElect(ctx, dbsqlc.LeaderAttemptElectParams{Role: "event_worker", Holder: holder, Ttl: ttl})
		require.ErrorIs(t, store.MapError(err), store.ErrNotFound, holder)
	}
	// Another role is independent.
	_, err = b.q.LeaderAttemptElect(ctx, dbsqlc.LeaderAttemptElectParams{Role: "billing", Holder: "node-b", Ttl: ttl})
	require.NoError(t, err)

	// Only the holder renews its own term.
	renewed, err := b.q.LeaderReElect(ctx, dbsqlc.LeaderReElectParams{Role: "event_worker", Holder: "node-a", ElectedAt: a.ElectedAt, Ttl: ttl})
	require.NoError(t, err)
	require.Equal(t, a.ElectedAt, renewed.ElectedAt)
	require.False(t, renewed.ExpiresAt.Before(a.ExpiresAt))
	_, err = b.q.LeaderReElect(ctx, dbsqlc.LeaderReElectParams{Role: "event_worker", Holder: "node-b", ElectedAt: a.ElectedAt, Ttl: ttl})
	require.ErrorIs(t, store.MapError(err), store.ErrNotFound)

	cur, err := b.q.LeaderGet(ctx, "event_worker")
	require.NoError(t, err)
	require.Equal(t, "node-a", cur.Holder)
	require.True(t, cur.Valid)

	// Resigning ends the term; another node is elected at once.
	n, err := b.q.LeaderResign(ctx, dbsqlc.LeaderResignParams{Role: "event_worker", Holder: "node-a", ElectedAt: a.ElectedAt})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	bTerm, err := b.q.LeaderAttemptElect(ctx, dbsqlc.LeaderAttemptElectParams{Role: "event_worker", Holder: "node-b", Ttl: 20 * time.Millisecond})
	require.NoError(t, err)

	// An expired lease is taken over, and the old term can no longer renew or resign.
	time.Sleep(50 * time.Millisecond)
	_, err = b.q.LeaderReElect(ctx, dbsqlc.LeaderReElectParams{Role: "event_worker", Holder: "node-b", ElectedAt: bTerm.ElectedAt, Ttl: ttl})
	require.ErrorIs(t, store.MapError(err), store.ErrNotFound, "an expired term is not renewed")
	c, err := b.q.LeaderAttemptElect(ctx, dbsqlc.LeaderAttemptElectParams{Role: "event_worker", Holder: "node-c", Ttl: ttl})
	require.NoError(t, err)
	require.True(t, c.ElectedAt.After(bTerm.ElectedAt))
	n, err = b.q.LeaderResign(ctx, dbsqlc.LeaderResignParams{Role: "event_worker", Holder: "node-b", ElectedAt: bTerm.ElectedAt})
	require.NoError(t, err)
	require.Zero(t, n)
}
