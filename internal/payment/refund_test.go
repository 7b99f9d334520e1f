package payment_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/money"
	"github.com/rustbill/paymentd/internal/order"
	"github.com/rustbill/paymentd/internal/payment"
	"github.com/rustbill/paymentd/internal/plugin"
	"github.com/rustbill/paymentd/internal/plugintest"
	"github.com/rustbill/paymentd/internal/store"
	"github.com/rustbill/paymentd/internal/testfixture"
)

// paidAtTheGateway creates an epay payment of a new order of amount, pays
// it at the fake gateway and settles it through the notify; it returns the
// settled payment.
func (f *flowBundle) paidAtTheGateway(t *testing.T, amount string) store.Payment {
	t.Helper()
	orderID := f.order(t, amount)
	p := f.pay(t, orderID)
	require.NoError(t, f.fake.Pay(p.ID.String()))
	eventually(t, "the payment is settled", func() bool { return f.payment(t, p.ID).Status == "success" })
	return f.payment(t, p.ID)
}

func (f *flowBundle) refunds(t *testing.T, paymentID uuid.UUID) []store.Refund {
	t.Helper()
	rs, err := store.Q(f.pool).ListPaymentRefunds(context.Background(), paymentID)
	require.NoError(t, err)
	return rs
}

func TestRefundsInPartThenInFullRefundTheOrder(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	p := f.paidAtTheGateway(t, "100.00")

	res, err := f.svc.RefundPayment(f.admin, p.ID, "30.00", "goodwill", "")
	after := res.Payment
	require.NoError(t, err)
	require.Equal(t, "success", after.Status, "a partial refund leaves success")
	require.Equal(t, "30.00", after.RefundedAmount.String())
	require.Equal(t, "paid", f.orderStatus(t, *p.OrderID))

	res, err = f.svc.RefundPayment(f.admin, p.ID, "", "", "")
	after = res.Payment
	require.NoError(t, err, "empty amount: the rest")
	require.Equal(t, "refunded", after.Status)
	require.Equal(t, "100.00", after.RefundedAmount.String())
	require.Equal(t, "refunded", f.orderStatus(t, *p.OrderID))

	rs := f.refunds(t, p.ID)
	require.Len(t, rs, 2)
	reasons := map[string]string{}
	for _, r := range rs {
		require.Equal(t, store.RefundSucceeded, r.Status)
		require.Equal(t, f.adminID, *r.RequestedBy)
		reasons[r.Amount.String()] = r.Reason
	}
	require.Equal(t, map[string]string{"30.00": "goodwill", "70.00": ""}, reasons)
	require.Len(t, f.fake.Refunds(), 2)
	o, _ := f.fake.Order(p.ID.String())
	require.Equal(t, "100.00", o.Refunded)

	_, err = f.svc.RefundPayment(f.admin, p.ID, "", "", "")
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.Contains(t, err.Error(), "already fully refunded")
	require.Equal(t, 2, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'refund.succeed' AND actor_id = $1`, f.adminID.String()))
	// error means failure: the gateway's "退款成功" is the after's message.
	require.Equal(t, 2, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'refund.succeed' AND after->>'message' = '退款成功' AND NOT after ? 'error'`))
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'order.refund'`))
	testfixture.CheckMoneyInvariants(t, f.pool)
}

func TestRefundRefusals(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	p := f.paidAtTheGateway(t, "10.00")
	pending := f.pay(t, f.order(t, "10.00"))

	for _, tc := range []struct {
		name   string
		ctx    context.Context
		id     uuid.UUID
		amount string
		kind   apperr.Kind
		msg    string
	}{
		{"more than paid", f.admin, p.ID, "10.01", apperr.InvalidArgument, "exceeds"},
		{"a pending payment", f.admin, pending.ID, "", apperr.InvalidArgument, "only a successful payment"},
		{"zero", f.admin, p.ID, "0", apperr.InvalidArgument, "positive"},
		{"three decimals", f.admin, p.ID, "1.001", apperr.InvalidArgument, "positive"},
		{"unknown payment", f.admin, uuid.New(), "", apperr.NotFound, "not found"},
		{"a customer", f.asAlice, p.ID, "", apperr.PermissionDenied, "admin"},
		{"nobody", context.Background(), p.ID, "", apperr.Unauthenticated, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.svc.RefundPayment(tc.ctx, tc.id, tc.amount, "", "")
			require.True(t, apperr.Is(err, tc.kind), "%v", err)
			require.Contains(t, err.Error(), tc.msg)
		})
	}
	require.Empty(t, f.refunds(t, p.ID))
	require.Empty(t, f.fake.Refunds())
}

func TestTwentyConcurrentPartialRefundsNeverExceedTheAmount(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	p := f.paidAtTheGateway(t, "100.00")

	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = f.svc.RefundPayment(f.admin, p.ID, "10.00", "", "")
		})
	}
	close(start)
	wg.Wait()
	var ok, refused int
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case apperr.Is(err, apperr.InvalidArgument):
			refused++
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	require.Equal(t, 10, ok)
	require.Equal(t, 10, refused)
	got := f.payment(t, p.ID)
	require.Equal(t, "refunded", got.Status)
	require.Equal(t, "100.00", got.RefundedAmount.String())
	sum := money.Zero()
	for _, r := range f.fake.Refunds() {
		sum, _ = sum.Add(money.MustParse(r.Money))
	}
	require.Equal(t, "100.00", sum.String(), "the gateway paid out exactly the amount")
	require.Len(t, f.refunds(t, p.ID), 10, "refused refunds leave no row")
	testfixture.CheckMoneyInvariants(t, f.pool)
}

func TestRefundRefusedByTheGatewayIsInternalAndLeavesThePaymentAlone(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	p := f.paidAtTheGateway(t, "50.00")
	f.fake.InjectFault(epay.Fault{Path: "/api.php", Act: "refund", Status: http.StatusBadRequest, Times: 1})

	_, err := f.svc.RefundPayment(f.admin, p.ID, "20.00", "", "")
	require.True(t, apperr.Is(err, apperr.Internal), "%v", err)
	require.Contains(t, err.Error(), "gateway refund failed")
	rs := f.refunds(t, p.ID)
	require.Len(t, rs, 1)
	require.Equal(t, store.RefundFailed, rs[0].Status)
	require.Contains(t, rs[0].Error, "HTTP 400")
	require.Equal(t, "0.00", f.payment(t, p.ID).RefundedAmount.String())
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'refund.fail' AND after->>'error' LIKE '%HTTP 400%' AND after->>'message' = after->>'error'`),
		"a failure's text is its error")

	// The failed refund reserves nothing: the whole amount can be refunded.
	res, err := f.svc.RefundPayment(f.admin, p.ID, "", "", "")
	after := res.Payment
	require.NoError(t, err)
	require.Equal(t, "refunded", after.Status)
	testfixture.CheckMoneyInvariants(t, f.pool)
}

