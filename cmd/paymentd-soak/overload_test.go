package main

import (
	"errors"
	"testing"

	"connectrpc.com/connect"
)

// The overload scenario fails on any answer but a clean refusal: a
// transport failure dressed as Unavailable, Internal or an uncoded error
// must not pass as "the service was busy".
func TestOnlyCleanRefusalsPassTheOverloadScenario(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{connect.NewError(connect.CodeDeadlineExceeded, errors.New("deadline exceeded while queued for a slot")), true},
		{connect.NewError(connect.CodeResourceExhausted, errors.New("server busy, retry after 1s")), true},
		{connect.NewError(connect.CodeUnavailable, errors.New("database busy, retry")), true},
		{connect.NewError(connect.CodeUnavailable, errors.New("dial tcp: connection refused")), false},
		{connect.NewError(connect.CodeInternal, errors.New("internal error")), false},
		{connect.NewError(connect.CodeCanceled, errors.New("canceled")), false},
		{errors.New("unexpected EOF"), false},
	} {
		if got := cleanRefusal(tc.err); got != tc.want {
			t.Errorf("cleanRefusal(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
