package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/store"
)

func TestErrorMapsEveryKindToOneCode(t *testing.T) {
	t.Parallel()
	for kind, code := range codes {
		err := Error(context.Background(), slog.New(slog.DiscardHandler), apperr.New(kind, "why %d", 1))
		require.Equal(t, code, connect.CodeOf(err), kind.String())
	}
}

func TestDomainMessagesReachTheClientButCausesDoNot(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	err := Error(context.Background(), log, apperr.Wrap(apperr.InvalidArgument, errors.New("SELECT secret"), "amount exceeds the payment"))
	require.Equal(t, "invalid_argument: amount exceeds the payment", err.Error())

	err = Error(context.Background(), log, fmt.Errorf("query: %w", errors.New(`relation "payments" does not exist`)))
	require.Equal(t, connect.CodeInternal, connect.CodeOf(err))
	require.NotContains(t, err.Error(), "relation")
	require.Contains(t, logs.String(), "relation", "the cause is logged for operators")
}

func TestStoreAndContextErrorsMap(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(Error(ctx, log, fmt.Errorf("x: %w", store.ErrNotFound))))
	require.Equal(t, connect.CodeAlreadyExists, connect.CodeOf(Error(ctx, log, store.ErrConflict)))
	require.Equal(t, connect.CodeAborted, connect.CodeOf(Error(ctx, log, store.ErrRetryable)))
	unavailable := Error(ctx, log, fmt.Errorf("begin: %w", store.ErrUnavailable))
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(unavailable))
	require.Equal(t, "database unavailable, retry", unavailable.(*connect.Error).Message())

	busy := Error(ctx, log, fmt.Errorf("store: begin transaction: %w", store.ErrPoolBusy))
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(busy))
	require.Equal(t, "database busy, retry", busy.(*connect.Error).Message())
	require.Equal(t, connect.CodeCanceled, connect.CodeOf(Error(ctx, log, context.Canceled)))
	require.Equal(t, connect.CodeDeadlineExceeded, connect.CodeOf(Error(ctx, log, context.DeadlineExceeded)))
	require.NoError(t, Error(ctx, log, nil))
	ce := connect.NewError(connect.CodeUnavailable, errors.New("circuit open for gw.example"))
	require.Same(t, ce, Error(ctx, log, ce))
}

// An Internal some layer wrapped around the database failing the call is
// no bug: the client gets Unavailable or Aborted and retries with its
// Idempotency-Key. An Internal shown on purpose (a refund whose outcome
// could not be recorded: retrying it could pay twice) keeps its code.
func TestAnInternalAroundALostDatabaseIsUnavailable(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	ctx := context.Background()
	lost := apperr.Wrap(apperr.Internal, fmt.Errorf("insert: %w", store.ErrUnavailable), "balance: post payment")
	require.Equal(t, connect.CodeUnavailable, connect.CodeOf(Error(ctx, log, lost)))
	conflict := apperr.Wrap(apperr.Internal, store.ErrRetryable, "order: move")
	require.Equal(t, connect.CodeAborted, connect.CodeOf(Error(ctx, log, conflict)))
	shown := apperr.Wrap(apperr.Internal, store.ErrUnavailable, "refund r1: the gateway's answer could not be recorded").Show()
	require.Equal(t, connect.CodeInternal, connect.CodeOf(Error(ctx, log, shown)))
	bug := apperr.Wrap(apperr.Internal, store.ErrNotFound, "lock order")
	require.Equal(t, connect.CodeInternal, connect.CodeOf(Error(ctx, log, bug)))
}

// The interceptor maps what a handler returns, and only errors: an answer
// passes untouched, a domain error arrives with its code and message, a
// store error with its generic one.
func TestErrorInterceptorMapsWhatAHandlerReturns(t *testing.T) {
	t.Parallel()
	ic := NewErrorInterceptor(slog.New(slog.DiscardHandler))
	call := func(err error) (connect.AnyResponse, error) {
		return ic.WrapUnary(func(context.Context, connect.AnyRequest) (connect.AnyResponse, error) {
			if err != nil {
				return nil, err
			}
			return connect.NewResponse(&struct{}{}), nil
		})(context.Background(), connect.NewRequest(&struct{}{}))
	}
	res, err := call(nil)
	require.NoError(t, err)
	require.NotNil(t, res)
	_, err = call(apperr.New(apperr.FailedPrecondition, "order is paid"))
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err))
	var ce *connect.Error
	require.True(t, errors.As(err, &ce))
	require.Equal(t, "order is paid", ce.Message())
	_, err = call(fmt.Errorf("lookup: %w", store.ErrNotFound))
	require.Equal(t, connect.CodeNotFound, connect.CodeOf(err))
}

// A failure the request's own end caused — a plugin call or a query cut
// short because the client went away or its deadline passed — answers
// Canceled or DeadlineExceeded and is not logged as a fault, whatever a
// layer wrapped it in. The same failure on a live request, or an unrelated
// failure on an ended one, keeps its code.
func TestFailureCausedByTheRequestsEndIsAnsweredByItsContext(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	pluginCut := func(cause error) error {
		return apperr.Wrap(apperr.Internal, fmt.Errorf("plugin epay: create_payment: timeout: %w", cause), "gateway plugin epay: create_payment failed").Show()
	}

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	require.Equal(t, connect.CodeCanceled, connect.CodeOf(Error(gone, log, pluginCut(context.Canceled))))
	late, cancelLate := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelLate()
	require.Equal(t, connect.CodeDeadlineExceeded, connect.CodeOf(Error(late, log, pluginCut(context.DeadlineExceeded))))
	require.Equal(t, connect.CodeDeadlineExceeded, connect.CodeOf(Error(late, log, apperr.Wrap(apperr.Unavailable, context.DeadlineExceeded, "gateway gw.example unavailable"))))
	require.Empty(t, logs.String(), "a client's leaving is no fault")

	require.Equal(t, connect.CodeInternal, connect.CodeOf(Error(context.Background(), log, pluginCut(context.Canceled))), "a live request's failure keeps its code")
	require.Equal(t, connect.CodeInternal, connect.CodeOf(Error(gone, log, errors.New("nil map"))), "an unrelated failure is not hidden")
	require.Contains(t, logs.String(), "nil map")
}
