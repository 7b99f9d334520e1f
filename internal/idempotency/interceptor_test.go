package idempotency_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	paymentpb "github.com/rustbill/paymentd/gen/billing/payment"
	"github.com/rustbill/paymentd/gen/billing/payment/paymentpbconnect"
	"github.com/rustbill/paymentd/internal/auth"
	"github.com/rustbill/paymentd/internal/idempotency"
	"github.com/rustbill/paymentd/internal/testdb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testdb.Main(m)) }

// refunds is a PaymentService whose RefundPayment answers what answer
// says, counting its runs.
type refunds struct {
	paymentpbconnect.UnimplementedPaymentServiceHandler
	runs   atomic.Int32
	answer func(run int32) error
}

func (r *refunds) RefundPayment(context.Context, *connect.Request[paymentpb.RefundPaymentRequest]) (*connect.Response[paymentpb.RefundPaymentResponse], error) {
	n := r.runs.Add(1)
	if err := r.answer(n); err != nil {
		return nil, err
	}
	return connect.NewResponse(&paymentpb.RefundPaymentResponse{Refund: &paymentpb.Refund{Id: uuid.NewString()}}), nil
}

type bundle struct {
	db     *pgxpool.Pool
	svc    *refunds
	client paymentpbconnect.PaymentServiceClient
}

// setup serves svc behind the interceptor, every call as one admin.
func setup(t *testing.T, answer func(run int32) error) *bundle {
	t.Helper()
	db := testdb.Pool(t)
	svc := &refunds{answer: answer}
	keys := idempotency.New(db, idempotency.Options{
		Procedures: []idempotency.Procedure{idempotency.For[paymentpb.RefundPaymentResponse](paymentpbconnect.PaymentServiceRefundPaymentProcedure)},
		MaxWait:    time.Second,
	})
	path, h := paymentpbconnect.NewPaymentServiceHandler(svc, connect.WithInterceptors(keys))
	admin := auth.Principal{Role: auth.RoleAdmin, ID: uuid.New(), Kind: auth.KindSession}
	mux := http.NewServeMux()
	mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), admin)))
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &bundle{db: db, svc: svc, client: paymentpbconnect.NewPaymentServiceClient(srv.Client(), srv.URL)}
}

func (b *bundle) refund(key, amount string) (*connect.Response[paymentpb.RefundPaymentResponse], error) {
	req := connect.NewRequest(&paymentpb.RefundPaymentRequest{PaymentId: "p", Amount: amount})
	req.Header().Set(idempotency.Header, key)
	return b.client.RefundPayment(context.Background(), req)
}

// A call refused with a code that promises nothing changed and asks for a
// retry (Unavailable, ResourceExhausted, Aborted) gives its key back: the
// retry runs, and its outcome is the one kept.
func TestARetryableRefusalGivesTheKeyBack(t *testing.T) {
	t.Parallel()
	for _, code := range []connect.Code{connect.CodeUnavailable, connect.CodeResourceExhausted, connect.CodeAborted} {
		t.Run(code.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(run int32) error {
				if run == 1 {
					return connect.NewError(code, errors.New("busy"))
				}
				return nil
			})
			_, err := b.refund("k", "1.00")
			require.Equal(t, code, connect.CodeOf(err))
			first, err := b.refund("k", "1.00")
			require.NoError(t, err)
			require.Empty(t, first.Header().Get(idempotency.ReplayedHeader), "the retry ran")
			again, err := b.refund("k", "1.00")
			require.NoError(t, err)
			require.Equal(t, "true", again.Header().Get(idempotency.ReplayedHeader))
			require.Equal(t, first.Msg.GetRefund().GetId(), again.Msg.GetRefund().GetId())
			require.EqualValues(t, 2, b.svc.runs.Load())
		})
	}
}

// Any other error is kept, with its code and message, and answered again
// without running.
func TestAnErrorIsKeptAndAnsweredAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, func(int32) error {
		return connect.NewError(connect.CodeInternal, errors.New("gateway refund failed: the outcome is unknown"))
	})
	_, err := b.refund("k", "1.00")
	require.Equal(t, connect.CodeInternal, connect.CodeOf(err))
	_, again := b.refund("k", "1.00")
	require.Equal(t, connect.CodeInternal, connect.CodeOf(again))
	require.Equal(t, err.Error(), again.Error())
	require.EqualValues(t, 1, b.svc.runs.Load())
}

// A key whose first call never finished (its instance died: the row stays
// running past the run timeout) answers FailedPrecondition, never runs
// again; an expired key is free again.
func TestAStaleKeyIsFailedPreconditionAndAnExpiredOneIsFree(t *testing.T) {
	t.Parallel()
	b := setup(t, func(int32) error { return nil })
	_, err := b.refund("k", "1.00")
	require.NoError(t, err)
	ctx := context.Background()
	_, err = b.db.Exec(ctx, `UPDATE idempotency_keys SET state = 'running', response = NULL, finished_at = NULL,
		created_at = now() - interval '1 hour'`)
	require.NoError(t, err)
	_, err = b.refund("k", "1.00")
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
	require.Contains(t, err.Error(), "outcome is unknown")
	require.EqualValues(t, 1, b.svc.runs.Load())

	_, err = b.db.Exec(ctx, `UPDATE idempotency_keys SET expires_at = now() - interval '1 second'`)
	require.NoError(t, err)
	res, err := b.refund("k", "2.00")
	require.NoError(t, err, "an expired key takes any request")
	require.Empty(t, res.Header().Get(idempotency.ReplayedHeader))
	require.EqualValues(t, 2, b.svc.runs.Load())
}

// A second call while the first runs waits for it and answers its outcome;
// one that waits longer than MaxWait is Aborted, so the client retries.
func TestACallWaitsForTheFirstWithItsKey(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := setup(t, func(run int32) error {
		if run == 1 {
			<-release
		}
		return nil
	})
	type result struct {
		res *connect.Response[paymentpb.RefundPaymentResponse]
		err error
	}
	first := make(chan result, 1)
	go func() {
		res, err := b.refund("k", "1.00")
		first <- result{res, err}
	}()
	require.Eventually(t, func() bool { return b.svc.runs.Load() == 1 }, 10*time.Second, 5*time.Millisecond)
	_, err := b.refund("k", "1.00")
	require.Equal(t, connect.CodeAborted, connect.CodeOf(err), "past MaxWait: %v", err)

	second := make(chan result, 1)
	go func() {
		res, err := b.refund("k", "1.00")
		second <- result{res, err}
	}()
	close(release)
	r1, r2 := <-first, <-second
	require.NoError(t, r1.err)
	require.NoError(t, r2.err)
	require.Equal(t, r1.res.Msg.GetRefund().GetId(), r2.res.Msg.GetRefund().GetId())
	require.EqualValues(t, 1, b.svc.runs.Load())
}