func TestRefundWithUnknownOutcomeStaysPendingAndReserved(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	p := f.paidAtTheGateway(t, "50.00")
	f.fake.InjectFault(epay.Fault{Path: "/api.php", Act: "refund", Status: http.StatusBadGateway, Times: 1})

	_, err := f.svc.RefundPayment(f.admin, p.ID, "20.00", "", "")
	require.True(t, apperr.Is(err, apperr.Internal), "the contract's code for a failed gateway refund: %v", err)
	require.Contains(t, err.Error(), "gateway refund failed: the outcome is unknown")
	require.Contains(t, err.Error(), "ResolveRefund", "the answer says what to do")
	rs := f.refunds(t, p.ID)
	require.Len(t, rs, 1)
	require.Equal(t, store.RefundPending, rs[0].Status, "never retried, never failed blindly")
	require.Contains(t, rs[0].Error, "outcome unknown")
	require.Empty(t, f.fake.Refunds(), "the fake did not pay it (502), but we cannot know that")

	_, err = f.svc.RefundPayment(f.admin, p.ID, "30.01", "", "")
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "the pending refund still reserves its 20.00: %v", err)
	res, err := f.svc.RefundPayment(f.admin, p.ID, "", "", "")
	after := res.Payment
	require.NoError(t, err)
	require.Equal(t, "30.00", after.RefundedAmount.String(), "the rest is what is neither refunded nor reserved")
	require.Equal(t, "success", after.Status)
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'refund.outcome_unknown'`))
	testfixture.CheckMoneyInvariants(t, f.pool)
}

func TestRefundWhileTheGatewaysCircuitIsOpenFailsAsUnavailable(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	p := f.paidAtTheGateway(t, "50.00")

	// Point the interface at a closed port and let five failed calls open
	// the breaker of that host.
	dead := deadURL(t)
	gw, err := f.gws.Get(context.Background(), f.epayGW)
	require.NoError(t, err)
	gw.ConfigJSON = mustJSON(map[string]any{"api_url": dead + "/", "pid": epay.DefaultPID, "key": epay.DefaultKey})
	f.gws.set(gw)
	for range 5 {
		_, _ = plugintest.CallErr(f.epayPlugin, "test_config", gw.ConfigJSON, "{}")
	}

	_, err = f.svc.RefundPayment(f.admin, p.ID, "10.00", "", "")
	require.True(t, apperr.Is(err, apperr.Unavailable), "%v", err)
	require.Contains(t, err.Error(), "unavailable")
	rs := f.refunds(t, p.ID)
	require.Len(t, rs, 1)
	require.Equal(t, store.RefundFailed, rs[0].Status, "nothing was sent: the refund failed, nothing reserved")
	require.Contains(t, rs[0].Error, "circuit open")
	testfixture.CheckMoneyInvariants(t, f.pool)
}

func TestRefundOfABalancePaymentCreditsTheBalance(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	ctx := context.Background()
	_, err := f.pool.Exec(ctx, `UPDATE customers SET balance = 100.00 WHERE id = $1`, f.alice)
	require.NoError(t, err)
	orderID := f.order(t, "60.00")
	orders := order.NewService(f.pool, []string{"CNY"}, nil, nil, nil)
	paid, err := orders.PayWithBalance(f.asAlice, orderID)
	require.NoError(t, err)

	res, err := f.svc.RefundPayment(f.admin, paid.Payment.ID, "25.50", "partly unused", "")
	after := res.Payment
	require.NoError(t, err)
	require.Equal(t, "25.50", after.RefundedAmount.String())
	acct, err := store.GetBalanceAccount(ctx, f.pool, f.alice)
	require.NoError(t, err)
	require.Equal(t, "65.50", acct.Balance.String())
	var typ, amount, before, bal string
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT type, amount::text, balance_before::text, balance_after::text
		FROM balance_transactions WHERE payment_id = $1 AND type = 'refund'`, paid.Payment.ID).Scan(&typ, &amount, &before, &bal))
	require.Equal(t, []string{"refund", "25.50", "40.00", "65.50"}, []string{typ, amount, before, bal})

	res, err = f.svc.RefundPayment(f.admin, paid.Payment.ID, "", "", "")
	after = res.Payment
	require.NoError(t, err)
	require.Equal(t, "refunded", after.Status)
	acct, err = store.GetBalanceAccount(ctx, f.pool, f.alice)
	require.NoError(t, err)
	require.Equal(t, "100.00", acct.Balance.String(), "every cent is back")
	require.Equal(t, "refunded", f.orderStatus(t, orderID), "a full refund ends the order's service, also while it is provisioning")
	var queued int
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE order_id = $1 AND event_type = 'order_refunded'
		AND payload->>'payment_id' = $2`, orderID, paid.Payment.ID.String()).Scan(&queued))
	require.Equal(t, 1, queued, "order_refunded is queued in the refund's transaction")
	require.Empty(t, f.fake.Refunds(), "no gateway involved")
	testfixture.CheckMoneyInvariants(t, f.pool)
}

func TestConfirmBankTransferSettlesLikeACallback(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	orderID := f.order(t, "75.00")
	p, err := f.svc.CreatePayment(f.asAlice, payment.NewPayment{OrderID: &orderID, GatewayInterfaceID: f.bankGW, ReturnURL: "https://x.example"})
	require.NoError(t, err)

	_, err = f.svc.ConfirmBankTransfer(f.asAlice, p.ID, "STMT-1")
	require.True(t, apperr.Is(err, apperr.PermissionDenied), "%v", err)

	got, err := f.svc.ConfirmBankTransfer(f.admin, p.ID, "STMT-1")
	require.NoError(t, err)
	require.Equal(t, "success", got.Status)
	require.Equal(t, "STMT-1", got.GatewayPaymentID)
	require.Equal(t, "STMT-1", got.GatewayTxID)
	require.Equal(t, "paid", f.orderStatus(t, orderID))
	require.Equal(t, 1, f.orderPaidEvents(t, orderID))
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'payment.confirm_bank_transfer' AND actor_kind = 'admin' AND actor_id = $1`, f.adminID.String()))

	_, err = f.svc.ConfirmBankTransfer(f.admin, p.ID, "STMT-1")
	require.True(t, apperr.Is(err, apperr.AlreadyExists), "%v", err)
	_, err = f.svc.ConfirmBankTransfer(f.admin, p.ID, "STMT-2")
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)

	epayPayment := f.pay(t, f.order(t, "1.00"))
	_, err = f.svc.ConfirmBankTransfer(f.admin, epayPayment.ID, "STMT-3")
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	require.Contains(t, err.Error(), "not by bank transfer")
	_, err = f.svc.ConfirmBankTransfer(f.admin, uuid.New(), "STMT-3")
	require.True(t, apperr.Is(err, apperr.NotFound), "%v", err)
	_, err = f.svc.ConfirmBankTransfer(f.admin, p.ID, "  ")
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)

	// A bank transfer is refunded by hand: the refund is accepted and stays
	// pending, reserving its amount, until an admin records the transfer.
	res, err := f.svc.RefundPayment(f.admin, p.ID, "", "customer withdrew", "")
	require.NoError(t, err)
	require.Equal(t, store.RefundPending, res.Refund.Status)
	require.Contains(t, res.Refund.Error, "refund manually")
	require.Equal(t, "success", res.Payment.Status, "nothing is refunded until the money has gone back")
	require.Equal(t, "0.00", res.Payment.RefundedAmount.String())
	_, err = f.svc.RefundPayment(f.admin, p.ID, "0.01", "", "")
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "the pending refund reserves everything: %v", err)

	done, err := f.svc.ResolveRefund(f.admin, res.Refund.ID, store.RefundSucceeded, "SEPA-REF-9", "sent back from the bank account")
	require.NoError(t, err)
	require.Equal(t, store.RefundSucceeded, done.Refund.Status)
	require.Equal(t, "SEPA-REF-9", done.Refund.GatewayRefundID)
	require.Empty(t, done.Refund.Error, "a refund that succeeded has no error left")
	require.Equal(t, "refunded", done.Payment.Status)
	require.Equal(t, "75.00", done.Payment.RefundedAmount.String())
	require.Equal(t, "refunded", f.orderStatus(t, orderID), "a paid order refunded in full is refunded")
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'refund.accepted' AND entity_id = $1`, res.Refund.ID.String()))
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'refund.resolve' AND actor_id = $1 AND after->>'note' = 'sent back from the bank account'`, f.adminID.String()))
	testfixture.CheckMoneyInvariants(t, f.pool)
}

