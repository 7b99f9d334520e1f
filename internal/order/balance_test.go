package order_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/audit"
	"github.com/rustbill/paymentd/internal/balance"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// state is everything a balance payment may change, to show that a refused
// one changes nothing.
type state struct {
	Balance, CreditLimit                money.Amount
	OrderStatus                         string
	Ledger, Payments, Events, AuditRows int
}

func (b *bundle) state(t *testing.T, customer, orderID uuid.UUID) state {
	t.Helper()
	a := b.account(t, customer)
	return state{
		Balance: a.Balance, CreditLimit: a.CreditLimit,
		OrderStatus: b.getOrder(t, orderID).Status,
		Ledger:      b.count(t, `SELECT count(*) FROM balance_transactions WHERE customer_id = $1`, customer),
		Payments:    b.count(t, `SELECT count(*) FROM payments WHERE customer_id = $1`, customer),
		Events:      b.count(t, `SELECT count(*) FROM events`),
		AuditRows:   b.count(t, `SELECT count(*) FROM audit_log`),
	}
}

func (b *bundle) ledger(t *testing.T, customer uuid.UUID) []store.BalanceTransaction {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT id, type, amount, balance_before, balance_after, payment_id
		FROM balance_transactions WHERE customer_id = $1`, customer)
	require.NoError(t, err)
	defer rows.Close()
	var out []store.BalanceTransaction
	for rows.Next() {
		e := store.BalanceTransaction{CustomerID: customer}
		require.NoError(t, rows.Scan(&e.ID, &e.Type, &e.Amount, &e.BalanceBefore, &e.BalanceAfter, &e.PaymentID))
		out = append(out, e)
	}
	require.NoError(t, rows.Err())
	return out
}

// requireChain checks that the ledger rows, in whatever order they were
// stored, form one chain from start to the customer's current balance:
// each row's balance_after is balance_before + amount, and each row starts
// where another ended. It returns the sum of the amounts.
func (b *bundle) requireChain(t *testing.T, customer uuid.UUID, start money.Amount) money.Amount {
	t.Helper()
	rows := b.ledger(t, customer)
	byBefore := map[money.Amount]store.BalanceTransaction{}
	for _, e := range rows {
		sum, err := e.BalanceBefore.Add(e.Amount)
		require.NoError(t, err)
		require.Equal(t, sum, e.BalanceAfter, "balance_after = balance_before + amount")
		_, dup := byBefore[e.BalanceBefore]
		require.False(t, dup, "two rows start from balance %s: the chain forks", e.BalanceBefore)
		byBefore[e.BalanceBefore] = e
	}
	at, total := start, money.Zero()
	for range rows {
		e, ok := byBefore[at]
		require.True(t, ok, "no row continues the chain at %s", at)
		at = e.BalanceAfter
		var err error
		total, err = total.Add(e.Amount)
		require.NoError(t, err)
	}
	require.Equal(t, b.account(t, customer).Balance, at, "the chain ends at the current balance")
	return total
}

func TestPayWithBalanceDeductsRecordsAndQueuesOrderPaid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setAccount(t, b.alice, "100.00", "0.00")
	o := b.order(t, b.asAlice, "30.25")

	res, err := b.svc.PayWithBalance(b.asAlice, o.ID)
	require.NoError(t, err)
	require.Equal(t, "69.75", res.Balance.String())
	require.Equal(t, "69.75", b.account(t, b.alice).Balance.String())

	// The order.
	require.Equal(t, string(order.StatusProvisioning), res.Order.Status)
	require.NotNil(t, res.Order.PaidAt)
	require.Equal(t, res.Order, b.getOrder(t, o.ID))

	// The payment record.
	require.NotNil(t, res.Payment)
	pay, err := store.Q(b.pool).GetPayment(context.Background(), res.Payment.ID)
	require.NoError(t, err)
	require.Equal(t, *res.Payment, pay)
	require.Equal(t, "balance", pay.Method)
	require.Equal(t, "success", pay.Status)
	require.Equal(t, "30.25", pay.Amount.String())
	require.Equal(t, "CNY", pay.Currency)
	require.Equal(t, o.ID, *pay.OrderID)
	require.Equal(t, b.alice, pay.CustomerID)
	require.Nil(t, pay.GatewayInterfaceID, "no gateway interface")
	require.NotNil(t, pay.PaidAt)
	require.Equal(t, *res.Order.PaidAt, *pay.PaidAt)

	// The ledger.
	ledger := b.ledger(t, b.alice)
	require.Len(t, ledger, 1)
	require.Equal(t, "payment", ledger[0].Type)
	require.Equal(t, "-30.25", ledger[0].Amount.String())
	require.Equal(t, "100.00", ledger[0].BalanceBefore.String())
	require.Equal(t, "69.75", ledger[0].BalanceAfter.String())
	require.Equal(t, pay.ID, *ledger[0].PaymentID)
	require.Equal(t, ledger[0].ID, res.Ledger.ID)

	// Exactly one order_paid event with the designed payload.
	events := b.events(t, o.ID)
	require.Len(t, events, 1)
	require.Equal(t, order.EventOrderPaid, events[0].EventType)
	require.Equal(t, "pending", events[0].Status)
	require.JSONEq(t, fmt.Sprintf(`{"order_id":%q,"payment_id":%q,"amount":"30.25","currency":"CNY","method":"balance"}`,
		o.ID, pay.ID), string(events[0].Payload))
	var payload order.OrderPaidPayload
	require.NoError(t, json.Unmarshal(events[0].Payload, &payload))
	require.Equal(t, money.MustParse("30.25"), payload.Amount)

	// Audit: the balance change, the payment and the order, by alice.
	bal := b.audits(t, "customer", b.alice.String())
	require.Len(t, bal, 1)
	require.Equal(t, balance.ActionCharge, bal[0].Action)
	require.Equal(t, "customer", bal[0].ActorKind)
	require.Equal(t, b.alice.String(), bal[0].ActorID)
	require.Equal(t, "100.00", bal[0].Before["balance"])
	require.Equal(t, "69.75", bal[0].After["balance"])
	payAudit := b.audits(t, "payment", pay.ID.String())
	require.Len(t, payAudit, 1)
	require.Equal(t, audit.ActionPaymentCreate, payAudit[0].Action)
	require.Nil(t, payAudit[0].Before)
	require.Equal(t, "success", payAudit[0].After["status"])
	require.Equal(t, "30.25", payAudit[0].After["amount"])
	orderAudit := b.audits(t, "order", o.ID.String())
	require.Len(t, orderAudit, 2) // create, pay
	require.Equal(t, order.ActionOrderPay, orderAudit[1].Action)
	require.Equal(t, "pending", orderAudit[1].Before["status"])
	require.Equal(t, "provisioning", orderAudit[1].After["status"])
}

func TestPayWithBalanceWithoutEnoughBalanceChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setAccount(t, b.alice, "10.00", "5.00")
	o := b.order(t, b.asAlice, "15.01")
	before := b.state(t, b.alice, o.ID)

	_, err := b.svc.PayWithBalance(b.asAlice, o.ID)
	requireKind(t, err, apperr.InvalidArgument)
	require.Equal(t, "insufficient balance", callerMessage(err))
	require.Equal(t, before, b.state(t, b.alice, o.ID))
}

func TestPayWithBalanceMayGoNegativeDownToExactlyMinusTheCreditLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setAccount(t, b.alice, "10.00", "20.00")
	first := b.order(t, b.asAlice, "30.00")
	res, err := b.svc.PayWithBalance(b.asAlice, first.ID)
	require.NoError(t, err)
	require.Equal(t, "-20.00", res.Balance.String(), "exactly -credit_limit is allowed")

	next := b.order(t, b.asAlice, "0.01")
	before := b.state(t, b.alice, next.ID)
	_, err = b.svc.PayWithBalance(b.asAlice, next.ID)
	requireKind(t, err, apperr.InvalidArgument, "one cent below -credit_limit")
	require.Equal(t, before, b.state(t, b.alice, next.ID))
	require.Equal(t, money.MustParse("-30.00"), b.requireChain(t, b.alice, money.MustParse("10.00")))
}

func TestPayWithBalanceTwiceIsAlreadyPaid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setAccount(t, b.alice, "100.00", "0.00")
	o := b.order(t, b.asAlice, "30.00")
	_, err := b.svc.PayWithBalance(b.asAlice, o.ID)
	require.NoError(t, err)
	before := b.state(t, b.alice, o.ID)

	_, err = b.svc.PayWithBalance(b.asAlice, o.ID)
	requireKind(t, err, apperr.InvalidArgument)
	require.Contains(t, err.Error(), "already paid")
	require.Equal(t, before, b.state(t, b.alice, o.ID))
	require.Len(t, b.events(t, o.ID), 1)
}

func TestPayWithBalanceRefusesOthersOrdersCancelledOrdersAndOtherCurrencies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setAccount(t, b.alice, "100.00", "0.00")
	o := b.order(t, b.asAlice, "10.00")

	_, err := b.svc.PayWithBalance(b.asBob, o.ID)
	requireKind(t, err, apperr.NotFound, "another customer's order reads as none")
	_, err = b.svc.PayWithBalance(b.anonymous, o.ID)
	requireKind(t, err, apperr.Unauthenticated)
	_, err = b.svc.PayWithBalance(b.asAlice, uuid.New())
	requireKind(t, err, apperr.NotFound)

	usd := b.orderIn(t, b.asAlice, "10.00", "USD")
	before := b.state(t, b.alice, usd.ID)
	_, err = b.svc.PayWithBalance(b.asAlice, usd.ID)
	requireKind(t, err, apperr.InvalidArgument, "a USD order cannot be paid from a CNY balance")
	require.Equal(t, before, b.state(t, b.alice, usd.ID))

	cancelled := b.order(t, b.asAlice, "10.00")
	_, err = b.svc.CancelOrder(b.asAlice, cancelled.ID)
	require.NoError(t, err)
	_, err = b.svc.PayWithBalance(b.asAlice, cancelled.ID)
	requireKind(t, err, apperr.InvalidArgument)
	require.Contains(t, err.Error(), "cancelled")

	res, err := b.svc.PayWithBalance(b.asAdmin, o.ID)
	require.NoError(t, err, "an admin may pay anyone's order from their balance")
	require.Equal(t, "90.00", res.Balance.String())
	audits := b.audits(t, "customer", b.alice.String())
	require.Len(t, audits, 1)
	require.Equal(t, "admin", audits[0].ActorKind)
	require.Equal(t, b.adminID.String(), audits[0].ActorID)
}

func TestPayWithBalanceOfAFreeOrderQueuesOrderPaidWithoutAPayment(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setAccount(t, b.alice, "5.00", "0.00")
	o := b.order(t, b.asAlice, "0.00")

	res, err := b.svc.PayWithBalance(b.asAlice, o.ID)
	require.NoError(t, err)
	require.Equal(t, "provisioning", res.Order.Status)
	require.NotNil(t, res.Order.PaidAt)
	require.Nil(t, res.Payment)
	require.Nil(t, res.Ledger)
	require.Equal(t, "5.00", res.Balance.String())
	require.Equal(t, "5.00", b.account(t, b.alice).Balance.String())
	require.Zero(t, b.count(t, `SELECT count(*) FROM payments`))
	require.Zero(t, b.count(t, `SELECT count(*) FROM balance_transactions`))
	events := b.events(t, o.ID)
	require.Len(t, events, 1)
	require.JSONEq(t, fmt.Sprintf(`{"order_id":%q,"payment_id":null,"amount":"0.00","currency":"CNY","method":"balance"}`, o.ID),
		string(events[0].Payload))
	require.Len(t, b.audits(t, "order", o.ID.String()), 2)
}

func TestPayWithBalanceFailsTheOrdersPendingGatewayPayments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setAccount(t, b.alice, "50.00", "0.00")
	o := b.order(t, b.asAlice, "10.00")
	gw := testfixture.GatewayInterface(t, b.pool, "epay")
	pending := testfixture.InsertPayment(t, b.pool, testfixture.Payment{Customer: b.alice, Order: o.ID, Gateway: gw, Amount: "10.00"})

	_, err := b.svc.PayWithBalance(b.asAlice, o.ID)
	require.NoError(t, err)
	pay, err := store.Q(b.pool).GetPayment(context.Background(), pending)
	require.NoError(t, err)
	require.Equal(t, "failed", pay.Status)
	require.Equal(t, "order paid with balance", pay.FailureReason)
	require.Len(t, b.audits(t, "payment", pending.String()), 1)
}

func TestPayWithBalanceIsAllOrNothingWhenTheEventCannotBeQueued(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setAccount(t, b.alice, "50.00", "0.00")
	o := b.order(t, b.asAlice, "10.00")
	before := b.state(t, b.alice, o.ID)
	b.failEventInserts(t)

	_, err := b.svc.PayWithBalance(b.asAlice, o.ID)
	require.Error(t, err)
	require.Equal(t, before, b.state(t, b.alice, o.ID), "no balance change, ledger row, payment or audit without the event")
}

func TestPayWithBalanceOfACancelledRequestChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.setAccount(t, b.alice, "50.00", "0.00")
	o := b.order(t, b.asAlice, "10.00")
	before := b.state(t, b.alice, o.ID)
	ctx, cancel := context.WithCancel(b.asAlice)
	cancel()
	_, err := b.svc.PayWithBalance(ctx, o.ID)
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, before, b.state(t, b.alice, o.ID))
}

// Concurrent balance payments of different orders of one customer are
// decided one after another on the current balance: together they never
// take more than balance + credit_limit, and the ledger is one chain.
func TestConcurrentBalancePaymentsOfOneCustomerCannotOverspend(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n               int
		balance, credit string
		price           string
		wantPaid        int
	}{
		{n: 2, balance: "50.00", credit: "0.00", price: "30.00", wantPaid: 1},
		{n: 10, balance: "45.00", credit: "25.00", price: "10.00", wantPaid: 7},
		{n: 10, balance: "0.00", credit: "100.00", price: "10.00", wantPaid: 10},
	} {
		t.Run(fmt.Sprintf("%d_orders_of_%s_from_%s_with_credit_%s", tc.n, tc.price, tc.balance, tc.credit), func(t *testing.T) {
			t.Parallel()
			b := setupWithPool(t, bigPool(t, int32(tc.n)+2))
			b.setAccount(t, b.alice, tc.balance, tc.credit)
			start := money.MustParse(tc.balance)
			orders := make([]store.Order, tc.n)
			for i := range orders {
				orders[i] = b.order(t, b.asAlice, tc.price)
			}

			errs := make([]error, tc.n)
			var wg sync.WaitGroup
			startLine := make(chan struct{})
			for i := range orders {
				wg.Go(func() {
					<-startLine
					_, errs[i] = b.svc.PayWithBalance(b.asAlice, orders[i].ID)
				})
			}
			close(startLine)
			wg.Wait()

			paid := 0
			for _, err := range errs {
				if err == nil {
					paid++
					continue
				}
				requireKind(t, err, apperr.InvalidArgument)
				require.Equal(t, "insufficient balance", callerMessage(err))
			}
			require.Equal(t, tc.wantPaid, paid)

			spent := b.requireChain(t, b.alice, start).Neg()
			limit, err := start.Add(money.MustParse(tc.credit))
			require.NoError(t, err)
			require.LessOrEqual(t, spent.Cmp(limit), 0, "spent %s of at most %s", spent, limit)
			require.GreaterOrEqual(t, b.account(t, b.alice).Balance.Cmp(money.MustParse(tc.credit).Neg()), 0)
			require.Equal(t, paid, len(b.ledger(t, b.alice)))
			require.Equal(t, paid, b.count(t, `SELECT count(*) FROM payments WHERE method = 'balance' AND status = 'success'`))
			require.Equal(t, paid, b.count(t, `SELECT count(*) FROM events WHERE event_type = 'order_paid'`))
			require.Equal(t, paid, b.count(t, `SELECT count(*) FROM orders WHERE status = 'provisioning'`))
			require.Equal(t, tc.n-paid, b.count(t, `SELECT count(*) FROM orders WHERE status = 'pending'`))
			testfixture.CheckMoneyInvariants(t, b.pool)
		})
	}
}

func TestConcurrentPaymentsOfTheSameOrderSucceedOnce(t *testing.T) {
	t.Parallel()
	const n = 10
	b := setupWithPool(t, bigPool(t, n+2))
	b.setAccount(t, b.alice, "1000.00", "0.00")
	o := b.order(t, b.asAlice, "10.00")

	errs := make([]error, n)
	var wg sync.WaitGroup
	startLine := make(chan struct{})
	for i := range n {
		ctx := b.asAlice
		if i%2 == 1 {
			ctx = b.asAdmin
		}
		wg.Go(func() {
			<-startLine
			_, errs[i] = b.svc.PayWithBalance(ctx, o.ID)
		})
	}
	close(startLine)
	wg.Wait()

	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		requireKind(t, err, apperr.InvalidArgument)
		require.Contains(t, err.Error(), "already paid")
	}
	require.Equal(t, 1, ok)
	require.Equal(t, "990.00", b.account(t, b.alice).Balance.String())
	require.Len(t, b.ledger(t, b.alice), 1)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM payments WHERE order_id = $1`, o.ID))
	require.Len(t, b.events(t, o.ID), 1)
	b.requireChain(t, b.alice, money.MustParse("1000.00"))
	testfixture.CheckMoneyInvariants(t, b.pool)
}

