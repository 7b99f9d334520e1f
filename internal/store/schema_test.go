package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/store/dbsqlc"
)

// The schema's constraints are the last line of defence for money: each case
// writes one bad row and expects the named constraint to refuse it.
func TestSchemaRejectsBadRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	insertPayment := func(edit func(p *dbsqlc.InsertPaymentParams)) func(tx pgx.Tx) error {
		return func(tx pgx.Tx) error {
			p := b.pendingPayment()
			edit(&p)
			_, err := dbsqlc.New(tx).InsertPayment(ctx, p)
			return err
		}
	}
	// paidPayment inserts a successful payment and returns its id.
	paidPayment := func(tx pgx.Tx) (string, error) {
		p := b.pendingPayment()
		p.Status = "success"
		p.PaidAt = ptr(time.Now())
		row, err := dbsqlc.New(tx).InsertPayment(ctx, p)
		return row.ID.String(), err
	}
	exec := func(sql string, args ...any) func(tx pgx.Tx) error {
		return func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, sql, args...)
			return err
		}
	}

	cases := []struct {
		name       string
		run        func(tx pgx.Tx) error
		kind       error
		constraint string
	}{
		{
			name:       "NegativePaymentAmount",
			run:        insertPayment(func(p *dbsqlc.InsertPaymentParams) { p.Amount = money.MustParse("-5.00") }),
			kind:       store.ErrCheckViolation,
			constraint: "payments_amount_check",
		},
		{
			name:       "ZeroPaymentAmount",
			run:        insertPayment(func(p *dbsqlc.InsertPaymentParams) { p.Amount = money.Zero() }),
			kind:       store.ErrCheckViolation,
			constraint: "payments_amount_check",
		},
		{
			name:       "PaymentStatusOutsideTheVocabulary",
			run:        insertPayment(func(p *dbsqlc.InsertPaymentParams) { p.Status = "paid" }),
			kind:       store.ErrCheckViolation,
			constraint: "payments_status_check",
		},
		{
			name:       "PaymentForNeitherOrderNorInvoice",
			run:        insertPayment(func(p *dbsqlc.InsertPaymentParams) { p.OrderID = nil }),
			kind:       store.ErrCheckViolation,
			constraint: "payments_target_check",
		},
		{
			name:       "GatewayPaymentWithoutGatewayInterface",
			run:        insertPayment(func(p *dbsqlc.InsertPaymentParams) { p.GatewayInterfaceID = nil }),
			kind:       store.ErrCheckViolation,
			constraint: "payments_gateway_interface_check",
		},
		{
			name:       "BalancePaymentWithGatewayInterface",
			run:        insertPayment(func(p *dbsqlc.InsertPaymentParams) { p.Method = "balance" }),
			kind:       store.ErrCheckViolation,
			constraint: "payments_gateway_interface_check",
		},
		{
			name:       "LowercaseCurrency",
			run:        insertPayment(func(p *dbsqlc.InsertPaymentParams) { p.Currency = "cny" }),
			kind:       store.ErrCheckViolation,
			constraint: "payments_currency_check",
		},
		{
			name:       "PaymentCurrencyOtherThanTheOrders",
			run:        insertPayment(func(p *dbsqlc.InsertPaymentParams) { p.Currency = "USD" }),
			kind:       store.ErrForeignKeyViolation,
			constraint: "payments_order_fkey",
		},
		{
			name:       "PaymentOfAnotherCustomersOrder",
			run:        insertPayment(func(p *dbsqlc.InsertPaymentParams) { p.CustomerID = b.otherID }),
			kind:       store.ErrForeignKeyViolation,
			constraint: "payments_order_fkey",
		},
		{
			name:       "SuccessfulPaymentWithoutPaidAt",
			run:        insertPayment(func(p *dbsqlc.InsertPaymentParams) { p.Status = "success" }),
			kind:       store.ErrCheckViolation,
			constraint: "payments_paid_at_check",
		},
		{
			name: "TwoPendingPaymentsForTheSameOrderAndInterface",
			run: func(tx pgx.Tx) error {
				q := dbsqlc.New(tx)
				if _, err := q.InsertPayment(ctx, b.pendingPayment()); err != nil {
					return err
				}
				_, err := q.InsertPayment(ctx, b.pendingPayment())
				return err
			},
			kind:       store.ErrConflict,
			constraint: "payments_one_pending_key",
		},
		{
			name: "TwoPendingPaymentsForTheSameOrderInvoiceAndInterface",
			run: func(tx pgx.Tx) error {
				q := dbsqlc.New(tx)
				p := b.pendingPayment()
				p.InvoiceID = ptr(b.invoiceID)
				if _, err := q.InsertPayment(ctx, p); err != nil {
					return err
				}
				_, err := q.InsertPayment(ctx, p)
				return err
			},
			kind:       store.ErrConflict,
			constraint: "payments_one_pending_key",
		},
		{
			name: "SameGatewayPaymentIDTwiceInOneInterface",
			run: func(tx pgx.Tx) error {
				q := dbsqlc.New(tx)
				p := b.pendingPayment()
				p.Status, p.FailedAt = "failed", ptr(time.Now())
				for range 2 {
					row, err := q.InsertPayment(ctx, p)
					if err != nil {
						return err
					}
					if _, err := tx.Exec(ctx, `UPDATE payments SET gateway_payment_id = 'G1' WHERE id = $1`, row.ID); err != nil {
						return err
					}
				}
				return nil
			},
			kind:       store.ErrConflict,
			constraint: "payments_gateway_payment_id_key",
		},
		{
			name: "RefundedAmountAboveTheAmount",
			run: func(tx pgx.Tx) error {
				id, err := paidPayment(tx)
				if err != nil {
					return err
				}
				_, err = tx.Exec(ctx, `UPDATE payments SET refunded_amount = amount + 0.01 WHERE id = $1`, id)
				return err
			},
			kind:       store.ErrCheckViolation,
			constraint: "payments_refunded_amount_check",
		},
		{
			name: "FullRefundThatKeepsStatusSuccess",
			run: func(tx pgx.Tx) error {
				id, err := paidPayment(tx)
				if err != nil {
					return err
				}
				_, err = tx.Exec(ctx, `UPDATE payments SET refunded_amount = amount WHERE id = $1`, id)
				return err
			},
			kind:       store.ErrCheckViolation,
			constraint: "payments_refunded_status_check",
		},
		{
			name: "RefundOfAPendingPayment",
			run: func(tx pgx.Tx) error {
				row, err := dbsqlc.New(tx).InsertPayment(ctx, b.pendingPayment())
				if err != nil {
					return err
				}
				_, err = tx.Exec(ctx, `UPDATE payments SET refunded_amount = 1.00 WHERE id = $1`, row.ID)
				return err
			},
			kind:       store.ErrCheckViolation,
			constraint: "payments_refund_requires_paid_check",
		},
		{
			name: "NegativeRefundAmount",
			run: func(tx pgx.Tx) error {
				id, err := paidPayment(tx)
				if err != nil {
					return err
				}
				_, err = tx.Exec(ctx, `INSERT INTO refunds (payment_id, amount) VALUES ($1, -1.00)`, id)
				return err
			},
			kind:       store.ErrCheckViolation,
			constraint: "refunds_amount_check",
		},
		{
			name: "RefundStatusOutsideTheVocabulary",
			run: func(tx pgx.Tx) error {
				id, err := paidPayment(tx)
				if err != nil {
					return err
				}
				_, err = tx.Exec(ctx, `INSERT INTO refunds (payment_id, amount, status) VALUES ($1, 1.00, 'success')`, id)
				return err
			},
			kind:       store.ErrCheckViolation,
			constraint: "refunds_status_check",
		},
		{
			name: "LedgerRowWhoseBalanceAfterIsNotBeforePlusAmount",
			run: exec(`INSERT INTO balance_transactions (customer_id, type, amount, balance_before, balance_after)
				VALUES ($1, 'recharge', 10.00, 0.00, 10.01)`, b.customerID),
			kind:       store.ErrCheckViolation,
			constraint: "balance_transactions_balance_after_check",
		},
		{
			name: "LedgerPaymentThatAddsMoney",
			run: func(tx pgx.Tx) error {
				id, err := paidPayment(tx)
				if err != nil {
					return err
				}
				_, err = tx.Exec(ctx, `INSERT INTO balance_transactions (customer_id, type, amount, balance_before, balance_after, payment_id)
					VALUES ($1, 'payment', 10.00, 0.00, 10.00, $2)`, b.customerID, id)
				return err
			},
			kind:       store.ErrCheckViolation,
			constraint: "balance_transactions_sign_check",
		},
		{
			name: "LedgerRowIsNeverUpdated",
			run: func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO balance_transactions (customer_id, type, amount, balance_before, balance_after)
					VALUES ($1, 'manual_adjust', 5.00, 0.00, 5.00)`, b.customerID); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `UPDATE balance_transactions SET amount = 50.00, balance_after = 50.00`)
				return err
			},
			kind:       store.ErrCheckViolation,
			constraint: "balance_transactions_append_only",
		},
		{
			name:       "BalanceBelowTheCreditLimit",
			run:        exec(`UPDATE customers SET credit_limit = 10.00, balance = -10.01 WHERE id = $1`, b.customerID),
			kind:       store.ErrCheckViolation,
			constraint: "customers_balance_check",
		},
		{
			name:       "NegativeCreditLimit",
			run:        exec(`UPDATE customers SET balance = 5.00, credit_limit = -1.00 WHERE id = $1`, b.customerID),
			kind:       store.ErrCheckViolation,
			constraint: "customers_credit_limit_check",
		},
		{
			name:       "InvoicePaidAmountAboveItsAmount",
			run:        exec(`UPDATE invoices SET paid_amount = 100.01 WHERE id = $1`, b.invoiceID),
			kind:       store.ErrCheckViolation,
			constraint: "invoices_paid_amount_check",
		},
		{
			name:       "OrderStatusOutsideTheVocabulary",
			run:        exec(`UPDATE orders SET status = 'shipped' WHERE id = $1`, b.orderID),
			kind:       store.ErrCheckViolation,
			constraint: "orders_status_check",
		},
		{
			name:       "EventTypeOutsideTheVocabulary",
			run:        exec(`INSERT INTO events (event_type, order_id) VALUES ('order_shipped', $1)`, b.orderID),
			kind:       store.ErrCheckViolation,
			constraint: "events_event_type_check",
		},
		{
			name:       "ProcessingEventWithoutALock",
			run:        exec(`INSERT INTO events (event_type, order_id, status) VALUES ('order_paid', $1, 'processing')`, b.orderID),
			kind:       store.ErrCheckViolation,
			constraint: "events_lock_check",
		},
		{
			name: "TerminatedInstanceComingBack",
			run: func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `INSERT INTO instances (customer_id, order_id, status, terminated_at)
					VALUES ($1, $2, 'terminated', now())`, b.customerID, b.orderID); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `UPDATE instances SET status = 'running', terminated_at = NULL`)
				return err
			},
			kind:       store.ErrCheckViolation,
			constraint: "instances_terminated_is_final",
		},
		{
			name:       "LeaseOfAnUnknownRole",
			run:        exec(`INSERT INTO leader_leases (role, holder, expires_at) VALUES ('janitor', 'n1', now() + interval '30 seconds')`),
			kind:       store.ErrCheckViolation,
			constraint: "leader_leases_role_check",
		},
		{
			name: "OrderWithPaymentsIsNeverDeleted",
			run: func(tx pgx.Tx) error {
				if _, err := dbsqlc.New(tx).InsertPayment(ctx, b.pendingPayment()); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `DELETE FROM invoices`)
				if err != nil {
					return err
				}
				_, err = tx.Exec(ctx, `DELETE FROM orders WHERE id = $1`, b.orderID)
				return err
			},
			kind:       store.ErrForeignKeyViolation,
			constraint: "payments_order_fkey",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := b.rolledBack(t, tc.run)
			require.ErrorIs(t, err, tc.kind)
			require.Equal(t, tc.constraint, store.ConstraintOf(err))
		})
	}
}

func TestSchemaAllowsANewPendingPaymentOnceThePreviousOneFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	first, err := b.q.InsertPayment(ctx, b.pendingPayment())
	require.NoError(t, err)
	// Another gateway interface for the same order is a different payment.
	other := b.pendingPayment()
	other.GatewayInterfaceID = ptr(b.gatewayB)
	_, err = b.q.InsertPayment(ctx, other)
	require.NoError(t, err)

	_, err = b.pool.Exec(ctx, `UPDATE payments SET status = 'failed', failed_at = now() WHERE id = $1`, first.ID)
	require.NoError(t, err)
	_, err = b.q.InsertPayment(ctx, b.pendingPayment())
	require.NoError(t, err)
}

// NUMERIC(12,2) rounds extra decimals half away from zero before any CHECK
// runs, so the database cannot refuse 1.005. money.Amount never holds more
// than two decimals, which is why amounts reach SQL only as money.Amount.
func TestNumericColumnsRoundExtraDecimalsSilently(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	var stored money.Amount
	require.NoError(t, b.pool.QueryRow(ctx, `
		INSERT INTO payments (order_id, customer_id, gateway_interface_id, amount, currency)
		VALUES ($1, $2, $3, '1.005', 'CNY') RETURNING amount`,
		b.orderID, b.customerID, b.gatewayA).Scan(&stored))
	require.Equal(t, "1.01", stored.String())
}

func TestNumericColumnsRefuseAmountsBeyondTwelveDigits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.pool.Exec(context.Background(), `UPDATE orders SET total_amount = 10000000000.00`)
	err = store.MapError(err)
	require.ErrorIs(t, err, store.ErrInvalidValue)
}

func TestEventInsertNotifiesTheWorkerAtCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	listener, err := b.pool.Acquire(ctx)
	require.NoError(t, err)
	defer listener.Release()
	_, err = listener.Exec(ctx, `LISTEN paymentd_events`)
	require.NoError(t, err)

	ev, err := b.q.InsertEvent(ctx, dbsqlc.InsertEventParams{
		EventType: "order_paid",
		Payload:   []byte(`{"order_id":"x"}`),
		OrderID:   b.orderID,
	})
	require.NoError(t, err)
	require.Equal(t, "pending", ev.Status)
	require.Equal(t, b.orderID, ev.OrderID)

	n, err := listener.Conn().WaitForNotification(ctx)
	require.NoError(t, err)
	require.Equal(t, "paymentd_events", n.Channel)
	require.Equal(t, b.orderID.String(), n.Payload)
}