// callerFunc is a gateway plugin stand-in.
type callerFunc func(fn string) (string, error)

func (c callerFunc) Call(_ context.Context, fn, _, _ string) (string, error) { return c(fn) }

// A plugin that raised error() is trusted to have sent nothing only when it
// could not connect; after any other host HTTP error the request may have
// reached the gateway, so the refund stays pending for an admin.
func TestRefundScriptErrorIsAFailureOnlyWhenNothingCanHaveBeenSent(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	p := f.paidAtTheGateway(t, "30.00")
	gw, err := f.gws.Get(context.Background(), f.epayGW)
	require.NoError(t, err)

	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	gw.Plugin = callerFunc(func(string) (string, error) {
		return "", &plugin.CallError{Plugin: "epay", Function: "refund", Kind: plugin.KindScriptError, Message: "not sent", Err: fmt.Errorf("outbound POST h: %w", refused)}
	})
	f.gws.set(gw)
	_, err = f.svc.RefundPayment(f.admin, p.ID, "10.00", "", "")
	require.True(t, apperr.Is(err, apperr.Internal), "%v", err)

	gw.Plugin = callerFunc(func(string) (string, error) {
		return "", &plugin.CallError{Plugin: "epay", Function: "refund", Kind: plugin.KindScriptError, Message: "read: connection reset", Err: errors.New("connection reset by peer")}
	})
	f.gws.set(gw)
	_, err = f.svc.RefundPayment(f.admin, p.ID, "10.00", "", "")
	require.True(t, apperr.Is(err, apperr.Internal), "%v", err)
	require.Contains(t, err.Error(), "the outcome is unknown")

	gw.Plugin = callerFunc(func(string) (string, error) {
		return "", &plugin.CallError{Plugin: "epay", Function: "refund", Kind: plugin.KindTimeout, Message: "deadline exceeded"}
	})
	f.gws.set(gw)
	_, err = f.svc.RefundPayment(f.admin, p.ID, "10.00", "", "")
	require.True(t, apperr.Is(err, apperr.Internal), "%v", err)
	require.Contains(t, err.Error(), "the outcome is unknown")

	statuses := map[string]int{}
	for _, r := range f.refunds(t, p.ID) {
		statuses[r.Status]++
	}
	require.Equal(t, map[string]int{store.RefundFailed: 1, store.RefundPending: 2}, statuses)
	_, err = f.svc.RefundPayment(f.admin, p.ID, "10.01", "", "")
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "two pending refunds reserve 20.00: %v", err)
	testfixture.CheckMoneyInvariants(t, f.pool)
}