// A cancel and a balance payment of one order queue on the order row:
// exactly one of them wins, and the loser changes nothing.
func TestConcurrentCancelAndPaymentOfOneOrderLetExactlyOneWin(t *testing.T) {
	t.Parallel()
	b := setupWithPool(t, bigPool(t, 6))
	b.setAccount(t, b.alice, "100.00", "0.00")
	for range 5 {
		o := b.order(t, b.asAlice, "10.00")
		var payErr, cancelErr error
		var wg sync.WaitGroup
		startLine := make(chan struct{})
		wg.Go(func() { <-startLine; _, payErr = b.svc.PayWithBalance(b.asAlice, o.ID) })
		wg.Go(func() { <-startLine; _, cancelErr = b.svc.CancelOrder(b.asAlice, o.ID) })
		close(startLine)
		wg.Wait()

		require.True(t, (payErr == nil) != (cancelErr == nil), "pay: %v, cancel: %v", payErr, cancelErr)
		events := b.events(t, o.ID)
		require.Len(t, events, 1)
		if payErr == nil {
			requireKind(t, cancelErr, apperr.InvalidArgument)
			require.Equal(t, "provisioning", b.getOrder(t, o.ID).Status)
			require.Equal(t, order.EventOrderPaid, events[0].EventType)
		} else {
			requireKind(t, payErr, apperr.InvalidArgument)
			require.Equal(t, "cancelled", b.getOrder(t, o.ID).Status)
			require.Equal(t, order.EventOrderCancelled, events[0].EventType)
		}
	}
	b.requireChain(t, b.alice, money.MustParse("100.00"))
	testfixture.CheckMoneyInvariants(t, b.pool)
}

