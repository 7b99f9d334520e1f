package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/store"
)

// at is a fixed clock reading at PostgreSQL's precision.
var at = time.Date(2030, 1, 2, 3, 4, 5, 678901000, time.UTC)

func TestSetOrderStatusMovesOnlyFromTheExpectedStatusAndStampsUpdatedAt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	o, err := store.Q(b.pool).SetOrderStatus(ctx, store.SetOrderStatusParams{
		ID: b.orderID, FromStatus: "pending", ToStatus: "provisioning", PaidAt: &at, UpdatedAt: at,
	})
	require.NoError(t, err)
	require.Equal(t, "provisioning", o.Status)
	require.True(t, at.Equal(*o.PaidAt))
	require.True(t, at.Equal(o.UpdatedAt))

	_, err = store.Q(b.pool).SetOrderStatus(ctx, store.SetOrderStatusParams{
		ID: b.orderID, FromStatus: "pending", ToStatus: "paid", UpdatedAt: at,
	})
	require.ErrorIs(t, err, store.ErrNotFound, "a transition decided on a stale status is not applied")

	later := at.Add(time.Hour)
	o, err = store.Q(b.pool).SetOrderStatus(ctx, store.SetOrderStatusParams{
		ID: b.orderID, FromStatus: "provisioning", ToStatus: "active", UpdatedAt: later,
	})
	require.NoError(t, err)
	require.True(t, at.Equal(*o.PaidAt), "paid_at kept")
	require.True(t, later.Equal(o.UpdatedAt))

	_, err = store.Q(b.pool).SetOrderStatus(ctx, store.SetOrderStatusParams{
		ID: b.orderID, FromStatus: "active", ToStatus: "lost", UpdatedAt: at,
	})
	require.ErrorIs(t, err, store.ErrCheckViolation)
	_, err = store.Q(b.pool).SetOrderStatus(ctx, store.SetOrderStatusParams{
		ID: uuid.New(), FromStatus: "pending", ToStatus: "paid", UpdatedAt: at,
	})
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestCancelOrderRecordsReasonAndTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	cancel := func(tx pgx.Tx, reason string) (store.Order, error) {
		o, _, err := store.CancelOrderFailingPayments(ctx, tx, b.orderID, "pending", reason, at, "order cancelled")
		return o, err
	}
	err := b.rolledBack(t, func(tx pgx.Tx) error {
		_, err := cancel(tx, "bored")
		return err
	})
	require.ErrorIs(t, err, store.ErrCheckViolation, "orders_cancel_reason_check")

	var o store.Order
	require.NoError(t, store.WithTx(ctx, b.pool, func(tx pgx.Tx) (err error) {
		o, err = cancel(tx, "customer")
		return err
	}))
	require.Equal(t, "cancelled", o.Status)
	require.Equal(t, "customer", o.CancelReason)
	require.True(t, at.Equal(*o.CancelledAt))
	require.True(t, at.Equal(o.UpdatedAt))

	err = b.rolledBack(t, func(tx pgx.Tx) error {
		_, err := cancel(tx, "admin")
		return err
	})
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestInsertAndListOrders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var ids []uuid.UUID
	for i := range 3 {
		o, err := store.InsertOrder(ctx, b.pool, store.NewOrder{
			CustomerID: b.otherID, TotalAmount: money.MustParse("1.50"), Currency: "CNY",
			Description: "x", CreatedAt: at.Add(time.Duration(i) * time.Minute),
		})
		require.NoError(t, err)
		require.Equal(t, "pending", o.Status)
		require.JSONEq(t, `{}`, string(o.Item))
		ids = append(ids, o.ID)
	}
	rows, total, err := store.ListOrders(ctx, b.pool, store.OrderFilter{CustomerID: &b.otherID}, 2, 0)
	require.NoError(t, err)
	require.EqualValues(t, 3, total)
	require.Equal(t, []uuid.UUID{ids[2], ids[1]}, []uuid.UUID{rows[0].ID, rows[1].ID})

	pending := "pending"
	_, total, err = store.ListOrders(ctx, b.pool, store.OrderFilter{Status: &pending}, 10, 0)
	require.NoError(t, err)
	require.EqualValues(t, 4, total, "the fixture's order too")
	rows, total, err = store.ListOrders(ctx, b.pool, store.OrderFilter{}, 10, 10)
	require.NoError(t, err)
	require.EqualValues(t, 4, total)
	require.Empty(t, rows)

	_, err = store.InsertOrder(ctx, b.pool, store.NewOrder{CustomerID: uuid.New(), TotalAmount: money.Zero(), Currency: "CNY", CreatedAt: at})
	require.ErrorIs(t, err, store.ErrForeignKeyViolation)
}

