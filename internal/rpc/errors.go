package rpc

import (
	"context"
	"errors"
	"log/slog"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"connectrpc.com/connect"

	"github.com/rustbill/paymentd/internal/apperr"
	"github.com/rustbill/paymentd/internal/rpcanswer"
	"github.com/rustbill/paymentd/internal/store"
)

var codes = map[apperr.Kind]connect.Code{
	apperr.Internal:           connect.CodeInternal,
	apperr.InvalidArgument:    connect.CodeInvalidArgument,
	apperr.NotFound:           connect.CodeNotFound,
	apperr.AlreadyExists:      connect.CodeAlreadyExists,
	apperr.PermissionDenied:   connect.CodePermissionDenied,
	apperr.Unauthenticated:    connect.CodeUnauthenticated,
	apperr.FailedPrecondition: connect.CodeFailedPrecondition,
	apperr.ResourceExhausted:  connect.CodeResourceExhausted,
	apperr.Unavailable:        connect.CodeUnavailable,
}

// NewErrorInterceptor maps the error of every handler through Error, so a
// handler returns its domain or store error as it is and the one mapping
// happens here. It goes innermost, after validation, so that the
// interceptors outside it (metrics, tracing, access lines) see the code the
// client gets.
func NewErrorInterceptor(log *slog.Logger) connect.Interceptor {
	return connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			res, err := next(ctx, req)
			if err != nil {
				return nil, Error(ctx, log, err)
			}
			return res, nil
		}
	})
}

// Error turns err into a *connect.Error for the client. Domain errors keep
// their message (an Internal one only when marked Shown: it is always
// logged); store errors get a generic message of their kind; anything
// else is Internal with "internal error", and is logged with its cause, so no
// SQL text, stack or secret reaches a client and nothing answers Unknown.
func Error(ctx context.Context, log *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	if ended := ctx.Err(); ended != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The request's own end failed the call (its client went away or
		// its deadline passed under a plugin call or a query): answer
		// that, not the Internal or Unavailable a layer wrapped it in.
		// Nobody waits for the answer and it is no fault: not logged.
		return rpcanswer.Ended(ended)
	}
	var ae *apperr.Error
	// An unshown Internal that a layer wrapped around the database failing
	// the call (store.Bug is the rule; this catches a layer that forgot) is
	// no bug: it falls through, and the client gets Unavailable or Aborted.
	if errors.As(err, &ae) && !(ae.Kind == apperr.Internal && !ae.Shown && store.DatabaseFailed(err)) {
		code := codes[ae.Kind]
		if ae.Kind == apperr.Internal {
			logError(ctx, log, err)
			if !ae.Shown {
				return connect.NewError(code, errors.New("internal error"))
			}
		}
		if ae.RetryAfter > 0 {
			return rpcanswer.RetryError(code, ae.Message, ae.RetryAfter)
		}
		cerr := connect.NewError(code, errors.New(ae.Message))
		if ae.Violation != nil {
			addViolation(cerr, *ae.Violation)
		}
		return cerr
	}
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return rpcanswer.Ended(err)
	case errors.Is(err, store.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, errors.New("not found"))
	case errors.Is(err, store.ErrConflict):
		return connect.NewError(connect.CodeAlreadyExists, errors.New("already exists"))
	case errors.Is(err, store.ErrRetryable), errors.Is(err, store.ErrLockNotAvailable):
		return connect.NewError(connect.CodeAborted, errors.New("concurrent update, retry"))
	case errors.Is(err, store.ErrPoolBusy):
		// Overload, not a fault: not logged per request (the pool's
		// metrics show it), and the client may retry.
		return connect.NewError(connect.CodeUnavailable, errors.New("database busy, retry"))
	case store.IsUnavailable(err):
		logError(ctx, log, err)
		return connect.NewError(connect.CodeUnavailable, errors.New("database unavailable, retry"))
	}
	logError(ctx, log, err)
	return connect.NewError(connect.CodeInternal, errors.New("internal error"))
}

func logError(ctx context.Context, log *slog.Logger, err error) {
	if log == nil {
		log = slog.Default()
	}
	log.ErrorContext(ctx, "request failed", "err", err)
}

// addViolation attaches v to cerr as the buf.validate.Violations detail the
// request validator attaches to its own refusals: one violation whose path
// is the field's name.
func addViolation(cerr *connect.Error, v apperr.Violation) {
	el := validate.FieldPathElement_builder{FieldName: new(v.Field)}.Build()
	pv := validate.Violation_builder{
		Field:   validate.FieldPath_builder{Elements: []*validate.FieldPathElement{el}}.Build(),
		RuleId:  new(v.Rule),
		Message: new(v.Message),
	}.Build()
	detail, err := connect.NewErrorDetail(validate.Violations_builder{Violations: []*validate.Violation{pv}}.Build())
	if err == nil {
		cerr.AddDetail(detail)
	}
}
