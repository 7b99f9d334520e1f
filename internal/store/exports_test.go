package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/store"
)

// The export's pages, whatever their size, give every selected row once,
// in (created_at, id) order — rows of one created_at split across pages
// included — and no connection is held while the caller takes a row: a
// slow client of the CSV export holds no connection of the pool.
func TestExportPagesGiveEveryRowOnceInOrderAndHoldNoConnectionBetween(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	day := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	// 40 payments: 25 of one microsecond (ties broken by id), 15 a minute
	// apart; every third failed, the others paid; and two outside the range.
	_, err := b.pool.Exec(ctx, `
		INSERT INTO payments (order_id, customer_id, method, amount, currency, status, paid_at, failed_at, created_at)
		SELECT $3, $1, 'balance', 1.00, 'CNY', CASE WHEN g % 3 = 0 THEN 'failed' ELSE 'success' END,
		       CASE WHEN g % 3 <> 0 THEN $2::timestamptz END, CASE WHEN g % 3 = 0 THEN $2::timestamptz END,
		       CASE WHEN g <= 25 THEN $2::timestamptz + interval '1 hour 0.000001 second'
		            ELSE $2::timestamptz + g * interval '1 minute' END
		FROM generate_series(1, 40) g`, b.customerID, day, b.orderID)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `
		INSERT INTO payments (order_id, customer_id, method, amount, currency, status, failed_at, created_at)
		VALUES ($3, $1, 'balance', 1.00, 'CNY', 'failed', $2, $2::timestamptz - interval '1 microsecond'),
		       ($3, $1, 'balance', 1.00, 'CNY', 'failed', $2, $2::timestamptz + interval '1 day')`, b.customerID, day, b.orderID)
	require.NoError(t, err)
	ids := func(status string) []uuid.UUID {
		rows, err := b.pool.Query(ctx, `SELECT id FROM payments
			WHERE created_at >= $1 AND created_at < $2 AND ($3 = '' OR status = $3) ORDER BY created_at, id`,
			day, day.AddDate(0, 0, 1), status)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		require.NoError(t, err)
		return got
	}
	all, failed := ids(""), ids("failed")
	require.Len(t, all, 40)
	require.Len(t, failed, 13)

	f := store.ExportPaymentFilter{CreatedFrom: day, CreatedTo: day.AddDate(0, 0, 1)}
	status := "failed"
	for _, pageRows := range []int{1, 3, 7, 40, 0} {
		var got []uuid.UUID
		require.NoError(t, store.EachExportPayment(ctx, b.pool, f, pageRows, func(p store.ExportPayment) error {
			require.Zero(t, b.pool.Stat().AcquiredConns(), "a connection is held while the row is taken")
			got = append(got, p.ID)
			return nil
		}))
		require.Equal(t, all, got, "pages of %d", pageRows)

		got = nil
		ff := f
		ff.Status = &status
		require.NoError(t, store.EachExportPayment(ctx, b.pool, ff, pageRows, func(p store.ExportPayment) error {
			got = append(got, p.ID)
			return nil
		}))
		require.Equal(t, failed, got, "failed, pages of %d", pageRows)
	}
}

func TestExportRefundPagesGiveEveryRowOnceInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	day := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	var paymentID uuid.UUID
	require.NoError(t, b.pool.QueryRow(ctx, `
		INSERT INTO payments (order_id, customer_id, method, amount, currency, status, paid_at, created_at)
		VALUES ($3, $1, 'balance', 100.00, 'CNY', 'success', $2, $2) RETURNING id`, b.customerID, day, b.orderID).Scan(&paymentID))
	_, err := b.pool.Exec(ctx, `
		INSERT INTO refunds (payment_id, amount, reason, created_at)
		SELECT $1, 1.00, 'r' || g,
		       CASE WHEN g <= 6 THEN $2::timestamptz + interval '1 hour' ELSE $2::timestamptz + g * interval '1 minute' END
		FROM generate_series(1, 10) g`, paymentID, day)
	require.NoError(t, err)
	rows, err := b.pool.Query(ctx, `SELECT id FROM refunds ORDER BY created_at, id`)
	require.NoError(t, err)
	want, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	require.Len(t, want, 10)

	f := store.ExportRefundFilter{CreatedFrom: day, CreatedTo: day.AddDate(0, 0, 1), CustomerID: &b.customerID}
	for _, pageRows := range []int{1, 4, 10, 0} {
		var got []uuid.UUID
		require.NoError(t, store.EachExportRefund(ctx, b.pool, f, pageRows, func(r store.ExportRefund) error {
			require.Zero(t, b.pool.Stat().AcquiredConns(), "a connection is held while the row is taken")
			require.Equal(t, "CNY", r.Currency)
			got = append(got, r.ID)
			return nil
		}))
		require.Equal(t, want, got, "pages of %d", pageRows)
	}
}
