package app_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	gatewaypb "github.com/rustbill/paymentd/gen/billing/gateway"
	identitypb "github.com/rustbill/paymentd/gen/billing/identity"
	"github.com/rustbill/paymentd/gen/billing/identity/identitypbconnect"
	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/internal/fakes/epay"
	"github.com/rustbill/paymentd/internal/idempotency"
	"github.com/rustbill/paymentd/internal/testkit"
)

// keyed is c with an Idempotency-Key.
func keyed(c credential, key string) credential {
	return func(h http.Header) { c(h); h.Set(idempotency.Header, key) }
}

// paidEpay is a payment of a new order paid through the fake epay and
// settled.
func (e *payBundle) paidEpay(t *testing.T) string {
	t.Helper()
	id := e.createPayment(t, e.order(t)).GetPayment().GetId()
	require.NoError(t, e.fake.Pay(id))
	e.waitSettled(t, id)
	return id
}

// A refund retried with its Idempotency-Key is answered with the first
// refund, whatever the retry's timing: after the first finished, while it
// still runs (the client's deadline passed, the gateway is slow), or
// several at once. The gateway is asked once and the money goes back once.
// The same key with another request is refused and changes nothing; a new
// key is a new refund.
func TestARefundRetriedWithItsIdempotencyKeyRefundsOnce(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	id := e.paidEpay(t)
	refund := func(ctx context.Context, key, amount string) (*connect.Response[paymentpb.RefundPaymentResponse], error) {
		return e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: id, Amount: amount, Reason: "retry"}, keyed(e.c.admin, key)))
	}

	first, err := refund(ctx, "key-1", "1.00")
	require.NoError(t, err)
	require.Empty(t, first.Header().Get(idempotency.ReplayedHeader))
	again, err := refund(ctx, "key-1", "1.00")
	require.NoError(t, err)
	require.Equal(t, "true", again.Header().Get(idempotency.ReplayedHeader))
	require.Equal(t, first.Msg.GetRefund().GetId(), again.Msg.GetRefund().GetId())
	require.Equal(t, "1.00", again.Msg.GetPayment().GetRefundedAmount())
	require.Len(t, e.fake.Refunds(), 1)

	_, err = refund(ctx, "key-1", "2.00")
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "another request")
	require.Len(t, e.fake.Refunds(), 1)

	// The client's deadline passes once the gateway has the refund, which
	// takes it 1.5 s; the refund goes on, and the retries (three at once)
	// wait for it. A short real deadline could pass before a busy machine
	// even called the gateway: the retries would then make the refund, and
	// the test would pass without a call outliving its client.
	arrived := make(chan struct{}, 1)
	e.fake.InjectFault(epay.Fault{Path: "/api.php", Act: "refund", Delay: 1500 * time.Millisecond, Times: 1, Arrived: arrived})
	_, err = refund(testkit.ExpiresOn(arrived), "key-2", "1.00")
	require.Equal(t, connect.CodeDeadlineExceeded, connect.CodeOf(err), "%v", err)
	var wg sync.WaitGroup
	ids := make([]string, 3)
	for i := range ids {
		wg.Go(func() {
			res, err := refund(ctx, "key-2", "1.00")
			if err == nil {
				ids[i] = res.Msg.GetRefund().GetId()
			}
		})
	}
	wg.Wait()
	require.NotEmpty(t, ids[0])
	require.Equal(t, []string{ids[0], ids[0], ids[0]}, ids)
	require.Len(t, e.fake.Refunds(), 2, "one refund for key-1, one for key-2")
	require.Equal(t, "2.00", e.getPayment(t, id).GetRefundedAmount())

	// A new key is a new refund.
	_, err = refund(ctx, "key-3", "1.00")
	require.NoError(t, err)
	require.Equal(t, "3.00", e.getPayment(t, id).GetRefundedAmount())
	require.Equal(t, 3, e.count(t, `SELECT count(*) FROM refunds WHERE payment_id = $1`, id))
	requireLedgerClean(t, e)
}

// A key belongs to the account that sent it: the same text from another
// admin's session is another key. A key that is not printable ASCII, or
// longer than 255, is refused before anything runs.
func TestIdempotencyKeysBelongToTheirAccountAndAreChecked(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	customers := identitypbconnect.NewCustomerAdminServiceClient(http.DefaultClient, e.r.baseURL)
	adjust := func(cr credential) (*connect.Response[identitypb.AdjustBalanceResponse], error) {
		return customers.AdjustBalance(ctx, with(&identitypb.AdjustBalanceRequest{CustomerId: e.c.customerID.String(), Amount: "5.00", Note: "goodwill"}, cr))
	}
	key := newAdminKey(t, e.r.baseURL, e.c.admin, "admin")
	a, err := adjust(keyed(e.c.admin, "same"))
	require.NoError(t, err)
	b, err := adjust(keyed(key.cred, "same"))
	require.NoError(t, err, "the admin's own API key acts as the admin: the kept answer")
	require.Equal(t, "true", b.Header().Get(idempotency.ReplayedHeader))
	require.Equal(t, a.Msg.GetTransaction().GetId(), b.Msg.GetTransaction().GetId())
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM balance_transactions WHERE type = 'manual_adjust'`))

	for _, bad := range []string{"has space", "ключ", strings.Repeat("k", 256)} {
		_, err := adjust(keyed(e.c.admin, bad))
		require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%q: %v", bad, err)
	}
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM balance_transactions WHERE type = 'manual_adjust'`))

	// Without a key every call is its own.
	_, err = adjust(e.c.admin)
	require.NoError(t, err)
	require.Equal(t, 2, e.count(t, `SELECT count(*) FROM balance_transactions WHERE type = 'manual_adjust'`))
}

// A refusal is kept like an answer: the retry gets it again, marked as
// replayed, and the money does not move.
func TestAKeptRefusalIsAnsweredAgain(t *testing.T) {
	t.Parallel()
	e := startPayments(t)
	ctx := context.Background()
	id := e.paidEpay(t)
	refund := func(key, amount string) error {
		_, err := e.payments.RefundPayment(ctx, with(&paymentpb.RefundPaymentRequest{PaymentId: id, Amount: amount}, keyed(e.c.admin, key)))
		return err
	}
	err := refund("too-much", "99.00")
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	err2 := refund("too-much", "99.00")
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err2))
	require.Equal(t, err.Error(), err2.Error())
	var ce *connect.Error
	require.ErrorAs(t, err2, &ce)
	require.Equal(t, "true", ce.Meta().Get(idempotency.ReplayedHeader))

	// The bank transfer confirmation of an epay payment is refused
	// (InvalidArgument) and kept too.
	_, err = e.admin.ConfirmBankTransfer(ctx, with(&gatewaypb.ConfirmBankTransferRequest{PaymentId: id, Reference: "x"}, keyed(e.c.admin, "confirm")))
	require.Equal(t, connect.CodeInvalidArgument, connect.CodeOf(err), "%v", err)
	require.Equal(t, 1, e.count(t, `SELECT count(*) FROM idempotency_keys WHERE key = 'confirm' AND error_code = 'invalid_argument'`))
	require.Zero(t, e.count(t, `SELECT count(*) FROM refunds WHERE payment_id = $1`, id))
}