func TestPostBalanceRequiresTheBalanceItWasDecidedOnAndTheCreditLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.pool.Exec(ctx, `UPDATE customers SET credit_limit = 10, balance = 5 WHERE id = $1`, b.customerID)
	require.NoError(t, err)

	acct, err := store.LockBalanceAccount(ctx, b.pool, b.customerID)
	require.NoError(t, err)
	require.Equal(t, "5.00", acct.Balance.String())
	require.Equal(t, "10.00", acct.CreditLimit.String())
	require.Equal(t, "CNY", acct.Currency)

	entry := func(before, amount, after string) store.BalanceTransaction {
		return store.BalanceTransaction{
			CustomerID: b.customerID, Type: store.BalanceManualAdjust, Amount: money.MustParse(amount),
			BalanceBefore: money.MustParse(before), BalanceAfter: money.MustParse(after), CreatedAt: at,
		}
	}
	ledgerRows := func() int {
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM balance_transactions WHERE customer_id = $1`, b.customerID).Scan(&n))
		return n
	}
	_, err = store.PostBalance(ctx, b.pool, entry("6.00", "-5.00", "1.00"))
	require.ErrorIs(t, err, store.ErrNotFound, "the balance is not 6.00")
	_, err = store.PostBalance(ctx, b.pool, entry("5.00", "-15.01", "-10.01"))
	require.ErrorIs(t, err, store.ErrCheckViolation, "below -credit_limit")
	require.Equal(t, "customers_balance_check", store.ConstraintOf(err))
	_, err = store.PostBalance(ctx, b.pool, entry("5.00", "-15.00", "-10.01"))
	require.ErrorIs(t, err, store.ErrCheckViolation, "after is not before + amount: the balance does not move either")
	require.Zero(t, ledgerRows(), "a refused post writes nothing")

	row, err := store.PostBalance(ctx, b.pool, entry("5.00", "-15.00", "-10.00"))
	require.NoError(t, err)
	require.Equal(t, "manual_adjust", row.Type)
	require.Equal(t, "-10.00", row.BalanceAfter.String())
	acct, err = store.GetBalanceAccount(ctx, b.pool, b.customerID)
	require.NoError(t, err)
	require.Equal(t, "-10.00", acct.Balance.String())
	var updated time.Time
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT updated_at FROM customers WHERE id = $1`, b.customerID).Scan(&updated))
	require.True(t, at.Equal(updated))
	require.Equal(t, 1, ledgerRows())

	_, err = store.LockBalanceAccount(ctx, b.pool, uuid.New())
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestBalancePaymentAndItsLedgerRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()

	err := b.rolledBack(t, func(tx pgx.Tx) error {
		_, err := store.InsertBalancePayment(ctx, tx, store.NewBalancePayment{
			OrderID: b.orderID, CustomerID: b.customerID, Amount: money.MustParse("100.00"), Currency: "USD", PaidAt: at,
		})
		return err
	})
	require.ErrorIs(t, err, store.ErrForeignKeyViolation, "the payment's currency is the order's")
	err = b.rolledBack(t, func(tx pgx.Tx) error {
		_, err := store.InsertBalancePayment(ctx, tx, store.NewBalancePayment{
			OrderID: b.orderID, CustomerID: b.customerID, Amount: money.Zero(), Currency: "CNY", PaidAt: at,
		})
		return err
	})
	require.ErrorIs(t, err, store.ErrCheckViolation, "payments_amount_check: a payment of 0.00 cannot exist")

	pay, err := store.InsertBalancePayment(ctx, b.pool, store.NewBalancePayment{
		OrderID: b.orderID, CustomerID: b.customerID, Amount: money.MustParse("100.00"), Currency: "CNY", PaidAt: at,
	})
	require.NoError(t, err)
	require.Equal(t, "balance", pay.Method)
	require.Equal(t, "success", pay.Status)
	require.Nil(t, pay.GatewayInterfaceID)
	require.True(t, at.Equal(*pay.PaidAt))

	_, err = b.pool.Exec(ctx, `UPDATE customers SET balance = 150 WHERE id = $1`, b.customerID)
	require.NoError(t, err)
	entry := store.BalanceTransaction{
		CustomerID: b.customerID, Type: store.BalancePayment, PaymentID: &pay.ID, Amount: money.MustParse("-100.00"),
		BalanceBefore: money.MustParse("150.00"), BalanceAfter: money.MustParse("50.00"), CreatedAt: at,
	}
	for name, bad := range map[string]func(e *store.BalanceTransaction){
		"AfterIsNotBeforePlusAmount": func(e *store.BalanceTransaction) { e.BalanceAfter = money.MustParse("49.99") },
		"PositivePayment": func(e *store.BalanceTransaction) {
			e.Amount, e.BalanceAfter = money.MustParse("100.00"), money.MustParse("250.00")
		},
	} {
		e := entry
		bad(&e)
		err := b.rolledBack(t, func(tx pgx.Tx) error { _, err := store.PostBalance(ctx, tx, e); return err })
		require.ErrorIs(t, err, store.ErrCheckViolation, name)
	}
	row, err := store.PostBalance(ctx, b.pool, entry)
	require.NoError(t, err)
	require.Equal(t, "payment", row.Type)
	require.Equal(t, pay.ID, *row.PaymentID)
	again := entry
	again.BalanceBefore, again.BalanceAfter = money.MustParse("50.00"), money.MustParse("-50.00")
	_, err = b.pool.Exec(ctx, `UPDATE customers SET credit_limit = 100 WHERE id = $1`, b.customerID)
	require.NoError(t, err)
	_, err = store.PostBalance(ctx, b.pool, again)
	require.ErrorIs(t, err, store.ErrConflict, "a payment moves the balance once")
	require.Equal(t, "balance_transactions_payment_id_key", store.ConstraintOf(err))
	acct, err := store.GetBalanceAccount(ctx, b.pool, b.customerID)
	require.NoError(t, err)
	require.Equal(t, "50.00", acct.Balance.String(), "the refused second post moved nothing")
}

