package payment

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/rustbill/paymentd/internal/apperr"
)

func TestCallbackOutcomesAreClassifiedFromTheAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		res  CallbackResult
		err  error
		want string
	}{
		{CallbackResult{Applied: true}, nil, CallbackAccepted},
		{CallbackResult{Duplicate: true}, nil, CallbackDuplicate},
		{CallbackResult{}, nil, CallbackIgnored},
		{CallbackResult{}, apperr.Wrap(apperr.InvalidArgument, errBadSignature, "signature verification failed: x"), CallbackBadSignature},
		{CallbackResult{}, apperr.Wrap(apperr.InvalidArgument, errMalformedCallback, "malformed callback: x"), CallbackMalformed},
		{CallbackResult{}, apperr.New(apperr.InvalidArgument, "amount mismatch"), CallbackMismatch},
		{CallbackResult{}, apperr.New(apperr.NotFound, "payment not found"), CallbackNotFound},
		{CallbackResult{}, apperr.New(apperr.Unavailable, "gateway down"), CallbackUnavailable},
		{CallbackResult{}, apperr.New(apperr.Internal, "boom"), CallbackError},
		{CallbackResult{}, errors.New("database gone"), CallbackError},
	} {
		require.Equal(t, tc.want, callbackOutcome(tc.res, tc.err), "%v", tc.err)
	}
}