func TestRefundOrderGivesEverythingBackOnceAndNeverResendsAnUnknownRefund(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	ctx := context.Background()

	// A gateway payment, partly refunded by an admin already.
	p := f.paidAtTheGateway(t, "40.00")
	_, err := f.svc.RefundPayment(f.admin, p.ID, "15.00", "", "")
	require.NoError(t, err)
	require.NoError(t, f.svc.RefundOrder(ctx, *p.OrderID, "provisioning_failed"))
	got := f.payment(t, p.ID)
	require.Equal(t, "refunded", got.Status)
	require.Equal(t, "40.00", got.RefundedAmount.String())
	o, _ := f.fake.Order(p.ID.String())
	require.Equal(t, "40.00", o.Refunded)
	require.Equal(t, 1, f.count(t, `SELECT count(*) FROM refunds WHERE payment_id = $1 AND requested_by IS NULL AND reason = 'provisioning_failed'`, p.ID))

	require.NoError(t, f.svc.RefundOrder(ctx, *p.OrderID, "provisioning_failed"), "idempotent")
	require.Len(t, f.fake.Refunds(), 2, "nothing sent again")

	// A balance payment: back to the balance.
	_, err = f.pool.Exec(ctx, `UPDATE customers SET balance = 10.00 WHERE id = $1`, f.alice)
	require.NoError(t, err)
	orderID := f.order(t, "10.00")
	_, err = order.NewService(f.pool, []string{"CNY"}, nil, nil, nil).PayWithBalance(f.asAlice, orderID)
	require.NoError(t, err)
	require.NoError(t, f.svc.RefundOrder(ctx, orderID, "provisioning_failed"))
	acct, err := store.GetBalanceAccount(ctx, f.pool, f.alice)
	require.NoError(t, err)
	require.Equal(t, "10.00", acct.Balance.String())

	// An unknown outcome: reported, and never sent twice.
	q := f.paidAtTheGateway(t, "20.00")
	f.fake.InjectFault(epay.Fault{Path: "/api.php", Act: "refund", Status: http.StatusBadGateway, Times: 1})
	err = f.svc.RefundOrder(ctx, *q.OrderID, "provisioning_failed")
	require.True(t, apperr.Is(err, apperr.FailedPrecondition), "%v", err)
	err = f.svc.RefundOrder(ctx, *q.OrderID, "provisioning_failed")
	require.True(t, apperr.Is(err, apperr.FailedPrecondition), "%v", err)
	require.Contains(t, err.Error(), "pending")
	require.Len(t, f.refunds(t, q.ID), 1, "the pending refund was not sent again")

	// An admin finds it never reached the gateway: failed. The next
	// attempt of the event refunds it again, and then it is done.
	qr := f.refunds(t, q.ID)[0]
	_, err = f.svc.ResolveRefund(f.admin, qr.ID, store.RefundFailed, "", "not in the gateway's refund list")
	require.NoError(t, err)
	require.NoError(t, f.svc.RefundOrder(ctx, *q.OrderID, "provisioning_failed"))
	require.Equal(t, "refunded", f.payment(t, q.ID).Status)
	require.NoError(t, f.svc.RefundOrder(ctx, *q.OrderID, "provisioning_failed"), "idempotent")
	require.Equal(t, 3, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'refund.request' AND actor_kind = 'system'`),
		"the system reserved three gateway refunds: the rest of p, and q twice (once more after the admin found the first failed)")
	testfixture.CheckMoneyInvariants(t, f.pool)
}

func TestResolveRefundRecordsWhatAnAdminFoundAtTheGateway(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	p := f.paidAtTheGateway(t, "50.00")

	// Two refunds whose outcome is unknown (the gateway answered 502).
	f.fake.InjectFault(epay.Fault{Path: "/api.php", Act: "refund", Status: http.StatusBadGateway, Times: 2})
	_, err := f.svc.RefundPayment(f.admin, p.ID, "20.00", "", "")
	require.True(t, apperr.Is(err, apperr.Internal), "%v", err)
	_, err = f.svc.RefundPayment(f.admin, p.ID, "30.00", "", "")
	require.True(t, apperr.Is(err, apperr.Internal), "%v", err)
	rs := f.refunds(t, p.ID)
	require.Len(t, rs, 2)
	first, second := rs[0], rs[1]
	if first.Amount.String() != "20.00" {
		first, second = second, first
	}
	_, err = f.svc.RefundPayment(f.admin, p.ID, "0.01", "", "")
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "both reserve their amounts: %v", err)

	// Refused: a customer, a bad outcome, no note, an unknown refund.
	_, err = f.svc.ResolveRefund(f.asAlice, first.ID, store.RefundSucceeded, "", "checked")
	require.True(t, apperr.Is(err, apperr.PermissionDenied), "%v", err)
	_, err = f.svc.ResolveRefund(f.admin, first.ID, "pending", "", "checked")
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	_, err = f.svc.ResolveRefund(f.admin, first.ID, store.RefundSucceeded, "", "  ")
	require.True(t, apperr.Is(err, apperr.InvalidArgument), "%v", err)
	_, err = f.svc.ResolveRefund(f.admin, uuid.New(), store.RefundSucceeded, "", "checked")
	require.True(t, apperr.Is(err, apperr.NotFound), "%v", err)
	require.Equal(t, 2, f.count(t, `SELECT count(*) FROM refunds WHERE payment_id = $1 AND status = 'pending'`, p.ID), "refusals change nothing")

	// The first went through at the gateway: it counts now.
	res, err := f.svc.ResolveRefund(f.admin, first.ID, store.RefundSucceeded, "R-1", "listed as refunded in the gateway's console")
	require.NoError(t, err)
	require.Equal(t, store.RefundSucceeded, res.Refund.Status)
	require.Equal(t, "20.00", res.Payment.RefundedAmount.String())
	require.Equal(t, "success", res.Payment.Status)
	_, err = f.svc.ResolveRefund(f.admin, first.ID, store.RefundFailed, "", "changed my mind")
	require.True(t, apperr.Is(err, apperr.FailedPrecondition), "an outcome is recorded once: %v", err)

	// The second never arrived: its 30.00 is free again.
	res, err = f.svc.ResolveRefund(f.admin, second.ID, store.RefundFailed, "", "not in the gateway's refund list")
	require.NoError(t, err)
	require.Equal(t, store.RefundFailed, res.Refund.Status)
	require.Equal(t, "20.00", res.Payment.RefundedAmount.String())
	again, err := f.svc.RefundPayment(f.admin, p.ID, "", "", "")
	require.NoError(t, err)
	require.Equal(t, "30.00", again.Refund.Amount.String())
	require.Equal(t, "refunded", again.Payment.Status)
	require.Equal(t, "50.00", again.Payment.RefundedAmount.String())
	require.Equal(t, 2, f.count(t, `SELECT count(*) FROM audit_log WHERE action = 'refund.resolve' AND actor_kind = 'admin'`))
	testfixture.CheckMoneyInvariants(t, f.pool)
}

// A refund reserved moments ago without any answer yet may still have its
// gateway call running: an admin's word must not cross the gateway's.
func TestResolveRefundWaitsUntilTheGatewayCallCannotStillBeRunning(t *testing.T) {
	t.Parallel()
	f := setupFlow(t)
	p := f.paidAtTheGateway(t, "10.00")
	ref, err := store.InsertRefund(context.Background(), f.pool, store.NewRefund{
		PaymentID: p.ID, Amount: money.MustParse("10.00"), Status: store.RefundPending, CreatedAt: f.clock.Now(),
	})
	require.NoError(t, err)

	_, err = f.svc.ResolveRefund(f.admin, ref.ID, store.RefundFailed, "", "nothing at the gateway")
	require.True(t, apperr.Is(err, apperr.FailedPrecondition), "%v", err)
	require.Contains(t, err.Error(), "may still be running")

	f.clock.Advance(2 * time.Minute) // past the call's and the recording's deadlines
	res, err := f.svc.ResolveRefund(f.admin, ref.ID, store.RefundFailed, "", "nothing at the gateway")
	require.NoError(t, err)
	require.Equal(t, store.RefundFailed, res.Refund.Status)
	testfixture.CheckMoneyInvariants(t, f.pool)
}