func TestFailPendingPaymentsTouchOnlyPendingOnesOfTheirOrderOrInvoice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p := b.pendingPayment()
	pending, err := b.q.InsertPayment(ctx, p)
	require.NoError(t, err)
	p.GatewayInterfaceID, p.Status, p.PaidAt = &b.gatewayB, "success", &at
	paid, err := b.q.InsertPayment(ctx, p)
	require.NoError(t, err)
	p = b.pendingPayment()
	p.InvoiceID = &b.invoiceID
	ofInvoice, err := b.q.InsertPayment(ctx, p)
	require.NoError(t, err)

	_, err = store.FailPendingPayments(ctx, b.pool, store.PendingOf{}, "no selector", at)
	require.Error(t, err, "a call that names nothing fails nothing")

	failed, err := store.FailPendingPayments(ctx, b.pool, store.PendingOf{InvoiceID: &b.invoiceID}, "invoice cancelled", at)
	require.NoError(t, err)
	require.Len(t, failed, 1)
	require.Equal(t, ofInvoice.ID, failed[0].ID)

	failed, err = store.FailPendingPayments(ctx, b.pool, store.PendingOf{OrderID: &b.orderID}, "order cancelled", at)
	require.NoError(t, err)
	require.Len(t, failed, 1)
	require.Equal(t, pending.ID, failed[0].ID)
	require.Equal(t, "failed", failed[0].Status)
	require.Equal(t, "order cancelled", failed[0].FailureReason)
	require.True(t, at.Equal(failed[0].UpdatedAt))
	require.True(t, at.Equal(*failed[0].FailedAt))
	// A failed gateway payment is asked about again (late capture), from
	// the reconciler's next round on.
	require.True(t, at.Equal(*failed[0].NextReconcileAt))
	require.Zero(t, failed[0].ReconcileAttempts)

	still, err := store.Q(b.pool).GetPayment(ctx, paid.ID)
	require.NoError(t, err)
	require.Equal(t, "success", still.Status)
}

func TestInvoiceRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	in := store.NewInvoice{
		ID: uuid.New(), CustomerID: b.customerID, OrderID: &b.orderID, Number: "INV-1", Status: "issued",
		Amount: money.MustParse("5.00"), Currency: "CNY", IssuedAt: &at, DueAt: &at, CreatedAt: at,
		Lines: []store.NewInvoiceLine{{Description: "setup", Quantity: 1, UnitAmount: money.MustParse("5.00")}},
	}
	insert := func(in store.NewInvoice) (inv store.Invoice, err error) {
		err = store.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
			inv, err = store.InsertInvoice(ctx, tx, in)
			return err
		})
		return inv, err
	}
	inv, err := insert(in)
	require.NoError(t, err)
	require.Equal(t, "INV-1", *inv.Number)

	dup := in
	dup.ID = uuid.New()
	_, err = insert(dup)
	require.ErrorIs(t, err, store.ErrConflict)
	require.Equal(t, "invoices_number_key", store.ConstraintOf(err))

	usd := in
	usd.ID, usd.Number, usd.Currency = uuid.New(), "INV-2", "USD"
	_, err = insert(usd)
	require.ErrorIs(t, err, store.ErrForeignKeyViolation, "an order's invoice has the order's currency")

	later := at.Add(time.Hour)
	c, err := store.Q(b.pool).SetInvoiceStatus(ctx, store.SetInvoiceStatusParams{
		ID: inv.ID, FromStatus: "issued", ToStatus: "cancelled", UpdatedAt: later,
	})
	require.NoError(t, err)
	require.Equal(t, "cancelled", c.Status)
	require.True(t, later.Equal(c.UpdatedAt))
	_, err = store.Q(b.pool).SetInvoiceStatus(ctx, store.SetInvoiceStatusParams{
		ID: inv.ID, FromStatus: "issued", ToStatus: "cancelled", UpdatedAt: later,
	})
	require.ErrorIs(t, err, store.ErrNotFound)

	locked, err := store.Q(b.pool).GetInvoiceForUpdate(ctx, inv.ID)
	require.NoError(t, err)
	require.Equal(t, c, locked)

	cancelled := "cancelled"
	rows, total, err := store.ListInvoices(ctx, b.pool, store.InvoiceFilter{CustomerID: &b.customerID, Status: &cancelled}, 10, 0)
	require.NoError(t, err)
	require.EqualValues(t, 1, total)
	require.Equal(t, inv.ID, rows[0].ID)
	_, total, err = store.ListInvoices(ctx, b.pool, store.InvoiceFilter{OrderID: &b.orderID}, 10, 0)
	require.NoError(t, err)
	require.EqualValues(t, 2, total, "the fixture's invoice too")
}

func TestProductRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	missing := "nope"
	_, err := store.InsertProduct(ctx, b.pool, store.NewProduct{Name: "x", Price: money.Zero(), Currency: "CNY", ProviderPlugin: &missing, CreatedAt: at})
	require.ErrorIs(t, err, store.ErrForeignKeyViolation)

	p, err := store.InsertProduct(ctx, b.pool, store.NewProduct{Name: "x", Price: money.MustParse("3.00"), Currency: "CNY", CreatedAt: at})
	require.NoError(t, err)
	require.True(t, p.Enabled)
	require.JSONEq(t, `{}`, string(p.ProviderConfig), "no provider config is an empty object")
	got, err := store.Q(b.pool).GetProduct(ctx, p.ID)
	require.NoError(t, err)
	require.Equal(t, p, got)
	_, err = b.pool.Exec(ctx, `UPDATE products SET enabled = false WHERE id = $1`, p.ID)
	require.NoError(t, err)
	yes := true
	_, total, err := store.ListProducts(ctx, b.pool, &yes, 10, 0)
	require.NoError(t, err)
	require.Zero(t, total)
	_, total, err = store.ListProducts(ctx, b.pool, nil, 10, 0)
	require.NoError(t, err)
	require.EqualValues(t, 1, total)
}

func TestEventsAndAuditRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	e, err := store.Q(b.pool).InsertEvent(ctx, store.InsertEventParams{
		EventType: "order_paid", OrderID: b.orderID, Payload: []byte(`{"order_id":"x"}`),
	})
	require.NoError(t, err)
	require.Equal(t, "pending", e.Status)
	_, err = store.Q(b.pool).InsertEvent(ctx, store.InsertEventParams{
		EventType: "order_lost", OrderID: b.orderID, Payload: []byte(`{}`),
	})
	require.ErrorIs(t, err, store.ErrCheckViolation)
	events, err := store.Q(b.pool).ListOrderEvents(ctx, b.orderID)
	require.NoError(t, err)
	require.Len(t, events, 1)
	require.JSONEq(t, `{"order_id":"x"}`, string(events[0].Payload))

	require.NoError(t, store.AppendAudit(ctx, b.pool, store.AuditRecord{
		ActorKind: "admin", ActorID: "a", Action: "order.cancel", EntityType: "order", EntityID: b.orderID.String(),
		Before: []byte(`{"status":"pending"}`), After: []byte(`{"status":"cancelled"}`), At: at,
	}))
	require.NoError(t, store.AppendAudit(ctx, b.pool, store.AuditRecord{
		ActorKind: "customer", ActorID: "c", Action: "order.create", EntityType: "order", EntityID: "o", At: at,
	}), "before and after may be absent")
	err = store.AppendAudit(ctx, b.pool, store.AuditRecord{ActorKind: "robot", Action: "x", EntityType: "order", EntityID: "o", At: at})
	require.ErrorIs(t, err, store.ErrCheckViolation)
	var nullBefore bool
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT before IS NULL FROM audit_log WHERE entity_id = 'o'`).Scan(&nullBefore))
	require.True(t, nullBefore)
}