// A balance payment holds its customer row while it waits for the order
// row. Whoever holds that order meanwhile may still insert rows that refer
// to the customer (an invoice, a payment): the customer lock must not block
// their foreign-key check, or the two would deadlock.
func TestBalancePaymentWaitingForTheOrderDoesNotDeadlockAnOrderLockHolder(t *testing.T) {
	t.Parallel()
	b := setupWithPool(t, bigPool(t, 4))
	b.setAccount(t, b.alice, "50.00", "0.00")
	o := b.order(t, b.asAlice, "10.00")
	ctx := context.Background()

	holder, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = store.Q(holder).GetOrderForUpdate(ctx, o.ID)
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() { _, err := b.svc.PayWithBalance(b.asAlice, o.ID); done <- err }()
	// Wait until the payment holds the customer and waits for the order.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, 1, b.count(c, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND query LIKE '%FROM orders%FOR UPDATE%'`))
	}, 10*time.Second, 10*time.Millisecond)

	now := time.Now()
	_, err = store.InsertInvoice(ctx, holder, store.NewInvoice{
		ID: uuid.New(), CustomerID: b.alice, OrderID: &o.ID, Number: "INV-LOCK", Status: "issued",
		Amount: money.MustParse("1.00"), Currency: "CNY", CreatedAt: now,
		Lines: []store.NewInvoiceLine{{Description: "lock", Quantity: 1, UnitAmount: money.MustParse("1.00")}},
	})
	require.NoError(t, err, "the order holder's insert referring to the customer must not wait for the payment")
	require.NoError(t, holder.Commit(ctx))
	require.NoError(t, <-done)
	require.Equal(t, "provisioning", b.getOrder(t, o.ID).Status)
	b.requireChain(t, b.alice, money.MustParse("50.00"))
	testfixture.CheckMoneyInvariants(t, b.pool)
}

// callerMessage is what a caller is told of err (rpc.Error shows the
// apperr message, never its cause).
func callerMessage(err error) string {
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return ae.Message
	}
	return err.Error()
}
